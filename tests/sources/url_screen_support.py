"""What the URL screen's tests check its figures against: the `/metrics` bodies the session
really scraped (recorded on their way in), read with prometheus_client's parser and Prometheus's
own `histogram_quantile` rule, written here apart from the console's code."""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

from vllm_console.console.sources import web
from vllm_console.console.sources.url import UrlSource

FAMILIES = {"ttft_s": "vllm:time_to_first_token_seconds",
            "itl_s": "vllm:inter_token_latency_seconds",
            "tpot_s": "vllm:request_time_per_output_token_seconds",
            "e2e_s": "vllm:e2e_request_latency_seconds",
            "queue_s": "vllm:request_queue_time_seconds",
            "prefill_s": "vllm:request_prefill_time_seconds",
            "decode_s": "vllm:request_decode_time_seconds",
            "prompt_tokens": "vllm:request_prompt_tokens",
            "generation_tokens": "vllm:request_generation_tokens"}


class RecordingSource:
    """The session's URL source, keeping every `/metrics` body it got. `hold()` stops the next
    poll at its first request (`/health`) until `release()`: every scrape recorded has then
    been taken in, and the screen shows the last one's figures."""

    def __init__(self, inner: UrlSource) -> None:
        self.inner = inner
        self.base = inner.base
        self.bodies: list[str] = []
        self.held = False
        """A poll waits at the hold."""
        self._open = asyncio.Event()
        self._open.set()

    async def get(self, path: str) -> web.HttpResult:
        if path == "/health" and not self._open.is_set():
            self.held = True
            await self._open.wait()
            self.held = False
        answer = await self.inner.get(path)
        if path == "/metrics" and answer.ok:
            self.bodies.append(answer.body.decode() if isinstance(answer.body, bytes)
                               else answer.body)
        return answer

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()


def samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a body by (name, labels without engine and model), summed over engines."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items()
                                  if k not in ("engine", "model_name")))
            out[(sample.name, labels)] += sample.value
    return out


def buckets(body: str, family: str) -> list[tuple[float, float]]:
    """The cumulative (le, count) pairs of a histogram, ascending."""
    found = [(float(dict(labels)["le"]), value) for (name, labels), value in samples(body).items()
             if name == f"{family}_bucket"]
    return sorted(found)


def histogram_quantile(q: float, pairs: list[tuple[float, float]]) -> float | None:
    """Prometheus's `histogram_quantile` (promql/quantile.go) on cumulative buckets."""
    if len(pairs) < 2 or pairs[-1][0] != math.inf or pairs[-1][1] <= 0:
        return None
    rank = q * pairs[-1][1]
    for i, (bound, count) in enumerate(pairs):
        if count >= rank:
            if bound == math.inf:
                return pairs[i - 1][0]
            start, below = (0.0, 0.0) if i == 0 else pairs[i - 1]
            if i == 0 and bound <= 0:
                return bound
            return start + (bound - start) * (rank - below) / (count - below)
    return None


def expected_percentiles(new: str, old: str | None = None) -> dict[str, dict[str, float] | None]:
    """p50/p90/p99 of every family in `new`, over what came after `old` when given."""
    out: dict[str, dict[str, float] | None] = {}
    for key, family in FAMILIES.items():
        pairs = buckets(new, family)
        if old is not None:
            before = dict(buckets(old, family))
            pairs = [(bound, count - before.get(bound, 0.0)) for bound, count in pairs]
        figures = {f"p{round(q * 100)}": histogram_quantile(q, pairs) for q in (0.5, 0.9, 0.99)}
        out[key] = None if any(v is None for v in figures.values()) else \
            {k: v for k, v in figures.items() if v is not None}
    return out


def value(body: str, name: str, **labels: str) -> float:
    return samples(body)[(name, tuple(sorted(labels.items())))]
