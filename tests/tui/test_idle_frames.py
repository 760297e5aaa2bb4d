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

from console.app import ConsoleApp, TelemetryArrived
from console.telemetry import events as ev
from tests.app_support import screen_text
from tests.snapshot_support import HOST, replay_app, sample

pytestmark = pytest.mark.usefixtures("state_home")


@pytest.fixture
def state_home(tmp_path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


class Frames:
    """Counts the frames the app writes (`App._display`)."""

    def __init__(self, app: ConsoleApp) -> None:
        self.count = 0
        display = app._display

        def counted(screen: Any, update: Any) -> None:
            self.count += 1
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
