"""A host with three simulated servers behind the test sshd (DESIGN.md, "Several servers on
one host"), for the CLI's tests and the TUI's.

The three run as the login user, started detached (as an operator's `nohup` would), each with
its own scenario so that a verdict tells them apart: `healthy`, `incident` (its draft config is
wrong: config-correct fails) and `no-swa-code`; their ports rise in that order. The hosts file's
`match` names their common directory, so that another test's server of the same user is never
one of them.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sshd import Sshd, chown_to, free_port
from vllm_console.console.settings import HostConfig, ServeSettings
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.tree import SimTree, materialise

SCENARIOS = ("healthy", "incident", "no-swa-code")


@dataclass
class Three:
    """The three servers, lowest port first, and a hosts file naming the host `multi`."""

    base: Path
    trees: list[SimTree]
    hosts: Path
    sshd: Sshd

    def pid(self, tree: SimTree) -> int:
        """The pid listening on the tree's port (its top-most `vllm serve`)."""
        return pid_on(self.base, tree.port)

    def identity(self, tree: SimTree) -> tuple[int, str]:
        """(pid, start ticks): a process, not a reused pid; (0, "") while none runs (in the
        middle of a restart)."""
        try:
            pid = pid_on(self.base, tree.port)
            return pid, Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        except (AssertionError, OSError):
            return 0, ""


def pid_on(base: Path, port: int) -> int:
    """The top-most process whose command line runs from `base` and asks for `port`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        words = [a.decode() for a in argv if a]
        if words and str(base) in words[0] and "serve" in words and \
                str(port) in words and not comm.startswith("VLLM::"):
            found.append(int(entry))
    assert found, f"no server on {port}"
    return min(found)


def launch(tree: SimTree, user: str) -> None:
    """The tree's `vllm serve` as `user`, detached from this test (`setsid -f`): a restart
    stops it, and nothing here waits on it."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.path.expanduser(f"~{user}"),
           "LANG": "C.UTF-8", **tree.serve_env()}
    tree.log.parent.mkdir(parents=True, exist_ok=True)
    tree.log.touch()
    chown_to(tree.log.parent, user)
    kwargs: dict[str, object] = {}
    if os.geteuid() == 0:
        kwargs = {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}
    with open(tree.log, "ab") as log:
        subprocess.run(["setsid", "-f", *tree.serve_argv()], stdin=subprocess.DEVNULL,
                       stdout=log, stderr=subprocess.STDOUT, cwd=tree.root, env=env,
                       check=True, **kwargs)  # type: ignore[call-overload]


def three_servers(sshd: Sshd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Three]:
    """Start the three (a fixture's body: `yield from three_servers(...)`)."""
    if sshd.proc is None:
        sshd.start()
    base = sshd.user_dir("several")
    ports = sorted(free_port() for _ in SCENARIOS)
    trees = [materialise(scenario, base / scenario, port=port, startup_s=0.3,
                         metrics_interval_s=0.3)
             for scenario, port in zip(SCENARIOS, ports, strict=True)]
    chown_to(base, sshd.user)
    try:
        for tree in trees:
            launch(tree, sshd.user)
            time.sleep(0.05)  # three distinct start times
        for tree in trees:
            assert wait_ready(tree, None, timeout=30), tree.log.read_text()
        hosts = tmp_path_factory.mktemp("several") / "hosts.toml"
        hosts.write_text(
            f'[hosts.multi]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
            f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
            f'[hosts.multi.serve]\nmatch = "{base}/ serve"\n'
            f'[hosts.multi.gpu]\nnvidia_smi = "{trees[0].nvidia_smi}"\n')
        yield Three(base, trees, hosts, sshd)
    finally:
        for tree in trees:
            stop(tree, timeout=3)




def host_config(three: Three, port: int | None = None) -> HostConfig:
    """The hosts file's `multi` entry as a HostConfig (`port`: `--port`)."""
    serve = ServeSettings(match=f"{three.base}/ serve", port=port)
    return three.sshd.host_config(serve=serve.model_dump(),
                                  gpu={"nvidia_smi": str(three.trees[0].nvidia_smi)})
