"""The fleet table from Prometheus: one row per vLLM server, built from a dozen PromQL queries.

Every figure is either a number or a reason it is missing, never a silent zero: `absent` (no
series for this server), `idle` (no drafts in the last minute, so no acceptance to speak of),
`no dcgm-exporter series` (GPU figures for this host), or the query's own error. Prometheus
unreachable, or the `up` query refused, fails the whole report (`FleetReport.error`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from vllm_console.console.sources.fleet_hosts import host_part

if TYPE_CHECKING:
    from vllm_console.checks.profile import Acceptance
from vllm_console.console.sources.prometheus import (
    PromError,
    Prometheus,
    PromUnreachable,
    Series,
    with_selector,
)
from vllm_console.console.telemetry.serving import lagging

ABSENT = "absent"
IDLE = "idle: no drafts in the last minute"
NO_DCGM = "no dcgm-exporter series"
NO_REQUESTS = "idle: no requests in the last minute"
PER_SERVER = "per server"
"""Why an engine row has no figure of its own (KV, GPUs, latency): the server's row says it."""
WINDOW = "1m"

FIGURES = ("mean_acceptance_length", "draft_acceptance_rate_pct", "generation_tps", "running",
           "waiting", "kv_cache_usage_pct", "gpu_util_pct", "gpu_mem_used_mib",
           "gpu_mem_total_mib", "ttft_p99_s", "e2e_p99_s")
# Latency percentiles: Prometheus's histogram_quantile over the rate of the bucket series in
# the window (so the recent requests, not those since start-up), summed over engines by bucket.
LATENCY = {"ttft_p99": "vllm:time_to_first_token_seconds_bucket",
           "e2e_p99": "vllm:e2e_request_latency_seconds_bucket"}


def queries(selector: str, label: str) -> dict[str, str]:
    """The PromQL the fleet runs, by name (README lists them; the benchmark times them)."""
    def sel(metric: str) -> str:
        return with_selector(metric, selector)

    def rate(counter: str, by: str) -> str:
        return f"sum by ({by}) (rate({sel(counter)}[{WINDOW}]))"

    engine = f"{label}, engine"
    return {
        "up": sel("up"),
        "model": f"count by ({label}, job, model_name) ({sel('vllm:num_requests_running')})",
        "accepted": rate("vllm:spec_decode_num_accepted_tokens_total", engine),
        "drafts": rate("vllm:spec_decode_num_drafts_total", engine),
        "draft_tokens": rate("vllm:spec_decode_num_draft_tokens_total", engine),
        "generation_tps": rate("vllm:generation_tokens_total", label),
        # Per data-parallel engine: a hung replica hides in the sums.
        "engine_gen": rate("vllm:generation_tokens_total", engine),
        "engine_running": f"sum by ({engine}) ({sel('vllm:num_requests_running')})",
        "engine_waiting": f"sum by ({engine}) ({sel('vllm:num_requests_waiting')})",
        "running": f"sum by ({label}) ({sel('vllm:num_requests_running')})",
        "waiting": f"sum by ({label}) ({sel('vllm:num_requests_waiting')})",
        "kv_cache_usage": f"avg by ({label}) ({sel('vllm:kv_cache_usage_perc')}) or "
                          f"avg by ({label}) ({sel('vllm:gpu_cache_usage_perc')})",
        # dcgm-exporter is its own scrape job: the fleet's selector does not apply to it.
        "gpu_util": f"avg by ({label}) (DCGM_FI_DEV_GPU_UTIL)",
        "gpu_used": f"sum by ({label}) (DCGM_FI_DEV_FB_USED)",
        "gpu_free": f"sum by ({label}) (DCGM_FI_DEV_FB_FREE)",
        **{name: f"histogram_quantile(0.99, sum by ({label}, le) "
                 f"(rate({sel(buckets)}[{WINDOW}])))" for name, buckets in LATENCY.items()},
    }


@dataclass(frozen=True)
class FleetServer:
    """One server as the fleet shows it. A None figure has its reason in `missing`."""

    key: str
    """The value of the host label (e.g. `10.0.0.5:8000`)."""
    job: str | None = None
    up: bool | None = None
    model: str | None = None
    mean_acceptance_length: float | None = None
    per_engine_acceptance: Mapping[str, float | None] = field(default_factory=dict)
    draft_acceptance_rate_pct: float | None = None
    generation_tps: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage_pct: float | None = None
    gpu_util_pct: float | None = None
    gpu_mem_used_mib: float | None = None
    gpu_mem_total_mib: float | None = None
    per_engine_generation_tps: Mapping[str, float] = field(default_factory=dict)
    """Generation tokens/s per data-parallel engine (`engine` label)."""
    per_engine_running: Mapping[str, float] = field(default_factory=dict)
    """Requests running per engine."""
    per_engine_waiting: Mapping[str, float] = field(default_factory=dict)
    """Requests waiting per engine (an engine with no waiting series has none here)."""
    ttft_p99_s: float | None = None
    """Time to first token, 99th percentile over the window (histogram_quantile)."""
    e2e_p99_s: float | None = None
    """End-to-end request latency, 99th percentile over the window."""
    expected_acceptance: Acceptance | None = None
    """The range the fleet's profile expects (`fleet --json` shows its high end)."""
    missing: Mapping[str, str] = field(default_factory=dict)
    host: str | None = None
    """The hosts-file entry this server maps to (by the host label), if any."""
    parent: str | None = None
    """Set on one data-parallel engine's row (`engine_rows`): its server's key."""
    slow: bool = False
    """One engine's row: it generates under half the fastest engine's rate (imbalance)."""

    @property
    def per_engine_requests(self) -> dict[str, float]:
        """Requests running plus waiting per engine (an engine without a waiting series: its
        running ones)."""
        return {e: r + self.per_engine_waiting.get(e, 0.0)
                for e, r in self.per_engine_running.items()}

    def engine_rows(self) -> tuple[FleetServer, ...]:
        """One row per data-parallel engine (`engine` label), for a server with two or more:
        its own acceptance, tokens/s, running and waiting, engine state and flag; what only
        the server has (KV, GPUs, latency) is the server's row's. Keys: `KEY · e0`, ..."""
        engines = sorted(set(self.per_engine_acceptance) | set(self.per_engine_running)
                         | set(self.per_engine_generation_tps))
        if len(engines) < 2:
            return ()
        rates = self.per_engine_generation_tps
        slow = lagging(self._busy_rates())
        rows = []
        for e in engines:
            mine = {k: v.get(e) for k, v in (("running", self.per_engine_running),
                                               ("waiting", self.per_engine_waiting),
                                               ("generation_tps", rates))}
            missing = {f: PER_SERVER for f in FIGURES
                       if f not in ("mean_acceptance_length", "generation_tps", "running",
                                    "waiting")}
            missing.update({f: ABSENT for f, v in mine.items() if v is None})
            accept = self.per_engine_acceptance.get(e)
            if accept is None:
                missing["mean_acceptance_length"] = self.missing.get(
                    "mean_acceptance_length", IDLE if e in self.per_engine_acceptance else ABSENT)
            rows.append(replace(
                self, key=f"{self.key} · e{e}", parent=self.key,
                mean_acceptance_length=accept, per_engine_acceptance={},
                draft_acceptance_rate_pct=None, generation_tps=mine["generation_tps"],
                running=mine["running"], waiting=mine["waiting"], kv_cache_usage_pct=None,
                gpu_util_pct=None, gpu_mem_used_mib=None, gpu_mem_total_mib=None,
                ttft_p99_s=None, e2e_p99_s=None,
                per_engine_generation_tps={e: rates[e]} if e in rates else {},
                per_engine_running={e: mine["running"]} if mine["running"] is not None else {},
                per_engine_waiting={e: mine["waiting"]} if mine["waiting"] is not None else {},
                slow=e in slow, missing=missing))
        return tuple(rows)

    @property
    def stalled_engines(self) -> tuple[str, ...]:
        """The engines holding requests that generated no token in the window."""
        return tuple(e for e, busy in sorted(self.per_engine_requests.items())
                     if busy > 0 and self.per_engine_generation_tps.get(e) == 0)

    def _busy_rates(self) -> dict[str, float]:
        """Tokens/s of the engines with requests running or waiting."""
        return {e: self.per_engine_generation_tps[e] for e, busy in
                self.per_engine_requests.items() if busy > 0
                and e in self.per_engine_generation_tps}

    @property
    def imbalanced(self) -> bool | None:
        """Two or more engines with requests, the slowest under half the fastest's rate."""
        rates = self._busy_rates()
        if len(rates) < 2:
            return None
        return bool(lagging(rates))

    @property
    def engine(self) -> str | None:
        """`stalled` (requests running or waiting, no token generated in the window: vLLM's
        /health keeps answering 200 when its engine hangs), `idle` (no request now), `ok`
        (requests, and tokens flowing), None when the figures to tell are missing (no
        waiting series counts as none waiting)."""
        if self.running is None or self.generation_tps is None:
            return None
        if self.running + (self.waiting or 0.0) == 0:
            return "idle"
        if self.stalled_engines:  # one hung replica, though the sum still moves
            return "stalled"
        return "ok" if self.generation_tps > 0 else "stalled"

    @property
    def low_acceptance(self) -> bool | None:
        expected = self.expected_acceptance
        return None if expected is None else expected.is_low(self.mean_acceptance_length)

    def to_json(self) -> dict[str, Any]:
        """One element of `fleet --json`'s `servers` (README: schema)."""
        return {
            "key": self.key, "host": self.host, "job": self.job, "up": self.up,
            "model": self.model,
            **{name: _round(getattr(self, name)) for name in FIGURES},
            "per_engine_acceptance": {k: _round(v) for k, v in
                                      sorted(self.per_engine_acceptance.items())},
            "expected_acceptance": (self.expected_acceptance.high
                                    if self.expected_acceptance is not None else None),
            "low_acceptance": self.low_acceptance,
            "engine": self.engine,
            "stalled_engines": list(self.stalled_engines),
            "imbalanced": self.imbalanced,
            "per_engine_generation_tps": {k: _round(v) for k, v in
                                          sorted(self.per_engine_generation_tps.items())},
            "missing": dict(sorted(self.missing.items())),
        }


@dataclass(frozen=True)
class FleetReport:
    """One refresh of the fleet: the rows, the per-query errors, or why there is nothing."""

    prometheus: str
    selector: str
    host_label: str
    at: float
    servers: tuple[FleetServer, ...] = ()
    query_errors: Mapping[str, str] = field(default_factory=dict)
    error: str = ""
    """Set when there is no table at all (Prometheus unreachable, the `up` query refused)."""
    took_s: float = 0.0

    def with_hosts(self, hosts: Mapping[str, str]) -> FleetReport:
        """The rows with their hosts-file entry names (`hosts`: label value -> name)."""
        return replace(self, servers=tuple(replace(s, host=hosts.get(s.key))
                                           for s in self.servers))

    def to_json(self) -> dict[str, Any]:
        return {"prometheus": self.prometheus, "selector": self.selector,
                "host_label": self.host_label,
                "queried_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at)),
                "error": self.error or None,
                "query_errors": dict(sorted(self.query_errors.items())),
                "servers": [s.to_json() for s in self.servers]}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def query_fleet(prom: Prometheus, *, selector: str = "", host_label: str = "instance",
                      profile: str | None = None) -> FleetReport:
    """Run the fleet's queries at once and assemble one row per server."""
    started = time.monotonic()
    named = queries(selector, host_label)
    answers = await asyncio.gather(*(prom.query(q) for q in named.values()),
                                   return_exceptions=True)
    results: dict[str, list[Series]] = {}
    errors: dict[str, str] = {}
    for name, answer in zip(named, answers, strict=True):
        if isinstance(answer, PromError):
            errors[name] = str(answer)
        elif isinstance(answer, BaseException):
            raise answer
        else:
            results[name] = answer
    report = FleetReport(prom.url, selector, host_label, time.time(), query_errors=errors)
    if "up" in errors:
        unreachable = any(isinstance(a, PromUnreachable) for a in answers)
        why = errors["up"] if unreachable else f"the `up` query failed: {errors['up']}"
        return replace(report, error=why, query_errors={}, took_s=time.monotonic() - started)
    from vllm_console.checks.profile import expected_acceptance  # loaded once a fleet is asked

    servers = _assemble(results, errors, host_label, selector, expected_acceptance(None, profile))
    return replace(report, servers=servers, took_s=time.monotonic() - started)


def _by(series: list[Series], label: str) -> dict[str, list[Series]]:
    out: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        out[s.labels.get(label, "")].append(s)
    return out


def _assemble(results: dict[str, list[Series]], errors: dict[str, str], label: str,
              selector: str, expected: Acceptance | None) -> tuple[FleetServer, ...]:
    by = {name: _by(series, label) for name, series in results.items()}
    vllm_jobs = {s.labels.get("job", "") for s in results.get("model", [])}
    keys: dict[str, str | None] = {}
    for s in results.get("up", []):
        job = s.labels.get("job")
        # With no selector every target is in `up`: only the jobs that scrape vLLM count
        # (all of them when the query that tells them failed: better a row too many).
        if selector or job in vllm_jobs or "model" in errors:
            keys.setdefault(s.labels.get(label, ""), job)
    for s in results.get("model", []):
        keys.setdefault(s.labels.get(label, ""), s.labels.get("job"))
    gpu = {name: {host_part(k): v for k, v in by.get(name, {}).items()}
           for name in ("gpu_util", "gpu_used", "gpu_free")}
    rows = []
    for key in sorted(keys):
        missing: dict[str, str] = {}

        def one(name: str, key: str = key, missing: dict[str, str] = missing,
                figure: str = "") -> float | None:
            figure = figure or name
            if name in errors:
                missing[figure] = f"error: {errors[name]}"
                return None
            series = by.get(name, {}).get(key, [])
            found = [s.value for s in series if not math.isnan(s.value)]
            if not found:
                # A quantile of an empty window is NaN: no requests, not no series.
                missing[figure] = NO_REQUESTS if series and name in LATENCY else ABSENT
                return None
            return found[0]

        def gpu_one(name: str, figure: str, key: str = key,
                    missing: dict[str, str] = missing) -> float | None:
            if name in errors:
                missing[figure] = f"error: {errors[name]}"
                return None
            found = gpu[name].get(host_part(key))
            if not found:
                missing[figure] = NO_DCGM
                return None
            return found[0].value

        up_series = by.get("up", {}).get(key, [])
        models = sorted({s.labels.get("model_name", "") for s in by.get("model", {}).get(key, [])
                         if s.labels.get("model_name")})
        mean, per_engine, rate_pct = _acceptance(by, errors, key, missing)
        kv = one("kv_cache_usage", figure="kv_cache_usage_pct")
        used = gpu_one("gpu_used", "gpu_mem_used_mib")
        free = gpu_one("gpu_free", "gpu_mem_total_mib")
        rows.append(FleetServer(
            key=key, job=keys[key],
            up=(max(s.value for s in up_series) == 1.0) if up_series else None,
            model=", ".join(models) or None,
            mean_acceptance_length=mean, per_engine_acceptance=per_engine,
            draft_acceptance_rate_pct=rate_pct,
            generation_tps=one("generation_tps"), running=one("running"),
            waiting=one("waiting"), kv_cache_usage_pct=None if kv is None else 100.0 * kv,
            gpu_util_pct=gpu_one("gpu_util", "gpu_util_pct"),
            gpu_mem_used_mib=used,
            gpu_mem_total_mib=None if used is None or free is None else used + free,
            per_engine_generation_tps=_per_engine(by, "engine_gen", key),
            per_engine_running=_per_engine(by, "engine_running", key),
            per_engine_waiting=_per_engine(by, "engine_waiting", key),
            ttft_p99_s=one("ttft_p99", figure="ttft_p99_s"),
            e2e_p99_s=one("e2e_p99", figure="e2e_p99_s"),
            expected_acceptance=expected, missing=missing))
        if not up_series:
            missing.setdefault("up", ABSENT)
        if not models:
            missing.setdefault("model", ABSENT)
    return tuple(rows)


def _per_engine(by: dict[str, dict[str, list[Series]]], name: str, key: str
                ) -> dict[str, float]:
    """One figure per `engine` label of this server (NaN left out)."""
    return {s.labels.get("engine", ""): s.value for s in by.get(name, {}).get(key, [])
            if not math.isnan(s.value)}


def _acceptance(by: dict[str, dict[str, list[Series]]], errors: dict[str, str], key: str,
                missing: dict[str, str]
                ) -> tuple[float | None, dict[str, float | None], float | None]:
    """Mean acceptance length (summed over engines and per engine) and draft acceptance rate,
    from the counters' rates: 1 + accepted/s / drafts/s, accepted/s / draft tokens/s."""
    names = ("accepted", "drafts", "draft_tokens")
    failed = [n for n in names if n in errors]
    if failed:
        why = f"error: {errors[failed[0]]}"
        missing.update(mean_acceptance_length=why, draft_acceptance_rate_pct=why)
        return None, {}, None
    rates = {n: {s.labels.get("engine", ""): s.value for s in by.get(n, {}).get(key, [])}
             for n in names}
    if not rates["drafts"]:
        missing.update(mean_acceptance_length=ABSENT, draft_acceptance_rate_pct=ABSENT)
        return None, {}, None
    per_engine: dict[str, float | None] = {}
    for engine, drafts in rates["drafts"].items():
        accepted = rates["accepted"].get(engine)
        per_engine[engine] = 1.0 + accepted / drafts if drafts > 0 and accepted is not None \
            else None
    drafts_sum = sum(rates["drafts"].values())
    accepted_sum = sum(rates["accepted"].values())
    tokens_sum = sum(rates["draft_tokens"].values())
    mean = 1.0 + accepted_sum / drafts_sum if drafts_sum > 0 else None
    rate_pct = 100.0 * accepted_sum / tokens_sum if tokens_sum > 0 else None
    if mean is None:
        missing["mean_acceptance_length"] = IDLE
    if rate_pct is None:
        missing["draft_acceptance_rate_pct"] = IDLE if rates["draft_tokens"] else ABSENT
    return mean, per_engine, rate_pct
