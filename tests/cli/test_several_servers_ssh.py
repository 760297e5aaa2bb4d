"""A host with three simulated servers, through a real OpenSSH sshd: every one listed, one
chosen by one rule, each pinned by `--port`, and `status`, `check`, `restart` and the TUI's
telemetry judging the same server from the same settings (DESIGN.md, "Several servers on one
host").
The host: `tests/several_support.py`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.real_vllm.support import cli
from tests.several_support import Three, host_config, three_servers
from tests.sshd import Sshd

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def three(sshd: Sshd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Three]:
    yield from three_servers(sshd, tmp_path_factory)


def status(three: Three, *args: str) -> dict[str, Any]:
    done = cli("status", "multi", "--config", str(three.hosts), "--json", *args)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def check(three: Three, *args: str) -> dict[str, Any]:
    done = cli("check", "multi", "--config", str(three.hosts), "--json", *args)
    assert done.stdout.strip(), done.stderr
    return dict(json.loads(done.stdout))


def links(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {link["id"]: link for link in report["links"]}


def test_status_lists_every_server_and_says_which_it_shows(three: Three) -> None:
    data = status(three)
    ports = [tree.port for tree in three.trees]
    servers = data["servers"]
    assert [s["port"] for s in servers] == ports  # the chosen (lowest port) first
    assert [s["chosen"] for s in servers] == [True, False, False]
    assert [s["pid"] for s in servers] == [three.pid(tree) for tree in three.trees]
    assert [s["model"] for s in servers] == [str(tree.target) for tree in three.trees]
    assert {s["state"] for s in servers} == {"ready"}
    assert {s["container"] for s in servers} == {None}
    assert [s["url"] for s in servers] == [f"http://127.0.0.1:{p}" for p in ports]
    assert set(servers[0]) == {"pid", "port", "url", "model", "container", "unit", "state",
                               "chosen"}
    assert data["serve"]["pid"] == servers[0]["pid"]
    text = cli("status", "multi", "--config", str(three.hosts))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert (f"servers 3 vLLM servers on this host: this is :{ports[0]} (pid "
            f"{servers[0]['pid']}); the others: :{ports[1]}, :{ports[2]}") in lines
    assert any(line.startswith("note") and "pin one with --port N (or serve.port" in line
               for line in lines), text.stdout


@pytest.mark.parametrize("index", [0, 1, 2])
def test_each_port_pins_its_own_server(three: Three, index: int) -> None:
    tree = three.trees[index]
    pid = three.pid(tree)
    data = status(three, "--port", str(tree.port))
    serve = data["serve"]
    assert serve["pid"] == pid
    assert serve["url"] == f"http://127.0.0.1:{tree.port}"
    assert serve["log"] == str(tree.log)  # its own log lines
    assert data["engine"]["model"] == str(tree.target)  # its own engine config
    assert [s["pid"] for s in data["servers"] if s["chosen"]] == [pid]
    report = check(three, "--port", str(tree.port))
    by_id = links(report)
    evidence = json.dumps(report)
    assert f"pid {pid}" in evidence or f'"pid": {pid}' in evidence, evidence[:2000]
    assert str(tree.root) in evidence
    for other in three.trees:
        if other is not tree:
            assert str(other.root) not in evidence
    if tree.scenario == "incident":
        assert by_id["config-correct"]["status"] == "fail"
    elif tree.scenario == "no-swa-code":
        assert by_id["code-present"]["status"] == "fail"
    else:
        assert by_id["code-present"]["status"] == "pass"
        assert by_id["config-correct"]["status"] == "pass"


def test_status_check_restart_and_the_telemetry_judge_the_same_server(three: Three) -> None:
    """Nothing pinned: the rule's server for `status`, `check` and the TUI's telemetry; the
    restart stops nothing and names how to pin one. Pinned: the same one for all four."""
    from vllm_console.console.restart import plan_restart
    from vllm_console.console.settings import HostConfig
    from vllm_console.console.telemetry.host_telemetry import HostTelemetry
    from vllm_console.console.transport.ssh_host import SSHHost

    first, second = (three.pid(t) for t in three.trees[:2])
    assert status(three)["serve"]["pid"] == first
    assert f"pid {first}" in json.dumps(check(three))
    refused = cli("restart", "multi", "--config", str(three.hosts), "--yes")
    assert refused.returncode != 0
    assert "nothing was stopped; choose one with --port N" in refused.stdout + refused.stderr
    assert three.pid(three.trees[0]) == first

    def config(port: int | None) -> HostConfig:
        return host_config(three, port)

    async def telemetry_pid(port: int | None) -> int | None:
        telemetry = HostTelemetry(SSHHost(config(port)), config(port))
        task = asyncio.create_task(telemetry.run(lambda _event: None))
        try:
            deadline = time.monotonic() + 60
            while telemetry.snapshot.serve.pid is None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            return telemetry.snapshot.serve.pid
        finally:
            telemetry.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def restart_pid(port: int) -> int | None:
        host = SSHHost(config(port))
        try:
            return (await plan_restart(host, config(port))).pid
        finally:
            await host.close()

    assert asyncio.run(telemetry_pid(None)) == first
    port = three.trees[1].port
    assert status(three, "--port", str(port))["serve"]["pid"] == second
    assert f"pid {second}" in json.dumps(check(three, "--port", str(port)))
    assert asyncio.run(telemetry_pid(port)) == second
    assert asyncio.run(restart_pid(port)) == second
    assert three.pid(three.trees[1]) == second  # planned only: nothing stopped


def test_restart_by_port_restarts_that_server_alone(three: Three) -> None:
    target = three.trees[2]
    before = {tree.port: three.identity(tree) for tree in three.trees}
    done = cli("restart", "multi", "--config", str(three.hosts), "--port", str(target.port),
               "--yes", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    after = {tree.port: three.identity(tree) for tree in three.trees}
    assert after[target.port] != before[target.port]
    for tree in three.trees[:2]:
        assert after[tree.port] == before[tree.port]
    data = status(three, "--port", str(target.port))
    assert data["serve"]["pid"] == after[target.port][0]
    ports = [s["port"] for s in data["servers"]]
    assert ports == [target.port, *(t.port for t in three.trees[:2])]  # the pinned first
