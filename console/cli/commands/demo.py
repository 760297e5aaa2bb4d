"""`vllm-console demo`: the console on a simulated serving host on this machine.

No GPU, no sshd, no network: the simulated host is materialised in a private temporary
directory, its fake `vllm serve` started in the background, and the console opened on it as a
local host. Everything it started is stopped and removed on exit; what the simulated host
keeps between runs (its cache) lives in that directory too.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
from pathlib import Path

from vllm_console.console.cli.commands.common import CommandError, reason
from vllm_console.console.cli.commands.sim import check_scenario, list_scenarios
from vllm_console.console.cli.commands.tui import check_theme


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(args: argparse.Namespace) -> int:
    from vllm_console.console.sim import stop
    from vllm_console.console.tui import hangup

    if args.list:
        return list_scenarios()
    check_scenario(args.scenario)
    check_theme(args.theme)
    root = Path(tempfile.mkdtemp(prefix="vllm-console-demo-"))
    use_private_cache(root)
    # A closed terminal (SIGHUP, a dead pty) or a kill (SIGTERM) must still stop the simulated
    # server and remove its tree: they end the app, or raise SystemExit before it runs, and
    # either way the `finally` below runs.
    hangup.install()
    try:
        return open_console(args.scenario, root / "host", theme=args.theme,
                            readonly=args.readonly)
    finally:
        try:
            tree_root = root / "host"
            if tree_root.exists():
                from vllm_console.console.sim import SimTree
                from vllm_console.console.sim.container import stop_containers

                tree = SimTree.load(tree_root)
                stop_containers(tree)
                stop(tree, timeout=5)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def use_private_cache(root: Path) -> None:
    """The simulated host's per-user cache (the host side's copy, the launch and restart
    records: `${XDG_CACHE_HOME:-~/.cache}/vllm-console` on a real host) inside the demo's
    own directory: the demo leaves nothing behind in the user's home. The local host side
    inherits this process's environment."""
    import os

    os.environ["XDG_CACHE_HOME"] = str(root / "cache")


async def record(host, tree, pid: int) -> None:  # type: ignore[no-untyped-def]
    """Record the simulated server's start as the console's last launch of the `demo` entry:
    a scenario whose server exits at start-up can then be started again with `r`."""
    from vllm_console.console.hostclient.launch_record import launch_record, record_launch
    from vllm_console.console.sim.runner import launch_environment

    await record_launch(host, launch_record(
        "demo", tree.serve_argv(), cwd=str(tree.root), env=launch_environment(tree),
        log=str(tree.log), url=tree.url, port=tree.port, pid=pid, by="vllm-console demo"))


def demo_config(tree, *, readonly: bool = False):  # type: ignore[no-untyped-def]
    """The host configuration of a simulated host on this machine: everything pinned to the
    tree, so that no other `vllm serve` on the machine is ever matched."""
    from vllm_console.console.settings import GpuSettings, HostConfig, ServeSettings

    return HostConfig(
        name="demo", local=True, readonly=readonly,
        serve=ServeSettings(python=str(tree.python), log=str(tree.log), target=str(tree.target),
                            draft=str(tree.draft), url=tree.url,
                            match=f"{tree.root}/venv serve"),
        gpu=GpuSettings(nvidia_smi=str(tree.nvidia_smi)),
    )


def container_demo_config(tree, *, readonly: bool = False):  # type: ignore[no-untyped-def]
    """The host configuration of a simulated host whose server runs in a container: this
    machine and the server's URL, nothing else, so that the console finds the server as it
    finds a real container's, through `docker ps` and `docker inspect` (the tree's stand-in,
    first on PATH) and the port it answers on. Not an empty serve table: a bare `vllm serve`
    of this user elsewhere on the machine would be found first, and `r` would restart it."""
    from vllm_console.console.settings import HostConfig, ServeSettings

    return HostConfig(name="demo", local=True, readonly=readonly,
                      serve=ServeSettings(url=tree.url))


def use_tree_bin(tree) -> None:  # type: ignore[no-untyped-def]
    """The tree's bin directory first on this process's PATH, which the local host side
    inherits: its `docker` and `nvidia-smi` are the ones the console runs."""
    import os

    os.environ["PATH"] = f"{tree.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


def open_console(scenario: str, where: Path, *, theme: str | None = None,
                 readonly: bool = False) -> int:
    """The console on a simulated host written into `where`: the tree, its server, the host's
    session and the record of its launch are made after the first frame."""
    from vllm_console.console.session.pending import PendingSession
    from vllm_console.console.tui import hangup
    from vllm_console.console.tui.app import ConsoleApp

    async def open_session():  # type: ignore[no-untyped-def]
        from vllm_console.console.session.host_session import HostSession
        from vllm_console.console.sim import get_scenario, materialise, start_background
        from vllm_console.console.sim.container import run_container
        from vllm_console.console.transport.local_host import LocalHost

        try:
            tree = materialise(scenario, where, port=free_port(), gpus=2, startup_s=4.0,
                               metrics_interval_s=2.0)
            if get_scenario(scenario).container:
                use_tree_bin(tree)
                run_container(tree)
                return HostSession(container_demo_config(tree, readonly=readonly),
                                   LocalHost("demo"), scenario=scenario)
            pid = start_background(tree).pid
            session = HostSession(demo_config(tree, readonly=readonly), LocalHost("demo"),
                                  scenario=scenario)
            await record(session.host, tree, pid)
        except OSError as exc:
            raise CommandError(f"cannot start the simulated host: {reason(exc)}") from None
        return session

    app = ConsoleApp([PendingSession("demo", open_session, readonly=readonly,
                                     scenario=scenario)], theme=theme)
    return hangup.run(app) or app.return_code or 0
