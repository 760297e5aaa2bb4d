"""A container restart acts on its container and nothing else (issue 44, items 1-3), on the
tests' own real Docker daemon with the simulated server inside containers (a second each):
a pinned container that is missing, stopped, not a server or behind a frozen daemon is refused
with nothing started; a last-launch record never stands in for a container (the CLI's record
on the host, the TUI's memory of a server it saw); a `--pid host` container and an image whose
CMD is a shell that execs `vllm serve` are seen as the containers they are; the restart
dialog's command line is the container's server's (item 11).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import sim_box
from tests.docker import IMAGE, Dockerd
from tests.sim.test_sim_serve import free_port
from vllm_console.console.hostclient.discovery import resolve_serve
from vllm_console.console.hostclient.launch_record import (
    launch_record,
    record_launch,
    seen_launch,
)
from vllm_console.console.restart import RestartError, plan_restart
from vllm_console.console.settings import HostConfig, ServeSettings
from vllm_console.console.sim import SimTree
from vllm_console.console.transport.local_host import LocalHost

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


@pytest.fixture
def tree() -> Iterator[SimTree]:
    """A simulated host, its servers (on the host, if a wrong restart started one) ended."""
    with sim_box.scratch_tree(free_port()) as made:
        yield made


@pytest.fixture
def boxes(dockerd: Dockerd) -> Iterator[list[str]]:
    """Containers to remove after the test."""
    made: list[str] = []
    yield made
    for name in made:
        dockerd.docker("rm", "-f", "-v", name, check=False, timeout=60)


def hosts(path: Path, url: str = "") -> Path:
    serve = f'[hosts.box.serve]\nurl = "{url}"\n' if url else ""
    path.write_text(f"[hosts.box]\nlocal = true\n{serve}")
    return path


def record_host_launch(tree: SimTree) -> int:
    """This host entry's last launch on record: the tree's server as a host process, on a
    port of its own (what the old code started in place of a missing container)."""
    port = free_port()
    argv = [*tree.serve_argv()[:-1], str(port)]
    record = launch_record("box", argv, cwd=str(tree.root), env=dict(os.environ),
                           log=str(tree.root / "host.log"), url=f"http://127.0.0.1:{port}",
                           port=None, pid=0, by="a test")

    async def write() -> None:
        host = LocalHost("box")
        try:
            await record_launch(host, record)
        finally:
            await host.close()

    asyncio.run(write())
    return port


@pytest.mark.parametrize("state", ["missing", "stopped", "no-server"])
def test_a_pinned_container_that_runs_no_server_is_refused_and_nothing_starts(
        dockerd: Dockerd, tree: SimTree, boxes: list[str], tmp_path: Path, state: str) -> None:
    """`restart --container NAME --yes` for a container that does not exist, is stopped, or
    runs no vLLM server: refused (exit 2), the container named, and no server started on the
    host from this entry's last launch (the old code started it and said "ready")."""
    name = f"vllm-console-pinned-{state}"
    boxes.append(name)
    if state == "stopped":
        sim_box.run(dockerd, tree, name)
        dockerd.docker("stop", "-t", "5", name)
    elif state == "no-server":
        dockerd.docker("run", "-d", "--name", name, "--network", "host",
                       *sim_box.system_mounts(), "--entrypoint", "/usr/bin/sleep", IMAGE, "600")
    record_host_launch(tree)
    done = sim_box.run_cli(dockerd, "restart", "box", "--config", str(hosts(tmp_path / "h")),
                           "--container", name, "--yes")
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert name in out, out
    assert "nothing was stopped or started" in out, out
    assert "Traceback" not in out
    time.sleep(1)
    assert sim_box.host_servers(tree) == [], "a server was started on the host"
    if state != "missing":
        after = sim_box.inspect(dockerd, name)["State"]
        assert after["Running"] is (state == "no-server")


def test_a_frozen_daemon_is_an_error_not_no_container(
        dockerd: Dockerd, tree: SimTree, boxes: list[str], tmp_path: Path) -> None:
    """The daemon stopped (SIGSTOP: `docker ps` never answers) while the pinned container
    serves: the restart waits out the CLI's bound, says the daemon is not answering, and
    starts nothing on the host; the container serves on, untouched."""
    name = "vllm-console-frozen"
    boxes.append(name)
    before = sim_box.run(dockerd, tree, name)
    record_host_launch(tree)
    dockerd.proc.send_signal(signal.SIGSTOP)
    try:
        done = sim_box.run_cli(dockerd, "restart", "box", "--config",
                               str(hosts(tmp_path / "h")), "--container", name, "--yes")
    finally:
        dockerd.proc.send_signal(signal.SIGCONT)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "not answering" in out, out
    assert "nothing was stopped or started" in out, out
    time.sleep(1)
    assert sim_box.host_servers(tree) == []
    after = sim_box.inspect(dockerd, name)
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    assert sim_box.health(tree) == 200


def test_the_tui_remembers_that_the_server_it_saw_ran_in_a_container(
        dockerd: Dockerd, tree: SimTree, boxes: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`r` after the container stopped: the TUI's plan comes from the server it last saw
    (`seen_launch`); that server was a container's, so its command line is never started on
    the host: the plan is refused, naming the container and `docker start`."""
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    name = "vllm-console-seen"
    boxes.append(name)
    sim_box.run(dockerd, tree, name)
    config = HostConfig(name="box", local=True, serve=ServeSettings(url=tree.url))

    async def go() -> str:
        host = LocalHost("box")
        try:
            found = await resolve_serve(host, config.serve)
            assert found.process is not None
            assert found.process.container is not None
            seen = seen_launch(found.process, "box")
            dockerd.docker("stop", "-t", "5", name)
            try:
                plan = await plan_restart(host, config, seen=seen)
            except RestartError as exc:
                return str(exc)
            return f"planned: {plan.mode} {plan.command}"
        finally:
            await host.close()

    said = asyncio.run(go())
    assert f"docker container {name}" in said, said
    assert f"docker start {name}" in said, said


def test_a_pid_host_container_is_a_container(
        dockerd: Dockerd, tree: SimTree, boxes: list[str], tmp_path: Path) -> None:
    """`--pid host` shares the host's pid namespace: the server is still the container's
    (its cgroup says so). `status --json` names the container; `restart` restarts the
    container through the daemon (same id, started again), never signals its main process
    and relaunches on the host."""
    name = "vllm-console-pid-host"
    boxes.append(name)
    before = sim_box.run(dockerd, tree, name, "--pid", "host")
    config = str(hosts(tmp_path / "h", tree.url))
    done = sim_box.run_cli(dockerd, "status", "box", "--config", config, "--json")
    assert done.returncode == 0, done.stderr
    serve = json.loads(done.stdout)["serve"]
    assert serve["container"] is not None, serve
    assert serve["container"]["name"] == name
    assert serve["pid"] == before["State"]["Pid"]
    done = sim_box.run_cli(dockerd, "restart", "box", "--config", config, "--yes")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"docker restart {name}" in out, out
    after = sim_box.inspect(dockerd, name)
    assert after["Id"] == before["Id"]
    assert after["State"]["Running"] is True
    assert after["State"]["StartedAt"] != before["State"]["StartedAt"]
    assert sim_box.host_servers(tree) == []
    assert sim_box.health(tree) == 200


def test_an_image_whose_cmd_is_a_shell_that_execs_the_server(
        dockerd: Dockerd, tree: SimTree, boxes: list[str], tmp_path: Path) -> None:
    """The container's main command is `/bin/sh -c "exec vllm serve ..."`: its main process
    is the server now (the container's own process list says so). Found as the container's
    without a pin (not "held by a process of another user"), and restarted through the
    daemon when pinned."""
    import shlex

    from vllm_console.console.sim.container import container_argv

    name = "vllm-console-wrapper"
    boxes.append(name)
    script = "exec " + shlex.join(container_argv(tree))
    before = sim_box.run(dockerd, tree, name, argv=["-c", script], entrypoint="/bin/sh")
    assert before["Path"] == "/bin/sh"
    done = sim_box.run_cli(dockerd, "status", "box", "--config",
                           str(hosts(tmp_path / "h", tree.url)), "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["serve"]["container"] is not None, status["serve"]
    assert "another user" not in done.stdout
    done = sim_box.run_cli(dockerd, "restart", "box", "--config", str(hosts(tmp_path / "p")),
                           "--container", name, "--yes")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"docker restart {name}" in out, out
    after = sim_box.inspect(dockerd, name)
    assert after["Id"] == before["Id"]
    assert after["State"]["StartedAt"] != before["State"]["StartedAt"]
    assert sim_box.host_servers(tree) == []
    assert sim_box.health(tree) == 200


def test_the_restart_dialogs_command_line_is_the_containers_server(
        dockerd: Dockerd, tree: SimTree, boxes: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`r` on a server in a real container: the plan is described as `docker restart NAME`,
    and the dialog's command-line field holds the server's command line as the container runs
    it (not that description); an edit of it makes the recreation with that command line."""
    from textual.app import App
    from textual.widgets import Input

    from vllm_console.console.restart.edit import edit_plan, parse_argv
    from vllm_console.console.restart.model import RestartPlan, shown_argv
    from vllm_console.console.sim.container import container_argv
    from vllm_console.console.tui.screens.restart import RestartScreen

    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    name = "vllm-console-edit-field"
    boxes.append(name)
    sim_box.run(dockerd, tree, name)
    config = HostConfig(name="box", local=True, serve=ServeSettings(url=tree.url))

    def editor(plan: RestartPlan, *, env: str = "", argv: str = "") -> RestartPlan:
        return edit_plan(plan, argv=parse_argv(argv) if argv else ())

    async def go() -> tuple[RestartPlan, str, RestartPlan]:
        host = LocalHost("box")
        try:
            plan = await plan_restart(host, config)
        finally:
            await host.close()
        dialog = RestartScreen("Restart vllm serve on box", plan, editor)
        app: App[None] = App()
        async with app.run_test(size=(120, 40)) as pilot:
            app.push_screen(dialog)
            await pilot.pause(0.2)
            field = dialog.query_one("#restart-argv", Input)
            shown = field.value
            await pilot.press("e")
            await pilot.pause(0.1)
            field.focus()
            await pilot.press("end", *" --max-num-seqs 8")
            await pilot.pause(0.2)
            assert dialog.error == ""
            return plan, shown, dialog.plan

    plan, shown, edited = asyncio.run(go())
    assert plan.command == f"docker restart {name}", plan.command
    assert shown == shown_argv(container_argv(tree))
    assert edited.recreate
    assert list(edited.argv) == [*container_argv(tree), "--max-num-seqs", "8"]
