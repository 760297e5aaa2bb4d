"""`check` on a hung engine: vLLM's /health answers 200 while no token comes, so a stalled
engine fails runtime activation with that evidence (the engine state and its reason), on the
simulated host whose engine hangs as real vLLM's does (tests/real_vllm proves the hang on the
real engine)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.sim.test_sim_serve import engine_pids, free_port
from tests.sim.test_sim_serving import serve, started  # noqa: F401 - the fixture
from vllm_console.checks import Status, run_chain
from vllm_console.console.cli.commands.demo import demo_config
from vllm_console.console.sim import SimTree, health, materialise, start_background, wait_ready
from vllm_console.console.transport.local_host import LocalHost

pytestmark = pytest.mark.sim_servers


def settings(tree: SimTree):  # type: ignore[no-untyped-def]
    return demo_config(tree).serve.model_copy(update={"stall_s": 2.0})


async def test_a_stalled_engine_fails_runtime_activation_with_the_evidence(
        started: list, tmp_path: Path) -> None:  # noqa: F811
    tree = serve(started, tmp_path, "stalled", stall_after_s=1.0)
    time.sleep(1.5)  # the engine has hung
    assert health(tree) == 200
    report = await run_chain(LocalHost(), settings(tree), host_label="sim")
    link = report.link("runtime-activation")
    assert link.status is Status.FAIL, link.summary
    assert link.summary.startswith("the engine is stalled: ")
    assert "no token generated for" in link.summary
    assert link.details["engine"] == "stalled"
    [evidence] = [e for e in link.evidence if e.probe == "serving"]
    assert evidence.command.startswith(f"GET {tree.url}/metrics (")
    assert "stalled" in evidence.excerpt
    assert "running" in evidence.excerpt
    assert report.broken_link == "runtime-activation"
    assert report.root_cause == "runtime-activation"  # code, fields and config all pass


async def test_a_stalled_engines_evidence_points_at_the_watchdog_dumps(
        started: list, tmp_path: Path) -> None:  # noqa: F811
    """Run with vLLM's watchdog (`--watchdog-config`, as the debug restart adds on 0.33+), the
    hung engine's stacks are dumped and the run logs `[Watchdog]Dumped stack to PATH`: the
    failed link's evidence and hint name those files (where the engine stopped)."""
    dumps = tmp_path / "dumps"
    tree = materialise("stalled", tmp_path / "wd", port=free_port(), startup_s=0.3,
                       metrics_interval_s=0.3, stall_after_s=0.5)
    proc = start_background(tree, argv=[*tree.serve_argv(), "--watchdog-config",
                                        json.dumps({"dump_dir": str(dumps), "timeout": 0.5})])
    started.append((tree, proc))
    assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
    deadline = time.monotonic() + 20
    while not (dumps.exists() and any(dumps.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.2)
    [dump] = list(dumps.iterdir())
    time.sleep(0.5)  # its log line follows the file
    report = await run_chain(LocalHost(), settings(tree), host_label="sim")
    link = report.link("runtime-activation")
    assert link.status is Status.FAIL, link.summary
    assert link.details["engine"] == "stalled"
    assert link.details["watchdog_dumps"] == [str(dump)]
    [evidence] = [e for e in link.evidence if e.probe == "watchdog"]
    assert evidence.excerpt == f"dumped: {dump}"
    assert str(dump) in link.hint
    assert "vllm-console stacks" in link.hint


async def test_a_working_engine_leaves_runtime_activation_to_the_log(
        started: list, tmp_path: Path) -> None:  # noqa: F811
    tree = serve(started, tmp_path, "healthy")
    report = await run_chain(LocalHost(), settings(tree), host_label="sim")
    link = report.link("runtime-activation")
    assert link.status is Status.UNKNOWN, link.summary  # silence about SWA, as before
    assert link.details["engine"] in ("ok", "idle")  # between the sim's bursts: idle


async def test_an_engine_killed_under_a_living_api_server_is_dead(
        started: list, tmp_path: Path) -> None:  # noqa: F811
    tree = serve(started, tmp_path, "healthy")
    server = started[-1][1].pid
    [engine] = engine_pids(server)
    os.kill(engine, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while health(tree) == 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    report = await run_chain(LocalHost(), settings(tree), host_label="sim")
    link = report.link("runtime-activation")
    assert link.status is Status.FAIL, link.summary
    assert link.details["engine"] == "dead", link.details
    assert "no EngineCore process" in link.details["engine_reason"]
    [evidence] = [e for e in link.evidence if e.probe == "serving"]
    assert "/health: 503" in evidence.excerpt
    assert f"below pid {server}: no EngineCore" in evidence.excerpt
