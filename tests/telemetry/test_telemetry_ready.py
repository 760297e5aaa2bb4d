"""The server is asked whether it is ready as soon as its log says so, not a period later."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console.cli.commands.demo import demo_config, free_port
from console.sim import materialise, start_background, stop
from console.telemetry import HostTelemetry, TelemetryEvent, TelemetryOptions
from console.telemetry.server import Health
from console.telemetry.startup import StartupState
from console.transport.local_host import LocalHost


async def test_the_log_saying_ready_asks_the_server_at_once(tmp_path: Path) -> None:
    """`/health` is asked every `health_interval_s` until the server answers. The log's
    "Application startup complete" came, and the console still said "not answering" until
    the next period (2 s by default; a minute here): the restart looked slower than it was."""
    tree = materialise("incident", tmp_path / "sim", port=free_port(), startup_s=0.5,
                       metrics_interval_s=0.3)
    proc = start_background(tree)
    telemetry = HostTelemetry(LocalHost("sim"), demo_config(tree), TelemetryOptions(
        health_interval_s=60.0, gpu_source="none"))
    events: list[TelemetryEvent] = []
    task = asyncio.create_task(telemetry.run(events.append))
    try:
        async with asyncio.timeout(30):
            while telemetry.snapshot.startup.state is not StartupState.READY:
                await asyncio.sleep(0.05)
        async with asyncio.timeout(10):
            while telemetry.snapshot.readiness.health is not Health.HEALTHY:
                await asyncio.sleep(0.05)
    finally:
        telemetry.stop()
        await task
        stop(proc, timeout=5)
        stop(tree, timeout=5)
    assert telemetry.snapshot.readiness.ready


async def test_the_second_scrape_comes_soon_after_the_first(tmp_path: Path) -> None:
    """Rates, latency percentiles and the engine's state need two `/metrics` scrapes. The
    second came a whole metrics period after the first (5 s by default, a minute here), so the
    serving strip said nothing of them for that long after the server was found healthy."""
    tree = materialise("healthy", tmp_path / "sim", port=free_port(), startup_s=0.5,
                       metrics_interval_s=0.3)
    proc = start_background(tree)
    telemetry = HostTelemetry(LocalHost("sim"), demo_config(tree), TelemetryOptions(
        health_interval_s=0.3, metrics_interval_s=60.0, gpu_source="none"))
    events: list[TelemetryEvent] = []
    task = asyncio.create_task(telemetry.run(events.append))
    try:
        async with asyncio.timeout(30):
            while not telemetry.snapshot.readiness.ready:
                await asyncio.sleep(0.05)
        async with asyncio.timeout(10):
            while telemetry.snapshot.serving.latency is None:
                await asyncio.sleep(0.05)
    finally:
        telemetry.stop()
        await task
        stop(proc, timeout=5)
        stop(tree, timeout=5)
    serving = telemetry.snapshot.serving
    assert serving.window_s is not None
    assert serving.window_s < 5
    assert serving.progress.value in ("ok", "idle")
