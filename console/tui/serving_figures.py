"""The serving strip's figures, taken from the host's newest snapshot, their ages moving on
between events (the view asks again on its 1 s tick; an unchanged view draws nothing)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from widgets.serving_strip import ServingView

if TYPE_CHECKING:
    from console.telemetry.snapshot import HostSnapshot


class ServingFigures:
    """Ages are counted on the host's clock: the newest host time a snapshot carries (the
    scrape's, the load's, the agent sample's), moved on by the local clock since."""

    def __init__(self) -> None:
        self._snap: HostSnapshot | None = None
        self._host_now = 0.0
        self._taken_at = 0.0
        self._dead_since: float | None = None
        self._engine: tuple[str, str] = ("unknown", "no /metrics scrape yet")

    def take(self, snap: HostSnapshot) -> None:
        """A newer snapshot (after an event that may change the serving picture)."""
        self._snap = snap
        times = [snap.serving.at, snap.load.at if snap.load is not None else None,
                 snap.sample.ts if snap.sample is not None else None]
        self._host_now = max([t for t in times if t], default=0.0)
        self._taken_at = time.monotonic()
        state, reason = snap.engine_state()
        self._engine = (state.value, reason)
        if state.value != "dead":
            self._dead_since = None
        elif self._dead_since is None:
            self._dead_since = self._taken_at

    def view(self) -> ServingView:
        snap = self._snap
        if snap is None:
            return ServingView()
        now = self._host_now + (time.monotonic() - self._taken_at)
        engine, reason = self._engine
        serving, load = snap.serving, snap.load

        def age(at: float | None) -> int | None:
            return None if not at or not self._host_now else max(0, int(now - at))

        since: int | None = None
        if engine == "stalled" and serving.stalled_since is not None:
            since = age(serving.stalled_since)
        elif engine == "dead" and self._dead_since is not None:
            since = int(time.monotonic() - self._dead_since)
        view = ServingView(engine=engine, engine_reason=reason, engine_for_s=since,
                           latency=serving.latency, window_s=serving.window_s,
                           requests=serving.requests,
                           serving_age_s=age(serving.at) if serving.latency is not None
                           or serving.requests is not None else None)
        if load is None:
            return view
        return replace(view, running=load.running, waiting=load.waiting,
                       kv_cache_usage_pct=load.kv_cache_usage_pct,
                       prefix_cache_hit_pct=load.prefix_cache_hit_pct,
                       prompt_tps=load.prompt_tps, generation_tps=load.generation_tps,
                       load_source=load.source, load_age_s=age(load.at))
