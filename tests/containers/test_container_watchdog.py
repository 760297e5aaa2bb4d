"""vLLM's watchdog dumps of a server inside a container are the container's files (issue 42):
on the tests' own real Docker daemon, the simulated server runs in a container with
`--watchdog-config` naming a dump dir under the container's /tmp; its engine hangs, the
watchdog writes its faulthandler dump there and logs `[Watchdog]Dumped stack to PATH` on the
container's output. `stacks --json` lists that dump, and the stacks report (what the TUI's
stacks screen and the bundle show) carries its text, read inside the container: the host has
no file at that path.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import sim_box
from tests.docker import Dockerd
from tests.sim.test_sim_serve import free_port
from vllm_console.console.hostclient.stacks import collect_stacks
from vllm_console.console.settings import ServeSettings
from vllm_console.console.sim import SimTree, materialise
from vllm_console.console.sim.container import container_argv
from vllm_console.console.transport.local_host import LocalHost

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

DUMP_DIR = "/tmp/vc-watchdog-test-dumps"
"""Inside the container: its own /tmp (the image's), not the host's."""


@pytest.fixture
def stalled_box(dockerd: Dockerd, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimTree]:
    base = Path(tempfile.mkdtemp(prefix="sim-watchdog-", dir="/tmp"))
    base.chmod(0o755)
    tree = materialise("stalled", base / "host", base_python=sim_box.BASE_PYTHON,
                       port=free_port(), startup_s=0.5, metrics_interval_s=0.3,
                       stall_after_s=1.0)
    name = f"vc-watchdog-{tree.port}"
    argv = [*container_argv(tree), "--watchdog-config",
            json.dumps({"dump_dir": DUMP_DIR, "timeout": 1})]
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    try:
        sim_box.run(dockerd, tree, name, argv=argv)
        yield tree
    finally:
        dockerd.docker("rm", "-f", "-v", name, check=False, timeout=60)
        sim_box.kill_host_servers(tree)
        shutil.rmtree(base, ignore_errors=True)


def test_a_containers_watchdog_dumps_are_read_inside_it(stalled_box: SimTree,
                                                       dockerd: Dockerd) -> None:
    tree = stalled_box
    name = f"vc-watchdog-{tree.port}"
    deadline = time.monotonic() + 30
    while "[Watchdog]Dumped stack to" not in (out := dockerd.docker(
            "logs", name, check=False).stdout) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert "[Watchdog]Dumped stack to" in out, out[-2000:]
    assert not os.path.exists(DUMP_DIR)  # the host has no such directory: only the container

    hosts = tree.root.parent / "hosts.toml"
    hosts.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{tree.url}"\n')
    done = sim_box.run_cli(dockerd, "stacks", "box", "--config", str(hosts), "--json")
    data = json.loads(done.stdout)
    (dump,) = data["watchdog_dumps"]
    assert dump["path"].startswith(f"{DUMP_DIR}/VLLM_STACK_DUMP_for_engine_0_")
    assert dump["at"] is not None  # read: its time is the file's, inside the container

    async def report() -> object:
        host = LocalHost()
        try:
            return await collect_stacks(host, ServeSettings(url=tree.url))
        finally:
            await host.close()

    stacks = asyncio.run(report())
    (shown,) = stacks.watchdog_dumps  # type: ignore[attr-defined]
    assert shown.error is None, shown.error
    assert "run_busy_loop" in shown.text  # the hung engine's own faulthandler dump
    assert "vllm/v1/engine/core.py" in shown.text


def container_env(dockerd: Dockerd, name: str) -> dict[str, str]:
    config = sim_box.inspect(dockerd, name)["Config"]
    return dict(item.split("=", 1) for item in config["Env"])


def test_a_containers_debug_restart_recreates_it_with_the_switches_and_back(
        dockerd: Dockerd) -> None:
    """`restart --debug` on a server in a container (as `D`): the container is made again
    with the switches in its environment; a plain restart after it makes it again without."""
    with sim_box.scratch_tree(free_port()) as tree:
        name = f"vc-debug-{tree.port}"
        try:
            sim_box.run(dockerd, tree, name)
            hosts = tree.root.parent / "hosts.toml"
            hosts.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\n'
                             f'url = "{tree.url}"\n')
            done = sim_box.run_cli(dockerd, "restart", "box", "--config", str(hosts),
                                   "--debug", "--yes")
            assert done.returncode == 0, done.stdout + done.stderr
            assert "restarting on box with the debug switches:" in done.stdout
            assert "+ env: VLLM_LOGGING_LEVEL=DEBUG" in done.stdout
            env = container_env(dockerd, name)
            assert env["VLLM_LOGGING_LEVEL"] == "DEBUG"
            assert env["NCCL_DEBUG"] == "INFO"
            done = sim_box.run_cli(dockerd, "restart", "box", "--config", str(hosts), "--yes")
            assert done.returncode == 0, done.stdout + done.stderr
            assert "restarting on box without the debug switches:" in done.stdout
            env = container_env(dockerd, name)
            assert "VLLM_LOGGING_LEVEL" not in env
            assert "NCCL_DEBUG" not in env
            assert "VLLM_CONSOLE_DEBUG" not in env
        finally:
            dockerd.docker("rm", "-f", "-v", name, check=False, timeout=60)
