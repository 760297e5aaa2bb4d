"""Every serving histogram of `/metrics` read over one span: the recent window (two scrapes'
difference) or since the server started (one scrape's cumulative counts).

A screen that shows only the window is blank for a minute after the last request (and until the
console has two scrapes); one that shows only since start-up hides what changed. A serving
pane shows the window while requests finish in it, else since start-up, and says which
(`ServingStatus.shown_span`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vllm_console.console.parsers.serving import (
    DETAIL_FAMILIES,
    LATENCY_FAMILIES,
    EngineSeries,
    Histogram,
    histogram_delta,
    percentiles,
)

SPAN_KEYS = (*LATENCY_FAMILIES, *DETAIL_FAMILIES)
"""ttft_s, itl_s, e2e_s, queue_s, tpot_s, prefill_s, decode_s, prompt_tokens,
generation_tokens."""


@dataclass(frozen=True, slots=True)
class ServingSpan:
    """Percentiles (`{p50, p90, p99}`, None: no observation or no such series) of every
    histogram over one span, and how many requests finished in it."""

    figures: Mapping[str, Mapping[str, float] | None]
    requests: int | None
    """The e2e histogram's count over the span (None: the scrape has no e2e series)."""
    window_s: float | None = None
    """The window's length; None: since the server started."""

    @property
    def since_start(self) -> bool:
        return self.window_s is None

    @property
    def picture(self) -> tuple[object, ...]:
        """What a person sees of it (the window's length moves on every scrape)."""
        return self.since_start, self.requests, tuple(
            (k, None if v is None else tuple(sorted(v.items())))
            for k, v in sorted(self.figures.items()))


def _histograms(series: EngineSeries) -> dict[str, Histogram]:
    return {**series.latency, **series.detail}


def span_since_start(series: EngineSeries) -> ServingSpan:
    """One scrape's cumulative histograms: everything since the server started."""
    found = _histograms(series)
    e2e = found.get("e2e_s")
    return ServingSpan({key: percentiles(found.get(key)) for key in SPAN_KEYS},
                       None if e2e is None else int(e2e.count))


def span_between(old: EngineSeries, new: EngineSeries, seconds: float) -> ServingSpan:
    """What was observed between two scrapes `seconds` apart (a reset histogram: None)."""
    before, after = _histograms(old), _histograms(new)
    deltas = {key: histogram_delta(before[key], after[key])
              if key in before and key in after else None for key in SPAN_KEYS}
    e2e = deltas["e2e_s"]
    return ServingSpan({key: percentiles(delta) for key, delta in deltas.items()},
                       None if e2e is None else int(e2e.count), round(seconds, 1))
