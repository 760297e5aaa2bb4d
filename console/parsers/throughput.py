"""vLLM's periodic throughput line (every ~10 s while the engine is busy).

    Engine 000: Avg prompt throughput: 131.0 tokens/s, Avg generation throughput: 19.0 tokens/s,
    Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 36.2%

Every field is optional; V0's `Pending` counts as waiting; fields this parser does not know
(`Swapped`, `CPU KV cache usage`, `External prefix cache hit rate`, ...) land in `extra`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from console.parsers.labelled import integer, label_key, number, split_labelled

_STARTS = ("Avg prompt throughput", "Avg generation throughput")
_ENGINE = re.compile(r"Engine\s+(\d{1,9}):?\s*$")


@dataclass(frozen=True, slots=True)
class ThroughputSample:
    """One throughput line; None for what it lacks. Throughputs in tokens/s, usage in %."""

    engine: str | None = None
    prompt_throughput: float | None = None
    generation_throughput: float | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage_pct: float | None = None
    prefix_cache_hit_rate_pct: float | None = None
    extra: tuple[tuple[str, str], ...] = ()


_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "avg prompt throughput": ("prompt_throughput", number),
    "avg generation throughput": ("generation_throughput", number),
    "running": ("running", integer),
    "waiting": ("waiting", integer),
    "pending": ("waiting", integer),
    "gpu kv cache usage": ("kv_cache_usage_pct", number),
    "kv cache usage": ("kv_cache_usage_pct", number),
    "prefix cache hit rate": ("prefix_cache_hit_rate_pct", number),
    "gpu prefix cache hit rate": ("prefix_cache_hit_rate_pct", number),
}


def parse_throughput(message: str) -> ThroughputSample | None:
    """Parse a throughput line; None for any other line."""
    starts = [i for i in (message.find(s) for s in _STARTS) if i >= 0]
    if not starts:
        return None
    idx = min(starts)
    m = _ENGINE.search(message, max(0, idx - 40), idx)
    values: dict[str, Any] = {"engine": m[1]} if m is not None else {}
    extra: list[tuple[str, str]] = []
    for label, raw in split_labelled(message[idx:]):
        text = ", ".join(raw)
        known = _FIELDS.get(label_key(label))
        if known is None:
            extra.append((label, text.rstrip(".")))
            continue
        name, read = known
        value = read(text)
        if value is not None and name not in values:
            values[name] = value
    return replace(ThroughputSample(extra=tuple(extra)), **values)


def format_throughput(sample: ThroughputSample) -> str:
    """Write a sample as vLLM's current throughput line would (fields that are None left out)."""
    parts: list[str] = []
    if sample.prompt_throughput is not None:
        parts.append(f"Avg prompt throughput: {sample.prompt_throughput:.1f} tokens/s")
    if sample.generation_throughput is not None:
        parts.append(f"Avg generation throughput: {sample.generation_throughput:.1f} tokens/s")
    if sample.running is not None:
        parts.append(f"Running: {sample.running} reqs")
    if sample.waiting is not None:
        parts.append(f"Waiting: {sample.waiting} reqs")
    if sample.kv_cache_usage_pct is not None:
        parts.append(f"GPU KV cache usage: {sample.kv_cache_usage_pct:.1f}%")
    if sample.prefix_cache_hit_rate_pct is not None:
        parts.append(f"Prefix cache hit rate: {sample.prefix_cache_hit_rate_pct:.1f}%")
    parts.extend(f"{label}: {text}" for label, text in sample.extra)
    head = f"Engine {sample.engine}: " if sample.engine is not None else ""
    return head + ", ".join(parts)
