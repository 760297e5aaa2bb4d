"""The simulated host serves vLLM's latency histograms and request outcomes, and its engine can
hang the way a real one does (vllm#39863): `/health` 200, requests running, no token. The
console's `status` reads both, as it reads a real server (tests/real_vllm proves the same on
real vLLM)."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sim.test_sim_serve import FAST, engine_pids, free_port
from vllm_console.console.parsers.metrics import parse_metrics
from vllm_console.console.parsers.serving import histogram_delta, percentiles
from vllm_console.console.settings import HostConfig, ServeSettings
from vllm_console.console.sim import (
    SimTree,
    health,
    materialise,
    start_background,
    stop,
    wait_ready,
)
from vllm_console.console.telemetry.oneshot import collect_status
from vllm_console.console.transport.local_host import LocalHost

pytestmark = pytest.mark.sim_servers


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[tuple[SimTree, object]]]:
    running: list[tuple[SimTree, object]] = []
    yield running
    for tree, proc in running:
        stop(proc, timeout=5)  # type: ignore[arg-type]
        stop(tree, timeout=5)


def serve(started: list, tmp_path: Path, scenario: str, **options: object) -> SimTree:
    tree = materialise(scenario, tmp_path / scenario, port=free_port(),
                       **{**FAST, **options})  # type: ignore[arg-type]
    proc = start_background(tree)
    started.append((tree, proc))
    assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
    return tree


def metrics(tree: SimTree) -> str:
    with urllib.request.urlopen(f"{tree.url}/metrics", timeout=5) as resp:
        return resp.read().decode()


def local(tree: SimTree, stall_s: float = 30.0) -> HostConfig:
    return HostConfig(name="sim", local=True,
                      serve=ServeSettings(url=tree.url, match=f"vllm serve {tree.root}/",
                                          stall_s=stall_s))


def test_the_sim_serves_latency_histograms_and_outcomes(started: list, tmp_path: Path) -> None:
    tree = serve(started, tmp_path, "healthy")
    first = parse_metrics(metrics(tree)).serving
    time.sleep(1.0)
    second = parse_metrics(metrics(tree)).serving
    assert first is not None
    assert second is not None
    before, after = first.merged, second.merged
    assert set(after.latency) == {"ttft_s", "itl_s", "e2e_s", "queue_s"}
    ttft = percentiles(histogram_delta(before.latency["ttft_s"], after.latency["ttft_s"]))
    e2e = percentiles(histogram_delta(before.latency["e2e_s"], after.latency["e2e_s"]))
    assert ttft is not None
    assert e2e is not None
    assert 0 < ttft["p50"] <= ttft["p90"] <= ttft["p99"] < 5
    assert e2e["p50"] > ttft["p50"]
    assert set(after.finished) == {"stop", "length", "abort", "error"}
    assert after.finished["stop"] > before.finished["stop"]
    assert after.preemptions == 0


async def test_a_hung_sim_engine_is_stalled_while_health_answers(started: list,
                                                                 tmp_path: Path) -> None:
    tree = serve(started, tmp_path, "stalled", stall_after_s=1.0)
    time.sleep(1.5)  # the engine has hung
    assert health(tree) == 200
    snap = await collect_status(LocalHost(), local(tree, stall_s=2.0))
    data = snap.status_json()
    assert data["serve"]["state"] == "ready"
    assert data["serve"]["health"] == "healthy"
    assert data["serve"]["engine"] == "stalled", data["serve"]["engine_reason"]
    assert "no token generated for" in data["serve"]["engine_reason"]


async def test_a_stopped_sim_engine_is_stalled_and_recovers(started: list,
                                                            tmp_path: Path) -> None:
    tree = serve(started, tmp_path, "healthy")
    snap = await collect_status(LocalHost(), local(tree, stall_s=2.0))
    assert snap.status_json()["serve"]["engine"] == "ok"
    server = started[-1][1].pid
    [engine] = engine_pids(server)
    os.kill(engine, signal.SIGSTOP)
    try:
        data = (await collect_status(LocalHost(), local(tree, stall_s=2.0))).status_json()
        assert data["serve"]["engine"] == "stalled", data["serve"]["engine_reason"]
        assert f"EngineCore pid {engine} is stopped" in data["serve"]["engine_reason"]
    finally:
        os.kill(engine, signal.SIGCONT)
    data = (await collect_status(LocalHost(), local(tree, stall_s=2.0))).status_json()
    assert data["serve"]["engine"] == "ok"


def test_a_hung_sim_engine_logs_one_quiet_stat_line_as_real_vllm_does(started: list,
                                                                     tmp_path: Path) -> None:
    """Measured on real vLLM 0.32: the first stat interval without a token is logged at 0.0
    tokens/s with the requests still running, then nothing while the engine stays stopped."""
    tree = serve(started, tmp_path, "stalled", stall_after_s=1.0)
    time.sleep(3.0)
    stats = [line for line in tree.log.read_text().splitlines() if "Avg prompt throughput" in line]
    quiet = [line for line in stats if "Avg generation throughput: 0.0 tokens/s" in line]
    assert len(quiet) == 1, stats[-3:]
    assert stats[-1] == quiet[0]
    assert "Running: 0 reqs" not in quiet[0]


async def test_a_stopped_api_server_is_not_answering_never_ready(started: list,
                                                                tmp_path: Path) -> None:
    """Issue 24 break 6: SIGSTOP to the API server after start-up; /health hangs."""
    tree = serve(started, tmp_path, "healthy")
    server = started[-1][1].pid
    os.kill(server, signal.SIGSTOP)
    try:
        data = (await collect_status(LocalHost(), local(tree))).status_json()
    finally:
        os.kill(server, signal.SIGCONT)
    serve_ = data["serve"]
    assert serve_["health"] == "not-answering"
    assert serve_["state"] == "not-answering"
    assert serve_["engine"] == "unknown"
    assert serve_["engine_reason"] == "/health stopped answering"
    data = (await collect_status(LocalHost(), local(tree))).status_json()
    assert data["serve"]["state"] == "ready"
