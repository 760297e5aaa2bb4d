"""The live telemetry tells the UI when the serving picture changes: a `ServingChanged` event
with the engine's progress, the latency window and the outcomes, on the simulated host (a real
process tree and `/metrics` on loopback), healthy and then hung."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sim.test_sim_serve import FAST, free_port
from vllm_console.console.cli.commands.demo import demo_config
from vllm_console.console.sim import SimTree, materialise, start_background, stop, wait_ready
from vllm_console.console.telemetry import (
    HostTelemetry,
    ServingChanged,
    TelemetryEvent,
    TelemetryOptions,
)
from vllm_console.console.telemetry.serving import EngineState
from vllm_console.console.transport.local_host import LocalHost

pytestmark = pytest.mark.sim_servers


@pytest.fixture
def stalled(tmp_path: Path) -> Iterator[SimTree]:
    tree = materialise("stalled", tmp_path / "sim", port=free_port(), stall_after_s=3.0,
                       **FAST)  # type: ignore[arg-type]
    proc = start_background(tree)
    try:
        assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
        yield tree
    finally:
        stop(proc, timeout=5)
        stop(tree, timeout=5)


async def test_the_ui_is_told_when_the_engine_serves_then_stalls(stalled: SimTree) -> None:
    config = demo_config(stalled)
    config = config.model_copy(update={"serve": config.serve.model_copy(
        update={"stall_s": 2.0})})
    telemetry = HostTelemetry(LocalHost("sim"), config,
                              TelemetryOptions(metrics_interval_s=0.5, health_interval_s=0.3))
    events: list[TelemetryEvent] = []
    task = asyncio.create_task(telemetry.run(events.append))
    try:
        async with asyncio.timeout(30):
            while not any(isinstance(e, ServingChanged) and
                          e.serving.progress is EngineState.STALLED for e in events):
                await asyncio.sleep(0.1)
    finally:
        telemetry.stop()
        await task
    serving = [e.serving for e in events if isinstance(e, ServingChanged)]
    states = [s.progress for s in serving]
    assert EngineState.OK in states
    assert states.index(EngineState.OK) < states.index(EngineState.STALLED)
    assert any(s.latency is not None and s.latency["ttft_s"] for s in serving)
    stall = next(s for s in serving if s.progress is EngineState.STALLED)
    assert stall.stalled_since is not None
    assert "no token generated for" in stall.reason
    assert telemetry.snapshot.engine_state()[0] is EngineState.STALLED
    # Told on change only: a scrape that changes nothing posts nothing.
    keys = [s.picture for s in serving]
    assert all(a != b for a, b in zip(keys, keys[1:], strict=False))
