"""What a host screen remembers over time, beyond one snapshot: the GPU utilisation history per
GPU, the acceptance-length history across restarts, and the load figures' history.

Headless models: a `HostScreen` owns one of each for its host and feeds them every event, shown
or not, so a screen opened later (the fleet table's hosts) shows the whole history.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vllm_console.console.hostclient.agent.samples import AgentSample
from vllm_console.console.telemetry.server import ServerLoad
from vllm_console.console.telemetry.spec_decode import SpecDecodeState

GPU_HISTORY = 60
ACCEPTANCE_HISTORY = 360


class GpuHistory:
    """The last GPU_HISTORY utilisation readings per GPU index."""

    def __init__(self) -> None:
        self._util: dict[int, deque[float]] = {}

    def add(self, sample: AgentSample) -> dict[int, tuple[float, ...]]:
        for gpu in sample.gpus:
            if gpu.util_pct is not None:
                self._util.setdefault(gpu.index, deque(maxlen=GPU_HISTORY)).append(gpu.util_pct)
        return {i: tuple(d) for i, d in self._util.items()}


@dataclass(frozen=True, slots=True)
class RestartMark:
    """A new run of the server began here: the chart draws a separator."""


RESTART = RestartMark()


class AcceptanceHistory:
    """Acceptance length over every run this console saw, with each restart marked.

    The telemetry's spec-decode state forgets the old run when a new one begins (its figures no
    longer apply); the person who just fixed a config and restarted wants the opposite: the
    climb from 1.17 to ~6.4, with the restart in between.
    """

    def __init__(self, limit: int = ACCEPTANCE_HISTORY) -> None:
        self._points: deque[float | RestartMark] = deque(maxlen=limit)
        self._last_at: float | None = None

    def add(self, state: SpecDecodeState) -> tuple[float | RestartMark, ...]:
        """Take the points of `state` not seen yet (by host time); the whole history."""
        for point in state.history:
            if point.mean_acceptance_length is None:
                continue
            if self._last_at is not None and point.at <= self._last_at:
                continue
            self._points.append(point.mean_acceptance_length)
            self._last_at = point.at
        return self.points

    def new_run(self) -> tuple[float | RestartMark, ...]:
        """A new server run began: mark it once, if the history holds any figure."""
        if self._points and self._points[-1] is not RESTART:
            self._points.append(RESTART)
        return self.points

    @property
    def points(self) -> tuple[float | RestartMark, ...]:
        return tuple(self._points)


LOAD_HISTORY = 120
LOAD_FIGURES = ("running", "waiting", "prompt_tps", "generation_tps", "kv_cache_usage_pct",
                "prefix_cache_hit_pct")
"""The `ServerLoad` figures whose history a serving pane draws."""


class LoadHistory:
    """The last LOAD_HISTORY values of each load figure, one per new sample (by host time): a
    load sampled again at the same time (another event's snapshot) adds nothing."""

    def __init__(self, limit: int = LOAD_HISTORY) -> None:
        self._points: dict[str, deque[float]] = {name: deque(maxlen=limit) for name in LOAD_FIGURES}
        self._last_at: float | None = None

    def add(self, load: ServerLoad | None) -> dict[str, tuple[float, ...]]:
        """Take `load` when it is newer than the last one taken; the whole history."""
        if load is not None and load.at and (self._last_at is None or load.at > self._last_at):
            self._last_at = load.at
            for name, points in self._points.items():
                value = getattr(load, name)
                if value is not None:
                    points.append(float(value))
        return self.points

    @property
    def points(self) -> dict[str, tuple[float, ...]]:
        return {name: tuple(points) for name, points in self._points.items()}
