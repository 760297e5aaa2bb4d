"""What an idle console draws: a new sample shows in one frame, and news that changes nothing
on screen draws none (issue 18: an idle console costs what htop does). Frames are counted as
the app hands them to the terminal; nothing is timed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.app_support import screen_text
from tests.snapshot_support import HOST, replay_app, sample
from vllm_console.console.telemetry import events as ev
from vllm_console.console.tui.app import ConsoleApp, TelemetryArrived
from vllm_console.widgets.row_repaint import changed_rows

pytestmark = pytest.mark.usefixtures("state_home")


class Frames:
    """Counts the frames the app writes (`App._display`)."""

    def __init__(self, app: ConsoleApp) -> None:
        self.count = 0
        self.rows: set[int] = set()  # the screen rows the frames rewrote
        display = app._display

        def counted(screen: Any, update: Any) -> None:
            self.count += 1
            self.rows.update(y for y, _, _ in getattr(update, "spans", ()))
            display(screen, update)

        app._display = counted  # type: ignore[method-assign]


@contextlib.asynccontextmanager
async def settled() -> AsyncIterator[tuple[ConsoleApp, Pilot[int], Frames]]:
    app = replay_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.5)
        yield app, pilot, Frames(app)


async def test_a_gpu_sample_is_drawn_in_one_frame_its_title_with_it() -> None:
    async with settled() as (app, pilot, frames):
        hot = replace(sample(), gpus=tuple(replace(g, power_w=g.power_w + 9)
                                           for g in sample().gpus))
        app.post_message(TelemetryArrived(HOST, ev.GpuSampled(HOST, hot)))
        await pilot.pause(0.3)
        assert "664W" in screen_text(app)
        assert "GPUs · nvidia-smi" in screen_text(app)
        assert frames.count == 1
        stale = replace(hot, gpu_age_s=9.0)
        app.post_message(TelemetryArrived(HOST, ev.GpuSampled(HOST, stale)))
        await pilot.pause(0.3)
        assert "GPUs · nvidia-smi · stale 9 s" in screen_text(app)
        assert frames.count == 2


async def test_a_sample_rewrites_the_rows_of_the_gpus_not_the_pane() -> None:
    async with settled() as (app, pilot, frames):
        gpus = sample().gpus
        cooler = replace(sample(), gpus=(gpus[0], replace(gpus[1], power_w=81.0)))
        app.post_message(TelemetryArrived(HOST, ev.GpuSampled(HOST, cooler)))
        await pilot.pause(0.3)
        lines = screen_text(app).splitlines()
        gpu_rows = {y for y, line in enumerate(lines) if "GPU0" in line or "GPU1" in line}
        assert "81W" in lines[max(gpu_rows)]
        assert frames.count == 1
        # GPU1's power and both sparklines' newest point: those two rows, not the whole
        # pane with its border and its process line.
        assert frames.rows == gpu_rows


def test_changed_rows_are_runs_and_a_missing_row_counts() -> None:
    assert changed_rows(["a", "b", "c"], ["a", "b", "c"]) == []
    assert changed_rows(["a", "b", "c", "d"], ["a", "x", "y", "d"]) == [(1, 2)]
    assert changed_rows(["a", "b"], ["x", "b", "c"]) == [(0, 1), (2, 1)]
    assert changed_rows(["a", "b", "c"], ["a"]) == [(1, 2)]


async def test_a_sample_after_ones_that_changed_nothing_is_shown() -> None:
    async with settled() as (app, pilot, _frames):
        gpus = sample().gpus

        async def post(watts: float) -> str:
            changed = replace(sample(), gpus=(gpus[0], replace(gpus[1], power_w=watts)))
            app.post_message(TelemetryArrived(HOST, ev.GpuSampled(HOST, changed)))
            await pilot.pause(0.05)
            return next(line for line in screen_text(app).splitlines() if "GPU1" in line)

        for _ in range(14):  # the sparklines full: the same figures draw the same rows
            await post(81.0)
        await pilot.pause(0.3)
        for watts in (93.0, 77.0):
            await post(watts)
            await pilot.pause(0.3)
            gpu1 = next(line for line in screen_text(app).splitlines() if "GPU1" in line)
            assert f"{watts:.0f}W" in gpu1, gpu1


async def test_the_serving_strip_left_alone_draws_nothing_while_its_ages_hold() -> None:
    """Its ages move in 5 s steps: the seconds between draw no frame."""
    async with settled() as (app, pilot, frames):
        await pilot.pause(2.5)
        assert "[log · <5 s ago]" in screen_text(app)
        assert frames.count == 0
