"""The serving strip's figures, taken from the host's newest snapshot, their ages moving on
between events (the view asks again when `next_change_s` says the time alone changes what it
shows; an unchanged view draws nothing)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING

from vllm_console.console.telemetry.history import LoadHistory
from vllm_console.console.telemetry.serving import WINDOW_S
from vllm_console.widgets.latency_table import LatencyView
from vllm_console.widgets.serving_pane import ServingPaneView
from vllm_console.widgets.serving_strip import ServingView, age_step

if TYPE_CHECKING:
    from vllm_console.console.telemetry.snapshot import HostSnapshot


TRENDS = ("generation tok/s", "running", "TTFT p99 s")
TREND_POINTS = 60


class ServingFigures:
    """Ages are counted on the host's clock: the newest host time a snapshot carries (the
    scrape's, the load's, the agent sample's), moved on by the local clock since."""

    def __init__(self) -> None:
        self._snap: HostSnapshot | None = None
        self._host_now = 0.0
        self._taken_at = 0.0
        self._dead_since: float | None = None
        self._engine: tuple[str, str] = ("unknown", "no /metrics scrape yet")
        # The trends: one point per new figure (a scrape, a stat line), newest last.
        self._trends: dict[str, deque[float]] = {name: deque(maxlen=TREND_POINTS)
                                                 for name in TRENDS}
        self._seen: dict[str, float] = {}
        self._load_history = LoadHistory()  # the serving pane's (URL-only screen) histories

    def take(self, snap: HostSnapshot) -> None:
        """A newer snapshot (after an event that may change the serving picture)."""
        self._snap = snap
        times = [snap.serving.at, snap.load.at if snap.load is not None else None,
                 snap.sample.ts if snap.sample is not None else None]
        self._host_now = max([t for t in times if t], default=0.0)
        self._taken_at = time.monotonic()
        self._add_points(snap)
        self._load_history.add(snap.load)
        state, reason = snap.engine_state()
        # A server asked to stop (a restart started elsewhere, `systemctl stop`): its engine
        # goes first, on purpose; the header says so in a word rather than `unknown`.
        stopping = state.value == "unknown" and snap.run.stopping is not None
        self._engine = ("stopping" if stopping else state.value, reason)
        if state.value != "dead":
            self._dead_since = None
        elif self._dead_since is None:
            self._dead_since = self._taken_at

    def _add_points(self, snap: HostSnapshot) -> None:
        load, serving = snap.load, snap.serving
        ttft = (serving.latency or {}).get("ttft_s")
        points = {
            "generation tok/s": (load.at if load else None,
                                 load.generation_tps if load else None),
            "running": (load.at if load else None, load.running if load else None),
            "TTFT p99 s": (serving.at, ttft.get("p99") if ttft else None)}
        for name, (at, value) in points.items():
            if at and value is not None and self._seen.get(name) != at:
                self._seen[name] = at
                self._trends[name].append(float(value))

    def next_change_s(self) -> float | None:
        """Seconds until the view changes with the passage of time alone (a stall's length
        each second, an age at its next step), None when nothing shown ages."""
        snap = self._snap
        if snap is None:
            return None
        now = self._host_now + (time.monotonic() - self._taken_at)
        engine = self._engine[0]
        waits: list[float] = []
        if engine in ("stalled", "dead"):
            waits.append(1.0)
        shown = [snap.serving.at if snap.serving.latency is not None
                 or snap.serving.requests is not None else None,
                 snap.load.at if snap.load is not None else None]
        for at in shown:
            if at and self._host_now:
                age = max(0.0, now - at)
                step = 5.0 if age < 60 else 60.0
                waits.append(step - age % step)
        return max(0.05, min(waits)) if waits else None

    def view(self) -> ServingView:
        snap = self._snap
        if snap is None:
            return ServingView()
        now = self._host_now + (time.monotonic() - self._taken_at)
        engine, reason = self._engine
        serving, load = snap.serving, snap.load

        def age(at: float | None) -> int | None:
            return None if not at or not self._host_now else age_step(now - at)

        since: int | None = None
        if engine == "stalled" and serving.stalled_since is not None:
            since = max(0, int(now - serving.stalled_since))
        elif engine == "dead" and self._dead_since is not None:
            since = int(time.monotonic() - self._dead_since)
        view = ServingView(engine=engine, engine_reason=reason, engine_for_s=since,
                           latency=serving.latency, window_s=serving.window_s,
                           requests=serving.requests,
                           serving_age_s=age(serving.at) if serving.latency is not None
                           or serving.requests is not None else None,
                           trends=tuple((name, tuple(points))
                                        for name, points in self._trends.items() if points))
        if load is None:
            return view
        return replace(view, running=load.running, waiting=load.waiting,
                       kv_cache_usage_pct=load.kv_cache_usage_pct,
                       prefix_cache_hit_pct=load.prefix_cache_hit_pct,
                       prompt_tps=load.prompt_tps, generation_tps=load.generation_tps,
                       load_source=load.source, rates_source=load.rates_source,
                       load_age_s=age(load.at))

    def pane_view(self, figures: ServingView) -> ServingPaneView:
        """The serving pane's picture (`figures`: this `view()`), with the load's history."""
        return ServingPaneView(figures, self._load_history.points)

    def latency_view(self, figures: ServingView) -> LatencyView:
        """The latency table's picture: the span shown, aged like the strip's latency."""
        span = self._snap.serving.shown_span if self._snap is not None else None
        return LatencyView(span, WINDOW_S, figures.serving_age_s)
