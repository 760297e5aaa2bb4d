"""vLLM's serving series in `/metrics`: latency histograms, request counts and outcomes.

One scrape gives cumulative figures since the server started. What a person wants is the recent
window: `histogram_delta` takes two scrapes' buckets apart, and `quantile` reads a percentile
from the difference the way Prometheus's `histogram_quantile` does (linear interpolation inside
the bucket that holds the rank). A counter that went down (the server restarted) or a window with
no new sample gives None: never a negative count, never a stale figure shown as current.

Series carry an `engine` label under data parallel: each engine is kept apart (`by_engine`) and
merged bucket by bucket (`merged`), which is exact for histograms with the same bucket bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_console.console.parsers.metrics import Sample

#: latency key -> the histogram families that carry it, newest name first (older builds named
#: inter-token latency `time_per_output_token`; `request_time_per_output_token` is a per-request
#: mean, another figure, and not a stand-in).
LATENCY_FAMILIES: Mapping[str, tuple[str, ...]] = {
    "ttft_s": ("vllm:time_to_first_token_seconds",),
    "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e_s": ("vllm:e2e_request_latency_seconds",),
    "queue_s": ("vllm:request_queue_time_seconds",),
}
#: key -> family of the histograms a serving pane shows beside those four (they stay out of
#: `status --json`'s `latency`): the per-request mean time per output token, the prefill and
#: decode phases, and the request shapes (prompt and generation lengths, in tokens).
DETAIL_FAMILIES: Mapping[str, tuple[str, ...]] = {
    "tpot_s": ("vllm:request_time_per_output_token_seconds",),
    "prefill_s": ("vllm:request_prefill_time_seconds",),
    "decode_s": ("vllm:request_decode_time_seconds",),
    "prompt_tokens": ("vllm:request_prompt_tokens",),
    "generation_tokens": ("vllm:request_generation_tokens",),
}
_FAMILY_KEY = {name: key for families in (LATENCY_FAMILIES, DETAIL_FAMILIES)
               for key, names in families.items() for name in names}
_RUNNING = "vllm:num_requests_running"
_WAITING = "vllm:num_requests_waiting"
_GENERATION = "vllm:generation_tokens_total"
_PREEMPTIONS = "vllm:num_preemptions_total"
_SUCCESS = "vllm:request_success_total"
QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts: `buckets` are (upper bound, count of observations <= it),
    ascending, `+Inf` last; `count` observations summing to `total`."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    total: float = 0.0


@dataclass(frozen=True, slots=True)
class EngineSeries:
    """One engine's serving series from one scrape (None: the scrape lacks it)."""

    latency: Mapping[str, Histogram] = field(default_factory=dict)
    running: float | None = None
    waiting: float | None = None
    generation_tokens: float | None = None
    preemptions: float | None = None
    finished: Mapping[str, float] = field(default_factory=dict)
    """Finished requests by `finished_reason` (stop, length, abort, error, ...), cumulative."""
    detail: Mapping[str, Histogram] = field(default_factory=dict)
    """The `DETAIL_FAMILIES` histograms the scrape has."""


@dataclass(frozen=True, slots=True)
class ServingScrape:
    """The serving series of one scrape, by `engine` label ("" for series without one)."""

    by_engine: Mapping[str, EngineSeries] = field(default_factory=dict)

    @property
    def merged(self) -> EngineSeries:
        """Every engine together: counts summed, histograms merged bucket by bucket."""
        return merge_engines(list(self.by_engine.values()))


class ServingCollector:
    """Gathers the serving samples of one scrape (fed by `console.parsers.metrics`'s one pass
    over the samples, so a scrape is parsed once)."""

    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], dict[float, float]] = {}
        self._counts: dict[tuple[str, str], float] = {}
        self._sums: dict[tuple[str, str], float] = {}
        self._scalars: dict[tuple[str, str], float] = {}
        self._finished: dict[str, dict[str, float]] = {}
        self._engines: set[str] = set()

    def add(self, sample: Sample) -> None:
        name, labels, value = sample.name, sample.labels, sample.value
        if not math.isfinite(value):
            return
        engine = labels.get("engine", "")
        family, _, part = name.rpartition("_")
        key = _FAMILY_KEY.get(family)
        if key is not None:
            self._add_histogram(key, family, part, engine, labels, value)
            return
        if name in (_RUNNING, _WAITING, _GENERATION, _PREEMPTIONS):
            self._scalars[(name, engine)] = self._scalars.get((name, engine), 0.0) + value
            self._engines.add(engine)
        elif name == _SUCCESS:
            reasons = self._finished.setdefault(engine, {})
            reason = labels.get("finished_reason", "") or "?"
            reasons[reason] = reasons.get(reason, 0.0) + value
            self._engines.add(engine)

    def _add_histogram(self, key: str, family: str, part: str, engine: str,
                       labels: Mapping[str, str], value: float) -> None:
        # `family` is kept in the key so that an old and a new name of one figure in the same
        # scrape are not added together; `result` keeps the newest name.
        slot = (family, engine)
        if part == "bucket":
            bound = _bound(labels.get("le", ""))
            if bound is None:
                return
            counts = self._buckets.setdefault(slot, {})
            counts[bound] = counts.get(bound, 0.0) + value
        elif part == "count":
            self._counts[slot] = self._counts.get(slot, 0.0) + value
        elif part == "sum":
            self._sums[slot] = self._sums.get(slot, 0.0) + value
        else:
            return
        self._engines.add(engine)

    def result(self) -> ServingScrape | None:
        """The scrape's serving series; None when it has none."""
        if not self._engines:
            return None
        return ServingScrape({engine: self._engine(engine) for engine in sorted(self._engines)})

    def _engine(self, engine: str) -> EngineSeries:
        scalar = self._scalars.get
        return EngineSeries(latency=self._histograms(LATENCY_FAMILIES, engine),
                            running=scalar((_RUNNING, engine)),
                            waiting=scalar((_WAITING, engine)),
                            generation_tokens=scalar((_GENERATION, engine)),
                            preemptions=scalar((_PREEMPTIONS, engine)),
                            finished=dict(self._finished.get(engine, {})),
                            detail=self._histograms(DETAIL_FAMILIES, engine))

    def _histograms(self, families: Mapping[str, tuple[str, ...]],
                    engine: str) -> dict[str, Histogram]:
        found: dict[str, Histogram] = {}
        for key, names in families.items():
            for family in names:
                histogram = self._histogram(family, engine)
                if histogram is not None:
                    found[key] = histogram
                    break
        return found

    def _histogram(self, family: str, engine: str) -> Histogram | None:
        counts = self._buckets.get((family, engine))
        if not counts or math.inf not in counts:
            return None  # without the +Inf bucket the total is unknown
        buckets = tuple(sorted(counts.items()))
        count = self._counts.get((family, engine), buckets[-1][1])
        return Histogram(buckets, count, self._sums.get((family, engine), 0.0))


def _bound(text: str) -> float | None:
    try:
        bound = float(text)
    except ValueError:
        return None
    return None if math.isnan(bound) else bound


def merge_histograms(histograms: list[Histogram]) -> Histogram | None:
    """Several engines' histograms as one, bucket by bucket; None when their bounds differ
    (summing differently-bounded buckets would invent observations)."""
    if not histograms:
        return None
    bounds = [b for b, _ in histograms[0].buckets]
    if any([b for b, _ in h.buckets] != bounds for h in histograms[1:]):
        return None
    counts = [sum(h.buckets[i][1] for h in histograms) for i in range(len(bounds))]
    return Histogram(tuple(zip(bounds, counts, strict=True)), sum(h.count for h in histograms),
                     sum(h.total for h in histograms))


def _merge_each(keys: Mapping[str, object], each: list[Mapping[str, Histogram]]
                ) -> dict[str, Histogram]:
    merged: dict[str, Histogram] = {}
    for key in keys:
        found = merge_histograms([h[key] for h in each if key in h])
        if found is not None:
            merged[key] = found
    return merged


def merge_engines(engines: list[EngineSeries]) -> EngineSeries:
    """Engines' series as one (each figure None when no engine has it)."""
    latency = _merge_each(LATENCY_FAMILIES, [e.latency for e in engines])
    finished: dict[str, float] = {}
    for engine in engines:
        for reason, value in engine.finished.items():
            finished[reason] = finished.get(reason, 0.0) + value

    def total(name: str) -> float | None:
        values = [getattr(e, name) for e in engines if getattr(e, name) is not None]
        return sum(values) if values else None

    return EngineSeries(latency=latency, running=total("running"), waiting=total("waiting"),
                        generation_tokens=total("generation_tokens"),
                        preemptions=total("preemptions"), finished=finished,
                        detail=_merge_each(DETAIL_FAMILIES, [e.detail for e in engines]))


def histogram_delta(prev: Histogram, cur: Histogram) -> Histogram | None:
    """The observations made between two scrapes. None when the histogram was reset (a count
    went down: the server restarted) or its buckets changed."""
    if [b for b, _ in prev.buckets] != [b for b, _ in cur.buckets]:
        return None
    counts = [c - p for (_, p), (_, c) in zip(prev.buckets, cur.buckets, strict=True)]
    count = cur.count - prev.count
    if count < 0 or any(c < 0 for c in counts):
        return None
    return Histogram(tuple(zip((b for b, _ in cur.buckets), counts, strict=True)), count,
                     cur.total - prev.total)


def quantile(q: float, histogram: Histogram | None) -> float | None:
    """The q-quantile (0 < q < 1) as Prometheus's `histogram_quantile` computes it: linear
    interpolation within the bucket holding the rank, the lowest bucket starting at 0, a rank in
    the `+Inf` bucket answered with the highest finite bound. None without observations."""
    if histogram is None or not 0 < q < 1 or not histogram.buckets:
        return None
    buckets = _monotonic(histogram.buckets)
    observed = buckets[-1][1]
    if buckets[-1][0] != math.inf or observed <= 0:
        return None
    rank = q * observed
    below, lower = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if bound == math.inf:
                return buckets[i - 1][0] if i > 0 else None
            if i == 0 and bound <= 0:
                return bound
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        below, lower = count, bound
    return None


def _monotonic(buckets: tuple[tuple[float, float], ...]) -> list[tuple[float, float]]:
    """Cumulative counts never go down in a real histogram; scrapes of several processes
    (multiprocess mode) can be off by one in flight, which Prometheus smooths the same way."""
    out: list[tuple[float, float]] = []
    high = 0.0
    for bound, count in buckets:
        high = max(high, count)
        out.append((bound, high))
    return out


def percentiles(histogram: Histogram | None) -> dict[str, float] | None:
    """`{"p50", "p90", "p99"}` of a histogram (a window's delta); None without observations."""
    if histogram is None or histogram.count <= 0:
        return None
    found = {f"p{round(q * 100)}": quantile(q, histogram) for q in QUANTILES}
    if any(v is None for v in found.values()):
        return None
    return {k: v for k, v in found.items() if v is not None}


def counter_delta(prev: float | None, cur: float | None) -> float | None:
    """How much a counter grew between two scrapes; None when unknown or reset (it went down)."""
    if prev is None or cur is None or cur < prev:
        return None
    return cur - prev
