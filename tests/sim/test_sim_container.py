"""The simulated host's containerised server: the `docker` stand-in answers as the real CLI
does for what the console runs, and the console finds, reads and restarts the server as a
container's main process (no Docker, no sshd, no real vLLM: the real daemon's proof is
tests/containers)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sim.test_sim_serve import FAST, free_port
from vllm_console.console.hostclient.discovery import resolve_serve
from vllm_console.console.settings import ServeSettings
from vllm_console.console.sim import SimTree, health, materialise, stop, wait_ready
from vllm_console.console.sim.container import (
    NAME,
    container_argv,
    docker,
    inspect,
    run_container,
    stop_containers,
)
from vllm_console.console.transport.local_host import LocalHost

pytestmark = pytest.mark.sim_servers

PS_KEYS = {"Command", "CreatedAt", "ID", "Image", "Labels", "LocalVolumes", "Mounts", "Names",
           "Networks", "Ports", "RunningFor", "Size", "State", "Status"}
CONTAINER_KEYS = {"runtime", "id", "name", "image", "started_at", "restart_policy",
                  "compose_project", "compose_service"}
FIXED_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ")
NANO_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


def _pid_namespaces_work() -> bool:
    userns = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
    try:
        return subprocess.run(["unshare", "--pid", "--fork", *userns, "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def boxed() -> Iterator[SimTree]:
    """The container scenario's server as container `vllm-sim`, ready; the tree's bin
    directory first on PATH (as the demo has it) for this process and the console it runs."""
    if not _pid_namespaces_work():
        pytest.skip("the simulated container needs a pid namespace (unshare --pid)")
    base = Path(tempfile.mkdtemp(prefix="sim-container-"))
    tree = materialise("container", base / "host", port=free_port(), **FAST)
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{tree.root / 'bin'}:{path}"
    try:
        run_container(tree)
        assert wait_ready(tree, timeout=30), docker(tree, "logs", NAME).stderr[-2000:]
        yield tree
    finally:
        os.environ["PATH"] = path
        stop_containers(tree)
        stop(tree, timeout=5)
        shutil.rmtree(base, ignore_errors=True)


def hosts_file(tree: SimTree, path: Path) -> Path:
    path.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{tree.url}"\n')
    return path


def console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_console", *args], capture_output=True,
                          text=True, timeout=180)


def state(tree: SimTree) -> dict[str, Any]:
    return dict(inspect(tree)["State"])


def test_ps_lists_the_running_container_in_dockers_json(boxed: SimTree) -> None:
    done = docker(boxed, "ps", "--no-trunc", "--format", "{{json .}}")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert set(row) == PS_KEYS
    assert re.fullmatch(r"[0-9a-f]{64}", row["ID"])
    assert row["Names"] == NAME
    assert row["State"] == "running"
    assert row["Status"].startswith("Up ")
    assert row["Networks"] == "host"
    assert json.loads(row["Command"]) == " ".join(container_argv(boxed))
    assert docker(boxed, "ps", "-q").stdout.split() == [row["ID"][:12]]


def test_inspect_describes_pid_1_of_another_namespace(boxed: SimTree) -> None:
    """The host pid of the container's main process runs in a pid namespace of its own (as a
    real container's does: the console never takes it for a bare process), and the body has
    the real shape."""
    info = inspect(boxed)
    assert info["Name"] == f"/{NAME}"
    assert [info["Path"], *info["Args"]] == container_argv(boxed)
    assert info["Config"]["Entrypoint"] == [container_argv(boxed)[0]]
    assert info["Config"]["Cmd"] == container_argv(boxed)[1:]
    assert f"PATH={boxed.root / 'venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin" in \
        info["Config"]["Env"]
    assert info["Config"]["WorkingDir"] == str(boxed.root)
    assert info["HostConfig"]["NetworkMode"] == "host"
    assert info["HostConfig"]["RestartPolicy"] == {"Name": "no", "MaximumRetryCount": 0}
    assert info["HostConfig"]["LogConfig"]["Type"] == "json-file"
    assert info["Mounts"] == [{"Type": "bind", "Source": str(boxed.root),
                               "Destination": str(boxed.root), "Mode": "", "RW": True,
                               "Propagation": "rprivate"}]
    assert info["NetworkSettings"]["Ports"] == {}
    st = info["State"]
    assert st["Running"] is True
    assert st["ExitCode"] == 0
    assert NANO_STAMP.match(st["StartedAt"])
    pid = st["Pid"]
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"serve" in argv
    templated = docker(boxed, "inspect", "-f", "{{.State.Running}} {{.State.StartedAt}}", NAME)
    assert templated.stdout == f"true {st['StartedAt']}\n"
    assert docker(boxed, "inspect", "-f", "{{json .State.Pid}}", NAME).stdout == f"{pid}\n"


def test_a_missing_container_or_command_gets_dockers_own_error(boxed: SimTree) -> None:
    missing = docker(boxed, "inspect", "nosuch")
    assert (missing.returncode, missing.stdout, missing.stderr) == \
        (1, "[]\n", "Error: No such object: nosuch\n")
    logs = docker(boxed, "logs", "nosuch")
    assert (logs.returncode, logs.stderr) == (1, "Error: No such container: nosuch\n")
    restart = docker(boxed, "restart", "nosuch")
    assert (restart.returncode, restart.stderr) == \
        (1, "Error response from daemon: No such container: nosuch\n")
    other = docker(boxed, "pull", "vllm/vllm-openai")
    assert other.returncode == 1
    assert other.stderr == "docker: 'pull' is not a docker command.\nSee 'docker --help'\n"
    flag = docker(boxed, "ps", "--size-of-everything")
    assert flag.returncode == 125
    assert flag.stderr.startswith("unknown flag: --size-of-everything")


def test_logs_are_the_json_file_log_with_fixed_nanosecond_stamps(boxed: SimTree) -> None:
    info = inspect(boxed)
    records = [json.loads(line) for line in Path(info["LogPath"]).read_text().splitlines()]
    assert records
    assert all(set(r) == {"log", "stream", "time"} and NANO_STAMP.match(r["time"])
               for r in records)
    assert {r["stream"] for r in records} == {"stdout", "stderr"}
    done = docker(boxed, "logs", "--timestamps", NAME)
    out, err = done.stdout.splitlines(), done.stderr.splitlines()
    assert out
    assert err
    assert all(FIXED_STAMP.match(line) for line in out + err)
    assert any("Application startup complete." in line for line in out + err)
    # --since a stamp: that line onwards, itself included (as the follower resumes).
    last = out[-1].split(" ", 1)[0]
    since = docker(boxed, "logs", "--timestamps", "--since", last, NAME).stdout.splitlines()
    assert since
    assert since[0].split(" ", 1)[0] >= last
    assert out[-1] in since


def test_logs_follow_goes_on_with_the_new_lines(boxed: SimTree) -> None:
    """The simulated server logs its metrics every 0.3 s: `--follow` from now shows them."""
    start = f"{time.time():.6f}"
    proc = subprocess.Popen([str(boxed.docker), "logs", "--follow", "--timestamps",
                             "--since", start, NAME], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert FIXED_STAMP.match(line), line
        assert line.split(" ", 1)[0] >= time.strftime("%Y-%m-%dT", time.gmtime(float(start)))
        assert proc.poll() is None  # still following
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def test_exec_runs_with_the_containers_environment(boxed: SimTree) -> None:
    done = docker(boxed, "exec", NAME, "sh", "-c", 'echo "$PATH"; pwd')
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{boxed.root / 'venv' / 'bin'}:/usr/local/bin:"
                                        "/usr/bin:/bin", str(boxed.root)]
    fed = subprocess.run([str(boxed.docker), "exec", "-i", NAME, "cat"], input="fed\n",
                         capture_output=True, text=True, timeout=30)
    assert fed.stdout == "fed\n"
    missing = docker(boxed, "exec", NAME, "no-such-tool")
    assert missing.returncode == 126
    assert 'exec: "no-such-tool": executable file not found in $PATH' in missing.stderr


def test_discovery_finds_the_server_in_its_container(boxed: SimTree) -> None:
    """Mirrors tests/containers' proof on the real daemon: the server is the container's
    main process, never a bare process of this user."""
    inspected = inspect(boxed)

    async def resolve() -> Any:
        host = LocalHost()
        try:
            return await resolve_serve(host, ServeSettings(url=boxed.url))
        finally:
            await host.close()

    resolution = asyncio.run(resolve())
    process = resolution.process
    assert process is not None, resolution
    assert process.container is not None, "found as a bare process, not as the container's"
    assert process.container.runtime == "docker"
    assert process.container.name == NAME
    assert process.container.id == inspected["Id"]
    assert process.pid == inspected["State"]["Pid"]
    assert process.target == str(boxed.target)
    assert process.draft == str(boxed.draft)
    assert process.url == boxed.url
    assert process.log is None  # no file: the log is the container's output
    assert any(child.comm.startswith("VLLM::") for child in process.children)
    assert not any("orphaned engine" in note for note in resolution.notes)


async def test_the_live_screen_sees_the_containers_server_running_and_its_draft(
        boxed: SimTree) -> None:
    """The agent's tree never holds a container's server (another pid namespace): the live
    picture takes the container discovery found for the server's life, so the run reads
    ready (never `exited`) and the draft diff reads the draft the container's command names."""
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.settings import HostConfig
    from vllm_console.console.telemetry.startup import StartupState

    config = HostConfig(name="box", local=True, serve=ServeSettings(url=boxed.url))
    session = HostSession(config, LocalHost("box"))
    telemetry = session.telemetry
    task = asyncio.create_task(telemetry.run(lambda _event: None))
    try:
        deadline = time.monotonic() + 30
        while telemetry.snapshot.startup.state is not StartupState.READY:
            assert telemetry.snapshot.startup.state is not StartupState.EXITED, \
                telemetry.snapshot.startup
            assert time.monotonic() < deadline, telemetry.snapshot.startup
            await asyncio.sleep(0.2)
        assert telemetry.snapshot.serve.container is not None
        diff = await session.load_diff()
        assert diff.error == "", diff.error
        assert diff.path == f"{boxed.draft}/config.json"
    finally:
        telemetry.stop()
        await asyncio.wait_for(task, 10)
        await session.host.close()


async def test_the_gpu_pane_names_the_container_of_the_memory_holder(boxed: SimTree) -> None:
    """The README promises `[NAME]` beside a container's GPU process; the simulated container
    (its cgroup names no container) showed `? pid N`: the pane takes the container's
    processes from discovery too."""
    from tests.app_support import screen_text, wait_until
    from vllm_console.console.cli.commands.demo import container_demo_config
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.tui.app import ConsoleApp

    session = HostSession(container_demo_config(boxed), LocalHost("demo"),
                          scenario="container")
    app = ConsoleApp([session], autostart_checks=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: "holding GPU memory:" in screen_text(app)
                         and "pid" in screen_text(app).split("holding GPU memory:")[1], 30,
                         "the GPU holders")
        await wait_until(pilot, lambda: f"[{NAME}]" in screen_text(app), 10, "[vllm-sim]")
        holders = screen_text(app).split("holding GPU memory:")[1].splitlines()[0]
        assert "? pid" not in holders, holders
        assert "VLLM::EngineCor pid" in holders, holders


def test_status_json_shows_the_container_and_reads_its_log(boxed: SimTree,
                                                            tmp_path: Path) -> None:
    done = console("status", "box", "--config", str(hosts_file(boxed, tmp_path / "h.toml")),
                   "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    serve = status["serve"]
    inspected = inspect(boxed)
    assert serve["running"] is True
    assert serve["pid"] == inspected["State"]["Pid"]
    assert serve["health"] == "healthy"
    assert serve["log"] is None
    container = serve["container"]
    assert set(container) == CONTAINER_KEYS
    assert container["name"] == NAME
    assert container["id"] == inspected["Id"]
    assert container["image"] == inspected["Config"]["Image"]
    assert container["started_at"] == inspected["State"]["StartedAt"][:19] + "Z"
    # Only the container's output (`docker logs`) says which aux layers the engine uses.
    assert status["engine"]["aux_layers"] == [2, 18, 34, 50, 64]
    # The list of every server names it too, as the chosen one, by its port and name.
    boxes = [s for s in status["servers"] if s["container"] == NAME]
    assert boxes == [{"pid": inspected["State"]["Pid"], "port": boxed.port, "url": boxed.url,
                      "model": str(boxed.target), "container": NAME, "unit": None,
                      "state": "ready", "chosen": True}]
    assert status["servers"][0] == boxes[0]


def test_restart_restarts_the_container_in_place(boxed: SimTree, tmp_path: Path) -> None:
    before = inspect(boxed)
    done = console("restart", "box", "--config", str(hosts_file(boxed, tmp_path / "h.toml")),
                   "--yes")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"docker restart {NAME}" in out
    after = inspect(boxed)
    assert after["Id"] == before["Id"]
    assert after["State"]["StartedAt"] != before["State"]["StartedAt"]
    new_pid = after["State"]["Pid"]
    assert new_pid != before["State"]["Pid"]
    assert f"pid {new_pid}" in out
    assert not Path(f"/proc/{before['State']['Pid']}").exists()
    assert health(boxed) == 200
    # The new run's log follows the old one in the same json-file log, from its new start.
    new_run = docker(boxed, "logs", "--since", after["State"]["StartedAt"], NAME)
    assert "Application startup complete." in new_run.stdout + new_run.stderr


async def test_r_says_before_asking_that_the_container_cannot_be_made_again(
        boxed: SimTree) -> None:
    """`R` in the container demo showed a dialog describing a full recreation, and failed
    only after the person confirmed it: the plan (what the dialog shows) is refused now."""
    from vllm_console.console.cli.commands.demo import container_demo_config
    from vllm_console.console.session.host_session import ActionError, HostSession
    from vllm_console.console.transport.local_host import LocalHost

    session = HostSession(container_demo_config(boxed), LocalHost("demo"),
                          scenario="container")
    try:
        with pytest.raises(ActionError, match="refuses here .*does not create containers"):
            await session.plan_restart(trace=True)
        plan = await session.plan_restart(trace=False)  # in place: offered as before
        assert plan.command == f"docker restart {NAME}"
    finally:
        await session.close()


def test_a_traced_restart_stops_nothing_and_says_the_stand_in_makes_no_containers(
        boxed: SimTree, tmp_path: Path) -> None:
    """`R` on the simulated container needs it made again, which only a real daemon does
    (tests/containers): the console says why, and the container runs on untouched."""
    before = inspect(boxed)
    image = docker(boxed, "image", "inspect", before["Config"]["Image"])
    assert image.returncode == 0, image.stderr
    assert json.loads(image.stdout)[0]["Id"] == before["Image"]
    done = console("restart", "box", "--config", str(hosts_file(boxed, tmp_path / "h.toml")),
                   "--yes", "--trace")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Traceback" not in out
    assert "nothing was changed" in out
    assert "stand-in does not create containers" in out
    assert "restarting on" not in out, "refused when planned, before the confirmation"
    after = inspect(boxed)
    assert after["State"]["Pid"] == before["State"]["Pid"]
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    assert health(boxed) == 200
