"""The server's own answers: `/health`, `/v1/models` readiness and `/metrics` load and counters.

Readiness is judged with what else is known: a refused port while the process lives and its log
has not said "Application startup complete." is `starting`, not `down`; after it has, the same
refusal is `not-answering`; with no process at all it is `down`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum

from vllm_console.console.parsers.metrics import (
    MetricsSnapshot,
    SpecDecodeCounters,
    diff_counters,
    parse_metrics,
)
from vllm_console.console.parsers.spec_decode import SpecDecodeSample
from vllm_console.console.parsers.throughput import ThroughputSample
from vllm_console.console.telemetry.http import HttpResult, ServeUrl, http_get
from vllm_console.console.transport.host import Host

_ZERO = SpecDecodeCounters(0, 0, 0, ())


class Health(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    STARTING = "starting"
    NOT_ANSWERING = "not-answering"
    DOWN = "down"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Readiness:
    """`/health` (and `/v1/models` once healthy) at `checked_at` (host clock)."""

    health: Health
    url: str | None = None
    http_status: int | None = None
    detail: str = ""
    models: tuple[str, ...] = ()
    checked_at: float | None = None

    @property
    def ready(self) -> bool:
        return self.health is Health.HEALTHY


GAUGES = ("running", "waiting", "kv_cache_usage_pct")
"""The load's instant figures: `/metrics` and the log's stat line both say them."""
RATES = ("prompt_tps", "generation_tps", "prefix_cache_hit_pct")
"""The load's rates: only the log's stat line says them (a scrape alone has no interval)."""
GAUGES_FRESH_S = 30.0
"""While `/metrics` gave the gauges this recently, they stay the figures: the engine's state
is judged from the same scrape, so a stat line's own counts (logged at another instant) would
show `idle` beside `6 running`. One source per figure."""


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """Requests, KV-cache use and throughput (tokens/s), from `/metrics` and the periodic
    throughput log line; `at` is when the gauges came (host clock), `source` whence they came
    (`log` or `metrics`), `rates_source` whence the rates (`log`, or "" when none)."""

    running: int | None = None
    waiting: int | None = None
    kv_cache_usage_pct: float | None = None
    prompt_tps: float | None = None
    generation_tps: float | None = None
    prefix_cache_hit_pct: float | None = None
    at: float = 0.0
    source: str = ""
    rates_source: str = ""

    def merged(self, newer: ServerLoad) -> ServerLoad:
        """`newer`, with what it lacks kept from this one (the log and `/metrics` each know
        part of the picture). A stat line does not replace fresh `/metrics` gauges: it gives
        the rates only."""
        if newer.source == "log" and self.source == "metrics" and \
                newer.at - self.at < GAUGES_FRESH_S:
            rates = {name: getattr(newer, name) for name in RATES}
            return replace(self, **rates, rates_source=newer.rates_source)
        keep = {name: getattr(self, name) for name in (*GAUGES, *RATES)
                if getattr(newer, name) is None}
        kept_rates = any(name in keep and keep[name] is not None for name in RATES)
        return replace(newer, **keep, rates_source=newer.rates_source or (
            self.rates_source if kept_rates else ""))


def load_from_throughput(sample: ThroughputSample, at: float) -> ServerLoad:
    """The periodic `Engine 000: Avg prompt throughput ...` line as a load figure."""
    return ServerLoad(sample.running, sample.waiting, sample.kv_cache_usage_pct,
                      sample.prompt_throughput, sample.generation_throughput,
                      sample.prefix_cache_hit_rate_pct, at, "log", "log")


def judge_health(result: HttpResult | None, *, running: bool | None, log_ready: bool
                 ) -> tuple[Health, str]:
    """The health a `/health` answer means, given whether the process runs and whether its
    log said it is ready."""
    if result is None:
        if running is False:
            return Health.DOWN, "no serve process"
        return Health.UNKNOWN, "no server URL"
    if result.status is not None:
        if result.status == 200:
            return Health.HEALTHY, "200 OK"
        return Health.UNHEALTHY, f"/health answered {result.status}"
    if running is False:
        return Health.DOWN, f"no serve process; {result.error}"
    if log_ready:
        return Health.NOT_ANSWERING, f"{result.error} (the log says it started)"
    if running:
        return Health.STARTING, f"{result.error} while starting"
    return Health.NOT_ANSWERING, result.error


def model_ids(body: bytes) -> tuple[str, ...]:
    """The `id`s of a `/v1/models` answer (empty when it is not one)."""
    try:
        obj = json.loads(body)
    except ValueError:
        return ()
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list):
        return ()
    return tuple(m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))


async def probe_readiness(host: Host, url: ServeUrl | None, *, running: bool | None,
                          log_ready: bool, at: float, timeout: float = 5.0,
                          want_models: bool = True) -> Readiness:
    """GET /health (and /v1/models when healthy) and judge them."""
    if url is None:
        health, detail = judge_health(None, running=running, log_ready=log_ready)
        return Readiness(health, None, None, detail, (), at)
    result = await http_get(host, url, "/health", timeout=timeout)
    health, detail = judge_health(result, running=running, log_ready=log_ready)
    models: tuple[str, ...] = ()
    if health is Health.HEALTHY and want_models:
        answer = await http_get(host, url, "/v1/models", timeout=timeout)
        models = model_ids(answer.body) if answer.ok else ()
    return Readiness(health, url.base, result.status, detail, models, at)


class MetricsReader:
    """Scrapes `/metrics`, keeping the previous counters to difference the next scrape."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._prev: SpecDecodeCounters | None = None
        self._prev_at: float | None = None
        self.last_error = ""

    def reset(self) -> None:
        """A new server: its counters start again."""
        self._prev = self._prev_at = None

    async def scrape(self, url: ServeUrl, *, timeout: float = 5.0) -> MetricsSnapshot | None:
        """One scrape (None: it failed; `last_error` says why)."""
        result = await http_get(self.host, url, "/metrics", timeout=timeout)
        if not result.ok:
            self.last_error = result.error or f"/metrics answered {result.status}"
            return None
        self.last_error = ""
        return parse_metrics(result.body)

    def interval(self, snapshot: MetricsSnapshot, at: float) -> SpecDecodeSample | None:
        """The spec-decode figures since the previous scrape (None: no drafts in between, a
        counter reset, or the first scrape)."""
        cur = snapshot.spec_decode
        prev, prev_at = self._prev, self._prev_at
        self._prev, self._prev_at = cur, at
        if prev is None or cur is None or prev_at is None:
            return None
        return diff_counters(prev, cur, at - prev_at)


def totals(snapshot: MetricsSnapshot | None) -> SpecDecodeSample | None:
    """The spec-decode figures since the server started (its cumulative counters)."""
    if snapshot is None or snapshot.spec_decode is None:
        return None
    return diff_counters(_ZERO, snapshot.spec_decode)


def load_from_metrics(snapshot: MetricsSnapshot, at: float) -> ServerLoad | None:
    if snapshot.running is None and snapshot.waiting is None \
            and snapshot.kv_cache_usage_pct is None:
        return None
    return ServerLoad(snapshot.running, snapshot.waiting, snapshot.kv_cache_usage_pct, at=at,
                      source="metrics")
