"""The server is asked as soon as there is something to learn: when its log says ready, and
for the figures that need two `/metrics` scrapes, soon after the first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from vllm_console.console.cli.commands.demo import demo_config, free_port
from vllm_console.console.parsers.metrics import MetricsSnapshot
from vllm_console.console.sim import materialise, start_background, stop
from vllm_console.console.telemetry import HostTelemetry, TelemetryOptions
from vllm_console.console.telemetry.http import ServeUrl
from vllm_console.console.telemetry.server import Health
from vllm_console.console.telemetry.startup import StartupState
from vllm_console.console.transport.local_host import LocalHost

pytestmark = pytest.mark.programs  # each test starts a simulated server


@asynccontextmanager
async def live(root: Path, scenario: str, options: TelemetryOptions
               ) -> AsyncIterator[HostTelemetry]:
    """A simulated server just started, and the live telemetry on it."""
    tree = materialise(scenario, root, port=free_port(), startup_s=0.5, metrics_interval_s=0.3)
    proc = start_background(tree)
    telemetry = HostTelemetry(LocalHost("sim"), demo_config(tree), options)
    task = asyncio.create_task(telemetry.run(lambda event: None))
    try:
        yield telemetry
    finally:
        telemetry.stop()
        await task
        stop(proc, timeout=5)
        stop(tree, timeout=5)


async def until(predicate: Callable[[], bool], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


async def test_the_log_saying_ready_asks_the_server_at_once(tmp_path: Path) -> None:
    """`/health` is asked every `health_interval_s` until the server answers. The log's
    "Application startup complete" came, and the console still said "not answering" until
    the next period (2 s by default; a minute here): the restart looked slower than it was."""
    options = TelemetryOptions(health_interval_s=60.0, gpu_source="none")
    async with live(tmp_path / "sim", "incident", options) as telemetry:
        await until(lambda: telemetry.snapshot.startup.state is StartupState.READY, 30)
        await until(lambda: telemetry.snapshot.readiness.health is Health.HEALTHY, 10)
    assert telemetry.snapshot.readiness.ready


async def test_the_second_scrape_comes_soon_after_the_first(tmp_path: Path) -> None:
    """Rates, latency percentiles and the engine's state need two `/metrics` scrapes. The
    second came a whole metrics period after the first (5 s by default, two minutes here), so
    the serving strip said nothing of them for that long after the server was found healthy.
    It now comes a second later; the margins are for a busy machine (a scrape of the simulated
    server took seconds with four test workers on two cores)."""
    options = TelemetryOptions(health_interval_s=0.3, metrics_interval_s=120.0,
                               gpu_source="none")
    async with live(tmp_path / "sim", "healthy", options) as telemetry:
        await until(lambda: telemetry.snapshot.readiness.ready, 30)
        await until(lambda: telemetry.snapshot.serving.latency is not None, 40)
    serving = telemetry.snapshot.serving
    assert serving.window_s is not None
    assert serving.window_s < 30
    assert serving.progress.value in ("ok", "idle")


async def test_a_first_scrape_that_failed_still_gets_its_second_soon(tmp_path: Path) -> None:
    """The second scrape was timed by the count of healthy answers, not by the scrapes that
    worked: when the first `/metrics` answer failed (it timed out on a busy machine), the
    first good one came a second later and the second good one a whole metrics period after
    that (two minutes here), with the strip empty meanwhile."""
    options = TelemetryOptions(health_interval_s=0.3, metrics_interval_s=120.0,
                               gpu_source="none")
    async with live(tmp_path / "sim", "healthy", options) as telemetry:
        scrape = telemetry.metrics.scrape
        failed: list[bool] = []

        async def first_fails(url: ServeUrl, *, timeout: float = 5.0) -> MetricsSnapshot | None:
            if not failed:
                failed.append(True)
                telemetry.metrics.last_error = "timed out after 5 s"
                return None
            return await scrape(url, timeout=timeout)
        telemetry.metrics.scrape = first_fails  # type: ignore[method-assign]
        await until(lambda: telemetry.snapshot.readiness.ready, 30)
        await until(lambda: telemetry.snapshot.serving.latency is not None, 40)
    assert failed
    assert telemetry.snapshot.serving.window_s is not None
