"""`stacks` on the real `vllm serve` as PID 1 of a real Docker container, its EngineCore
SIGSTOPped (the container tier's recipe; py-spy installed in the fixture's environment from
the registry, which the container mounts at its own path).

Dumped from the host by host pid: as root on the host (a `local` entry), the API server and
the EngineCore come back, the EngineCore's main thread in `vllm/v1/engine/core.py`, in bounded
time (no hang on the stopped process). Over the real sshd as a non-root login in the docker
group, the container's processes are root's: one line says what to grant, exit 2, no
traceback, also in bounded time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers.test_container_discovery import login_with_docker_access  # noqa: F401
from tests.docker import ContainerServer, Dockerd
from tests.real_vllm.fixture import RealVllm, ensure_py_spy
from tests.sshd import Sshd

pytestmark = [pytest.mark.docker, pytest.mark.real_vllm, pytest.mark.ssh,
              pytest.mark.timeout(600)]

BOUND_S = 60.0
"""The CLI's whole run (connect, discovery, the dumps' own 10 s deadline) on a loaded machine."""


def engine_core(main_pid: int) -> int:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == main_pid and b"EngineCore" in cmdline:
            return int(name)
    raise AssertionError(f"no EngineCore below pid {main_pid}")


@pytest.fixture(scope="module")
def stopped_engine(container_server: ContainerServer, real_vllm: RealVllm
                   ) -> Iterator[tuple[ContainerServer, int]]:
    ensure_py_spy(real_vllm)
    main = int(container_server.inspect()["State"]["Pid"])  # type: ignore[index]
    engine = engine_core(main)
    os.kill(engine, signal.SIGSTOP)
    try:
        yield container_server, engine
    finally:
        os.kill(engine, signal.SIGCONT)


def run(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "vllm_console", *args], capture_output=True,
                          text=True, timeout=BOUND_S + 60, env=env, check=False)
    return done, time.monotonic() - started


def local_hosts(path: Path, server: ContainerServer) -> Path:
    path.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{server.url}"\n')
    return path


def test_without_py_spy_on_the_host_the_line_says_to_install_it_there(
        stopped_engine: tuple[ContainerServer, int], dockerd: Dockerd, tmp_path: Path) -> None:
    """The container's environment is not where a host-side dump finds py-spy: the line says
    to install it on the host (it said "into the serving environment" before)."""
    server, _engine = stopped_engine
    hosts = local_hosts(tmp_path / "hosts.toml", server)
    env = {**os.environ, "DOCKER_HOST": dockerd.host, "HOME": str(tmp_path)}
    done, _took = run(["stacks", "box", "--config", str(hosts)], env)
    assert done.returncode == 2, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1, done.stderr
    assert "py-spy is not installed on the host" in said[0]
    assert f"the server runs in the container {server.name}" in said[0]
    assert "install it on the host: `python3 -m pip install --user py-spy`" in said[0]


def test_as_root_the_stopped_engine_in_the_container_is_dumped_from_the_host(
        stopped_engine: tuple[ContainerServer, int], dockerd: Dockerd, real_vllm: RealVllm,
        tmp_path: Path) -> None:
    server, engine = stopped_engine
    hosts = local_hosts(tmp_path / "hosts.toml", server)
    on_path = tmp_path / "bin"  # py-spy on the host's PATH, as `pip install` onto it leaves it
    on_path.mkdir()
    (on_path / "py-spy").symlink_to(ensure_py_spy(real_vllm))
    env = {**os.environ, "DOCKER_HOST": dockerd.host,
           "PATH": f"{on_path}:{os.environ['PATH']}"}
    done, took = run(["stacks", "box", "--config", str(hosts), "--json"], env)
    assert took < BOUND_S, took
    data = json.loads(done.stdout)
    assert done.returncode == 0, (done.stderr, data)
    roles = {p["role"]: p for p in data["processes"]}
    assert {"api-server", "engine-core"} <= set(roles), data
    core = roles["engine-core"]
    assert core["pid"] == engine  # the host pid
    assert core["container"] == server.name
    files = [f["file"] for f in core["threads"][0]["frames"]]
    assert any(f.endswith("vllm/v1/engine/core.py") for f in files), files
    assert any("dumped from the host by their host pids" in n for n in data["notes"])


@pytest.fixture
def login_py_spy(sshd: Sshd, real_vllm: RealVllm) -> Iterator[Path]:
    """py-spy in the login user's ~/.local/bin (`pip install --user py-spy`)."""
    local_bin = sshd.home / ".local" / "bin"
    made = not local_bin.exists()
    local_bin.mkdir(parents=True, exist_ok=True)
    link = local_bin / "py-spy"
    link.unlink(missing_ok=True)
    link.symlink_to(ensure_py_spy(real_vllm))
    try:
        yield link
    finally:
        link.unlink(missing_ok=True)
        if made:
            shutil.rmtree(sshd.home / ".local", ignore_errors=True)


def test_a_login_without_the_right_to_trace_gets_what_to_grant(
        stopped_engine: tuple[ContainerServer, int], sshd: Sshd, login_py_spy: Path,
        login_with_docker_access: str, tmp_path: Path) -> None:  # noqa: F811
    server, _engine = stopped_engine
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.gpu]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
                     f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                     f'[hosts.gpu.serve]\nurl = "{server.url}"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "SSH_AUTH_SOCK")}
    done, took = run(["stacks", "gpu", "--config", str(hosts)], env)
    assert took < BOUND_S, took
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1, done.stderr
    assert "not allowed to trace pid" in said[0]
    assert "log in as that user or as root, or grant CAP_SYS_PTRACE" in said[0]
