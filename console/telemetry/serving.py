"""Is the server serving, and how fast: the engine's progress and the recent latency.

vLLM's `/health` answers 200 while its engine hangs (vllm#39863; measured here: a SIGSTOPped
`VLLM::EngineCore` with four requests in flight keeps `/health` and `/metrics` answering, the
running gauge at 4 and `vllm:generation_tokens_total` still). So progress is judged from the
token counter between scrapes: requests running or waiting and no token generated for `stall_s`
is `stalled`. `ServingWatch` is fed every scrape (the live telemetry's, or `status`'s few) and
keeps a window of them for the latency percentiles (bucket deltas, `console.parsers.serving`).
`engine_verdict` adds what the scrapes cannot see: an EngineDeadError in the current run, or an
API server whose engine process is gone (`dead`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from vllm_console.console.parsers.serving import (
    LATENCY_FAMILIES,
    EngineSeries,
    ServingScrape,
    histogram_delta,
    percentiles,
)
from vllm_console.console.telemetry.serving_span import (
    ServingSpan,
    span_between,
    span_since_start,
)

STALL_S = 30.0
"""Requests in flight with no token generated for this long is a stall (`serve.stall_s`)."""
WINDOW_S = 60.0
"""The latency percentiles cover the scrapes of about this many recent seconds."""


class EngineState(StrEnum):
    """`serve.engine` of `status --json`."""

    OK = "ok"  # requests in flight and tokens coming
    IDLE = "idle"  # nothing running or waiting
    STALLED = "stalled"  # requests in flight, no token for stall_s
    DEAD = "dead"  # EngineDeadError, or the engine process gone while the API server lives
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """One data-parallel engine (`engine` label) as the scrapes see it: summed, a server with
    one slow or hung replica still looks busy and fine."""

    name: str
    progress: EngineState
    running: int | None = None
    waiting: int | None = None
    generation_tps: float | None = None
    """Over the interval since the previous scrape (None: one scrape, or a reset)."""
    ttft_p99_s: float | None = None
    """Over the recent window, this engine's histogram alone."""
    slow: bool = False
    """Busy, and generating under half the busiest engine's rate."""


def lagging(busy_rates: Mapping[str, float]) -> frozenset[str]:
    """The busy engines generating under half the busiest one's rate (tokens/s by engine, of
    the engines with requests running or waiting): one rule for the SSH and Prometheus views."""
    if len(busy_rates) < 2:
        return frozenset()
    fastest = max(busy_rates.values())
    return frozenset(e for e, rate in busy_rates.items() if rate < 0.5 * fastest)


def engine_json(engine: EngineFigures) -> dict[str, Any]:
    """One element of `status --json`'s `serve.engines`."""
    return {"engine": engine.name, "state": engine.progress.value, "running": engine.running,
            "waiting": engine.waiting,
            "generation_tps": None if engine.generation_tps is None
            else round(engine.generation_tps, 1),
            "ttft_p99_s": None if engine.ttft_p99_s is None else round(engine.ttft_p99_s, 3),
            "slow": engine.slow}


@dataclass(frozen=True, slots=True)
class ServingStatus:
    """What the scrapes say about serving, at `at` (host clock): the engine's progress, the
    recent window's latency percentiles and the request outcomes since start-up."""

    progress: EngineState = EngineState.UNKNOWN
    reason: str = "no /metrics scrape yet"
    stalled_since: float | None = None
    latency: dict[str, dict[str, float] | None] | None = None
    """`ttft_s`, `itl_s`, `e2e_s`, `queue_s`: each `{p50, p90, p99}` or None (no sample in the
    window); None as a whole while there is no window (one scrape, or just after a reset)."""
    window_s: float | None = None
    requests: dict[str, Any] | None = None
    at: float | None = None
    engines: tuple[EngineFigures, ...] = ()
    """One entry per data-parallel engine when the server has two or more, else empty."""
    since_start: bool = False
    """`latency` holds the percentiles since the server's start (a one-shot `status` whose
    own window saw no request finish), not a window's: `window_s` is None then."""
    recent: ServingSpan | None = None
    """Every histogram over the window (`latency` and more: TPOT, prefill, decode, request
    shapes); None while there is no window."""
    lifetime: ServingSpan | None = None
    """Every histogram since the server started (the newest scrape's cumulative counts)."""

    @property
    def shown_span(self) -> ServingSpan | None:
        """What a serving pane shows: the window while requests finish in it, else since
        start-up (the window's figures are all `?` then)."""
        if self.recent is not None and self.recent.requests:
            return self.recent
        return self.lifetime or self.recent

    @property
    def imbalanced(self) -> bool:
        """A busy engine generates under half the busiest one's rate."""
        return any(e.slow for e in self.engines)

    @property
    def picture(self) -> tuple[Any, ...]:
        """What a person sees of it: a scrape that leaves this alone changes nothing on screen
        (the window's length and the scrape's time move on every scrape)."""
        latency = None if self.latency is None else tuple(
            (k, None if v is None else tuple(sorted(v.items())))
            for k, v in sorted(self.latency.items()))
        requests = None if self.requests is None else tuple(
            (k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
            for k, v in sorted(self.requests.items()))
        spans = tuple(None if s is None else s.picture for s in (self.recent, self.lifetime))
        return (self.progress, self.reason, self.stalled_since, latency, requests, self.engines,
                spans)

    def latency_json(self) -> dict[str, Any]:
        keys = dict.fromkeys(LATENCY_FAMILIES)
        return {**keys, **(self.latency or {}), "window_s": self.window_s,
                "since_start": self.since_start,
                "source": "metrics" if self.latency is not None else None}

    def with_latency_since_start(self, scrape: ServingScrape | None) -> ServingStatus:
        """When no request finished in the window (or there was none), the percentiles of
        every request since the server's start, from one scrape's histograms, said so."""
        if self.latency is not None and any(v is not None for v in self.latency.values()):
            return self
        if scrape is None:
            return self
        latency = {key: percentiles(scrape.merged.latency.get(key))
                   for key in LATENCY_FAMILIES}
        if all(v is None for v in latency.values()):
            return self
        return replace(self, latency=latency, window_s=None, since_start=True)


@dataclass(slots=True)
class _EngineProgress:
    """One engine's generation counter across scrapes."""

    generated: float | None = None
    progress_at: float | None = None
    busy_since: float | None = None
    at: float | None = None
    rate: float | None = None
    """Tokens per second since the previous scrape (None: the first one, or a reset)."""

    def feed(self, series: EngineSeries, at: float) -> None:
        count = series.generation_tokens
        if count is None:
            return
        self.rate = None
        if self.generated is not None and self.at is not None and at > self.at \
                and count >= self.generated:
            self.rate = (count - self.generated) / (at - self.at)
        self.at = at
        # The first scrape, and a restart (the counter went down), give the benefit of the
        # doubt: the stall clock starts there.
        if self.generated is None or count != self.generated:
            self.progress_at = at
        self.generated = count
        busy = (series.running or 0) + (series.waiting or 0) > 0
        if not busy:
            self.busy_since = None
        elif self.busy_since is None:
            self.busy_since = at

    def quiet_since(self) -> float | None:
        """Since when requests have been in flight with no token (None: not busy)."""
        if self.busy_since is None:
            return None
        return max(self.busy_since, self.progress_at or self.busy_since)


@dataclass
class ServingWatch:
    """Fed every `/metrics` scrape; `feed` returns the `ServingStatus` after it."""

    stall_s: float = STALL_S
    window_s: float = WINDOW_S
    _engines: dict[str, _EngineProgress] = field(default_factory=dict)
    _history: deque[tuple[float, ServingScrape]] = field(default_factory=deque)
    _last: tuple[float, float] | None = None
    """The previous scrape's time and generation counter (all engines)."""

    def reset(self) -> None:
        """Another server: nothing of the old one's counters carries over."""
        self._engines.clear()
        self._history.clear()
        self._last = None

    @property
    def has_window(self) -> bool:
        """Two scrapes with serving series since the start or a counter reset: what the
        rates and percentiles need."""
        return len(self._history) >= 2

    def progressed_since(self, at: float) -> bool:
        """Some engine generated a token after `at` (as the scrapes since then saw it)."""
        return any(p.progress_at is not None and p.progress_at > at
                   for p in self._engines.values())

    def feed(self, scrape: ServingScrape | None, at: float, why_none: str = "") -> ServingStatus:
        """One scrape (None: it failed or had no serving series; `why_none` says why)."""
        if scrape is None:
            return ServingStatus(EngineState.UNKNOWN, why_none or "no serving series in "
                                 "/metrics", at=at)
        for engine, series in scrape.by_engine.items():
            self._engines.setdefault(engine, _EngineProgress()).feed(series, at)
        merged = scrape.merged
        state, reason, since = self._progress(merged, at)
        if merged.generation_tokens is not None:
            self._last = (at, merged.generation_tokens)
        latency, window = self._latency(scrape, at)
        recent = None
        if window is not None:
            recent = span_between(self._history[0][1].merged, merged, window)
        return ServingStatus(state, reason, since, latency, window, _requests(merged), at,
                             self._each_engine(scrape, at), recent=recent,
                             lifetime=span_since_start(merged))

    def _each_engine(self, scrape: ServingScrape, at: float) -> tuple[EngineFigures, ...]:
        """Per engine, when there are two or more: its state, requests, rate and TTFT p99."""
        if len(scrape.by_engine) < 2:
            return ()
        base = self._history[0][1] if len(self._history) > 1 else None
        rows = []
        for name, series in sorted(scrape.by_engine.items()):
            progress = self._engines[name]
            busy = (series.running or 0) + (series.waiting or 0) > 0
            quiet = progress.quiet_since()
            if not busy:
                state = EngineState.OK if progress.rate else EngineState.IDLE
            elif quiet is not None and at - quiet >= self.stall_s:
                state = EngineState.STALLED
            else:
                state = EngineState.OK
            ttft = None
            old = base.by_engine.get(name) if base is not None else None
            if old is not None and "ttft_s" in old.latency and "ttft_s" in series.latency:
                figures = percentiles(histogram_delta(old.latency["ttft_s"],
                                                      series.latency["ttft_s"]))
                ttft = figures.get("p99") if figures else None
            rows.append(EngineFigures(
                name, state, None if series.running is None else int(series.running),
                None if series.waiting is None else int(series.waiting), progress.rate, ttft))
        slow = lagging({r.name: r.generation_tps for r in rows if r.generation_tps is not None
                        and (r.running or 0) + (r.waiting or 0) > 0})
        return tuple(replace(r, slow=r.name in slow) for r in rows)

    def _progress(self, merged: EngineSeries, at: float
                  ) -> tuple[EngineState, str, float | None]:
        if merged.generation_tokens is None:
            return EngineState.UNKNOWN, "/metrics has no vllm:generation_tokens_total", None
        running, waiting = int(merged.running or 0), int(merged.waiting or 0)
        load = f"{running} running, {waiting} waiting"
        if running + waiting == 0:
            # The gauge is read at one instant: clients that send one request after another
            # leave it at 0 between two of them. Tokens generated since the last scrape say
            # the engine is serving all the same.
            if self._last is not None and merged.generation_tokens > self._last[1]:
                return EngineState.OK, (
                    f"{load} at this scrape, {merged.generation_tokens - self._last[1]:.0f} "
                    f"tokens generated in the last {at - self._last[0]:.0f} s "
                    "(between requests)"), None
            return EngineState.IDLE, "no request running or waiting", None
        quiet = {name: p.quiet_since() for name, p in self._engines.items()}
        stalled = {name: since for name, since in quiet.items()
                   if since is not None and at - since >= self.stall_s}
        if stalled:
            since = min(stalled.values())
            which = "" if len(self._engines) < 2 else \
                f" (engine {', '.join(sorted(stalled))} of {len(self._engines)})"
            return (EngineState.STALLED, f"{load}, no token generated for {at - since:.0f} s"
                    f"{which} (vllm:generation_tokens_total still)", since)
        return EngineState.OK, f"{load}, tokens generated", None

    def _latency(self, scrape: ServingScrape, at: float
                 ) -> tuple[dict[str, dict[str, float] | None] | None, float | None]:
        history = self._history
        if history and _was_reset(history[-1][1], scrape):
            history.clear()  # a restart: the old counts are another server's
        history.append((at, scrape))
        while len(history) > 2 and at - history[1][0] >= self.window_s:
            history.popleft()
        if len(history) < 2:
            return None, None
        since, base = history[0]
        old, new = base.merged, scrape.merged
        latency: dict[str, dict[str, float] | None] = {}
        for key in LATENCY_FAMILIES:
            if key in old.latency and key in new.latency:
                latency[key] = percentiles(histogram_delta(old.latency[key], new.latency[key]))
            else:
                latency[key] = None
        return latency, round(at - since, 1)


Scrape = Callable[[], Awaitable[tuple[ServingScrape | None, float, str]]]
"""One more scrape: its serving series (None: failed), when (host clock), and why it failed."""


async def watch_serving(watch: ServingWatch, first: ServingScrape | None, at: float,
                        scrape: Scrape, *, settle_s: float = 2.0, step_s: float = 1.0,
                        idle_recheck_s: float = 0.5, span_s: float | None = None
                        ) -> ServingStatus:
    """A one-shot look (`status`): requests in flight are watched until a token comes (and at
    least `settle_s`, the latency window) or `stall_s` passes without one (stalled). Idle is
    what a second scrape, `idle_recheck_s` later, agrees with (the first can fall between two
    requests); nothing to read: one scrape is the answer. `span_s` (`status --window S`): the
    last scrape comes at least this long after the first, whatever the engine does."""
    status = watch.feed(first, at)
    now = at
    if status.progress is EngineState.IDLE:
        await asyncio.sleep(idle_recheck_s)
        found, now, why = await scrape()
        status = watch.feed(found, now, why)
    deadline = at + watch.stall_s + 5 * step_s
    while status.progress is EngineState.OK:
        await asyncio.sleep(step_s)
        found, now, why = await scrape()
        status = watch.feed(found, now, why)
        if watch.progressed_since(at) and now - at >= settle_s or now >= deadline:
            break
    if span_s is not None and first is not None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + span_s + 30.0  # a host clock that stands still ends it too
        while now - at < span_s and loop.time() < give_up:
            await asyncio.sleep(max(0.0, min(step_s * 5, span_s - (now - at))))
            found, now, why = await scrape()
            status = watch.feed(found, now, why)
    return status


def _was_reset(old: ServingScrape, new: ServingScrape) -> bool:
    """A counter went down between two scrapes: the server restarted."""
    a, b = old.merged, new.merged
    if a.generation_tokens is not None and b.generation_tokens is not None and \
            b.generation_tokens < a.generation_tokens:
        return True
    return any(key in b.latency and b.latency[key].count < h.count
               for key, h in a.latency.items())


def _requests(merged: EngineSeries) -> dict[str, Any]:
    finished = {reason: int(n) for reason, n in merged.finished.items()}
    return {"preemptions_total": int(merged.preemptions) if merged.preemptions is not None
            else None,
            "finished": finished or None,
            "errors_total": finished.get("error")}


def engine_verdict(status: ServingStatus, *, api_alive: bool | None, engine_dead_line: str | None,
                   engine_procs: int | None, started: bool,
                   stopped_engine_pid: int | None = None,
                   stopping_line: str | None = None) -> tuple[EngineState, str]:
    """`serve.engine` and its reason: what the scrapes say, overruled by a dead engine.

    `engine_dead_line`: the current run's EngineDeadError line, if any; `engine_procs`: how many
    EngineCore processes the serve tree holds (None: the tree is not known); `started`: the run
    got past start-up (before that, no engine process yet is normal); `stopped_engine_pid`: an
    engine process in the stopped state (`T`), named in a stall's reason; `stopping_line`: the
    current run's "asked to stop" line (its engine then goes first, on purpose: not dead)."""
    if engine_dead_line is not None:
        return EngineState.DEAD, f"EngineDeadError in the log: {engine_dead_line[:200]}"
    if stopping_line is not None:
        return EngineState.UNKNOWN, f"the server is shutting down (its log: {stopping_line[:120]})"
    if api_alive and started and engine_procs == 0:
        return EngineState.DEAD, "the API server lives but no EngineCore process is left"
    if api_alive is False:
        return EngineState.UNKNOWN, "no serve process"
    if status.progress is EngineState.STALLED and stopped_engine_pid is not None:
        return status.progress, f"{status.reason}; EngineCore pid {stopped_engine_pid} is stopped"
    return status.progress, status.reason
