"""A real `vllm serve` as the service of a real compose project (Debian's `docker-compose` on
the tests' own Docker daemon): a change to its launch goes through compose, with the project's
own files and an override file that carries the change, never an edit of the user's file.

One server for the module (ready in ~40-60 s); the tests run in order: a refusal that stops
nothing, a traced restart, a plain one after it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker import ContainerServer, Dockerd, compose_server, models_volume
from tests.real_vllm.fixture import RealVllm, dflash_spec
from tests.real_vllm.support import cli, free_port
from vllm_console.console.hostside.restart.compose import BASE

pytestmark = [pytest.mark.docker, pytest.mark.real_vllm, pytest.mark.timeout(600)]

PROJECT = "vcproj"
RESTART_S = 420
"""A restart's CLI bound: the real server's start-up alone took 112 s (launched to ready) in a
loaded run, 42-65 s on a quiet machine; the console's own steps take 3-9 s. 120 s failed."""


@pytest.fixture(scope="module")
def project_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compose-project")


@pytest.fixture(scope="module")
def service(dockerd: Dockerd, real_vllm: RealVllm, project_dir: Path
            ) -> Iterator[ContainerServer]:
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed (scripts/ensure-test-tools.sh installs it)")
    volume = models_volume(dockerd, real_vllm, f"{PROJECT}-models")
    server = compose_server(dockerd, real_vllm, project=PROJECT, directory=project_dir,
                            port=free_port(), volume=volume,
                            speculative_config=dflash_spec(Path("/models/dflash-incident")))
    try:
        server.wait_ready()
        yield server
    finally:
        subprocess.run(["docker-compose", "--project-name", PROJECT, "down", "-t", "5"],
                       cwd=project_dir, env=dockerd.env, capture_output=True, timeout=120,
                       check=False)
        dockerd.docker("volume", "rm", "-f", volume, check=False)


@pytest.fixture
def hosts(service: ContainerServer, dockerd: Dockerd, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    path = tmp_path / "hosts.toml"
    path.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{service.url}"\n')
    return path


def _compose_knows(dockerd: Dockerd, project_dir: Path) -> list[str]:
    """The container ids compose itself lists for the service."""
    done = subprocess.run(["docker-compose", "--project-name", PROJECT, "ps", "-q", "vllm"],
                          cwd=project_dir, env=dockerd.env, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.split()


def _env(info: dict[str, Any]) -> dict[str, str]:
    return dict(e.split("=", 1) for e in info["Config"]["Env"])


def test_a_changed_compose_file_is_refused_and_nothing_stops(
        service: ContainerServer, hosts: Path, project_dir: Path) -> None:
    """Files edited since the service was made: recreating would apply those edits too, so
    the console stops nothing and says how to bring the service up first."""
    compose_file = project_dir / "docker-compose.yml"
    original = compose_file.read_text()
    before = service.inspect()
    compose_file.write_text(original.replace("    environment:\n",
                                             '    environment:\n      EDITED: "yes"\n'))
    try:
        done = cli("restart", "box", "--config", str(hosts), "--yes", "--trace")
    finally:
        compose_file.write_text(original)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Traceback" not in out
    assert "compose files of vcproj changed since" in out
    assert "nothing was stopped" in out
    after = service.inspect()
    assert after["Id"] == before["Id"]
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]  # type: ignore[index]


def test_a_traced_restart_recreates_the_service_through_compose(
        service: ContainerServer, dockerd: Dockerd, hosts: Path, project_dir: Path) -> None:
    """`restart --trace`: compose recreates the service with an override (the hook's env,
    naming the hook's copy inside the container, no mount of the console's cache); the
    user's file is byte for byte the same, no override is left behind, compose lists the new
    container as its service's, and the hook's events come from the engine inside it."""
    compose_file = project_dir / "docker-compose.yml"
    original = compose_file.read_bytes()
    listing = sorted(p.name for p in project_dir.iterdir())
    before = service.inspect()
    done = cli("restart", "box", "--config", str(hosts), "--yes", "--trace", timeout=RESTART_S)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Traceback" not in out
    assert "compose up --force-recreate vllm (project vcproj" in out
    after = service.inspect()
    assert after["Id"] != before["Id"]
    assert _compose_knows(dockerd, project_dir) == [after["Id"]]
    labels = after["Config"]["Labels"]  # type: ignore[index]
    assert labels["com.docker.compose.project"] == PROJECT
    assert labels["com.docker.compose.service"] == "vllm"
    assert labels[BASE] == before["Config"]["Labels"]["com.docker.compose.config-hash"]  # type: ignore[index]
    assert not [m for m in after["Mounts"] if "trace-hook" in m["Source"]], \
        "the hook is the container's own copy, no mount of the console's cache"  # type: ignore[attr-defined]
    env = _env(after)
    assert env["VLLM_CONSOLE_TRACE_HOOK"].startswith("/vllm-console/trace-hook-")
    assert env["PYTHONPATH"].split(":")[0] == env["VLLM_CONSOLE_TRACE_HOOK"]
    assert env["HF_HUB_OFFLINE"] == "1"  # the file's own environment kept
    assert after["Config"]["Cmd"] == before["Config"]["Cmd"]  # type: ignore[index]
    assert compose_file.read_bytes() == original
    assert sorted(p.name for p in project_dir.iterdir()) == listing
    assert service.health() == 200
    events = [json.loads(line.split("[vllm-console-trace] ", 1)[1])
              for line in service.logs().splitlines() if "[vllm-console-trace] {" in line]
    assert [e for e in events if e.get("event") == "call"], "no hook event inside the service"


def test_a_plain_restart_brings_the_service_back_to_its_own_files(
        service: ContainerServer, dockerd: Dockerd, hosts: Path, project_dir: Path) -> None:
    """After a traced run, a plain restart recreates the service from its files alone: the
    hook and its env are gone, and compose still owns the container."""
    before = service.inspect()
    done = cli("restart", "box", "--config", str(hosts), "--yes", timeout=RESTART_S)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "made again without it" in out
    after = service.inspect()
    assert after["Id"] != before["Id"]
    assert _compose_knows(dockerd, project_dir) == [after["Id"]]
    assert not [m for m in after["Mounts"] if "trace-hook" in m["Source"]]  # type: ignore[attr-defined]
    env = _env(after)
    assert not [k for k in env if k.startswith("VLLM_CONSOLE_")], env
    assert "PYTHONPATH" not in env
    assert service.health() == 200
