"""A compose service's restart on the tests' own real Docker daemon with Debian's
`docker-compose` and the simulated server as the service (issue 44): an edited value reaches
it as the person typed it (item 9: compose interpolates `$` in every file it reads, the
console's override too), and a traced service needs nothing of the console's cache (item 8).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import sim_box
from tests.docker import IMAGE, Dockerd
from tests.sim.test_sim_serve import free_port
from vllm_console.console.hostside.restart import compose
from vllm_console.console.hostside.restart.hook_files import hook_files
from vllm_console.console.hostside.restart.status import StatusFile
from vllm_console.console.hostside.vocabulary import is_hook_dir
from vllm_console.console.sim import SimTree
from vllm_console.console.sim.container import container_argv, container_env

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

PROJECT = "vclit"


@pytest.fixture
def service(dockerd: Dockerd, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[SimTree, Path]]:
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed (scripts/ensure-test-tools.sh installs it)")
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    base = Path(tempfile.mkdtemp(prefix="sim-compose-", dir="/tmp"))
    base.chmod(0o755)
    tree = sim_box.sim_tree(base, free_port())
    argv = container_argv(tree)
    q = json.dumps
    mounts = [w for w in sim_box.system_mounts() if w != "-v"] + [f"{tree.root}:{tree.root}"]
    lines = ['version: "2.4"', "services:", "  vllm:", f"    image: {q(IMAGE)}",
             "    network_mode: host", f"    entrypoint: [{q(argv[0])}]",
             f"    command: [{', '.join(q(w.replace('$', '$$')) for w in argv[1:])}]",
             "    environment:",
             *(f"      {k}: {q(v)}" for k, v in container_env(tree).items()),
             "    volumes:", *(f"      - {q(m)}" for m in mounts)]
    (base / "docker-compose.yml").write_text("\n".join(lines) + "\n")
    up = subprocess.run(["docker-compose", "--project-name", PROJECT, "up", "-d"], cwd=base,
                        env=sim_box.cli_env(dockerd), capture_output=True, text=True,
                        timeout=120, check=False)
    assert up.returncode == 0, up.stderr
    try:
        sim_box.wait_health(dockerd, tree, f"{PROJECT}_vllm_1")
        yield tree, base
    finally:
        subprocess.run(["docker-compose", "--project-name", PROJECT, "down", "-t", "2"],
                       cwd=base, env=sim_box.cli_env(dockerd), capture_output=True,
                       timeout=120, check=False)
        sim_box.kill_host_servers(tree)
        shutil.rmtree(base, ignore_errors=True)


def test_an_edited_value_with_dollars_reaches_the_service_as_typed(
        dockerd: Dockerd, service: tuple[SimTree, Path], tmp_path: Path) -> None:
    """`MY_PW=p4$$w0rd$HOME` (as the restart dialog shows it) is that value in the recreated
    container, not `p4$w0rd` and the host's $HOME."""
    tree, _base = service
    name = f"{PROJECT}_vllm_1"
    before = sim_box.inspect(dockerd, name)
    env = {**dict(e.split("=", 1) for e in before["Config"]["Env"]),
           "MY_PW": "p4$$w0rd$HOME"}
    argv = container_argv(tree)
    plan = {"id": "lit1", "container": {"runtime": "docker", "ref": name, "id": before["Id"],
                                        "restart_policy": "no", "recreate": True,
                                        "compose": True, "argv": argv},
            "argv": argv, "env": env, "pid": before["State"]["Pid"], "port": tree.port,
            "url": tree.url, "timeouts": {"term": 2, "kill": 5, "free": 5, "startup": 30},
            "paths": {"status": str(tmp_path / "restart-lit1.status")}}
    status = StatusFile(plan["paths"]["status"])  # type: ignore[index]
    try:
        compose.run(plan, status, lambda: False, "", lambda _plan: None)
    finally:
        status.close()
    final = [json.loads(line) for line in Path(plan["paths"]["status"])  # type: ignore[index]
             .read_text().splitlines()][-1]
    assert final["step"] == "ready", final
    after = sim_box.inspect(dockerd, name)
    assert after["Id"] != before["Id"]
    assert "MY_PW=p4$$w0rd$HOME" in after["Config"]["Env"], after["Config"]["Env"]


def test_a_traced_restart_of_the_service_through_compose(
        dockerd: Dockerd, service: tuple[SimTree, Path], tmp_path: Path) -> None:
    """`restart --trace` of the compose service (the CLI, as a user runs it): compose
    recreates it with the hook, and the new server is ready."""
    tree, _base = service
    name = f"{PROJECT}_vllm_1"
    before = sim_box.inspect(dockerd, name)
    hosts = tmp_path / "h"
    hosts.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{tree.url}"\n')
    done = sim_box.run_cli(dockerd, "restart", "box", "--config", str(hosts), "--yes",
                           "--trace")
    assert done.returncode == 0, done.stdout + done.stderr
    after = sim_box.inspect(dockerd, name)
    assert after["Id"] != before["Id"]
    assert any(e.startswith("VLLM_CONSOLE_TRACE_HOOK=") for e in after["Config"]["Env"])


def _traces(logs: str) -> list[dict[str, object]]:
    return [json.loads(line.split("[vllm-console-trace] ", 1)[1]) for line in logs.splitlines()
            if "[vllm-console-trace] {" in line]


def test_a_traced_service_survives_the_consoles_cache_cleared(
        dockerd: Dockerd, service: tuple[SimTree, Path], tmp_path: Path) -> None:
    """After `restart --trace` of a compose service, the container has its own copy of the
    trace hook: with the console's cache directory cleared, `docker restart` (or the daemon
    after a reboot) still starts it, traced. The old code bind-mounted the hook from the
    cache through the override ("error mounting": the server stayed down)."""
    tree, _base = service
    name = f"{PROJECT}_vllm_1"
    hosts = tmp_path / "h"
    hosts.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{tree.url}"\n')
    done = sim_box.run_cli(dockerd, "restart", "box", "--config", str(hosts), "--yes",
                           "--trace")
    assert done.returncode == 0, done.stdout + done.stderr
    traced = sim_box.inspect(dockerd, name)
    sim_box.clear_trace_hooks()
    restarted = dockerd.docker("restart", "-t", "5", name, check=False)
    assert restarted.returncode == 0, restarted.stderr
    sim_box.wait_health(dockerd, tree, name)
    after = sim_box.inspect(dockerd, name)
    assert after["Id"] == traced["Id"]
    assert after["State"]["StartedAt"] != traced["State"]["StartedAt"], "started again"
    env = dict(e.split("=", 1) for e in after["Config"]["Env"])
    hook = env["VLLM_CONSOLE_TRACE_HOOK"]
    assert env["PYTHONPATH"].split(":")[0] == hook
    for file in hook_files():  # the hook and the vocabulary it imports, inside
        assert dockerd.docker("exec", name, "/bin/ls", f"{hook}/{file}",
                              check=False).returncode == 0, file
    since = dockerd.docker("logs", "--since", after["State"]["StartedAt"], name)
    events = _traces(since.stdout + since.stderr)
    assert [e for e in events if e.get("event") == "installed"], \
        "the hook is active in the server started again"
    assert not [m for m in after["Mounts"] if is_hook_dir(str(m["Source"]))], \
        "the hook is the container's own copy, no mount of the console's cache"
