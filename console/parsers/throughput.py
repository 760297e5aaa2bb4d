"""vLLM's periodic throughput line (every ~10 s while the engine is busy).

    Engine 000: Avg prompt throughput: 131.0 tokens/s, Avg generation throughput: 19.0 tokens/s,
    Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 36.2%

Every field is optional; V0's `Pending` counts as waiting. Newer fields (0.30-0.34): `Deferred: N
reqs` (waiting requests held back; `Waiting` includes them), `KV fetch: A waiting to start, B in
progress, C completed waiting`, `Preemptions: N`, the device in `XPU KV cache usage` / `CPU ...`,
`Corrupted: N reqs`, `MM cache hit rate`. With data parallel each engine logs `Engine 001: ...`
and the front-end `2 Engines Aggregated: ...`. Fields this parser does not know (`Swapped`,
`External prefix cache hit rate`, ...) land in `extra`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from console.parsers.labelled import integer, label_key, number, split_labelled

_STARTS = ("Avg prompt throughput", "Avg generation throughput")
_ENGINE = re.compile(r"Engine\s+(\d{1,9}):?\s*$")
_AGGREGATED = re.compile(r"(\d{1,9}) Engines Aggregated:?\s*$")
_KV_USAGE = re.compile(r"(?:(?P<device>[a-z]{2,4}) )?kv cache usage")  # label_key: lower case


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
    aggregated_engines: int | None = None
    """`N Engines Aggregated:` (data parallel): the front-end's sum over N engines."""
    kv_cache_device: str | None = None
    """`GPU`, `XPU`, `CPU`: whose KV cache `kv_cache_usage_pct` is."""
    deferred: int | None = None
    kv_fetch: tuple[int, ...] | None = None
    """Requests fetching KV: waiting to start, in progress, completed waiting."""
    preemptions: int | None = None
    corrupted: int | None = None
    mm_cache_hit_rate_pct: float | None = None


_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "avg prompt throughput": ("prompt_throughput", number),
    "avg generation throughput": ("generation_throughput", number),
    "running": ("running", integer),
    "waiting": ("waiting", integer),
    "pending": ("waiting", integer),
    "kv cache usage": ("kv_cache_usage_pct", number),
    "prefix cache hit rate": ("prefix_cache_hit_rate_pct", number),
    "gpu prefix cache hit rate": ("prefix_cache_hit_rate_pct", number),
    "deferred": ("deferred", integer),
    "preemptions": ("preemptions", integer),
    "corrupted": ("corrupted", integer),
    "mm cache hit rate": ("mm_cache_hit_rate_pct", number),
}


def _kv_fetch(parts: list[str]) -> tuple[int, ...] | None:
    counts = [integer(part) for part in parts]
    return tuple(c for c in counts if c is not None) if None not in counts else None


def parse_throughput(message: str) -> ThroughputSample | None:
    """Parse a throughput line; None for any other line."""
    starts = [i for i in (message.find(s) for s in _STARTS) if i >= 0]
    if not starts:
        return None
    idx = min(starts)
    m = _ENGINE.search(message, max(0, idx - 40), idx)
    values: dict[str, Any] = {"engine": m[1]} if m is not None else {}
    if m is None:
        m = _AGGREGATED.search(message, max(0, idx - 40), idx)
        if m is not None:
            values["aggregated_engines"] = int(m[1])
    extra: list[tuple[str, str]] = []
    for label, raw in split_labelled(message[idx:]):
        text = ", ".join(raw)
        key = label_key(label)
        usage = _KV_USAGE.fullmatch(key)
        if usage is not None and "kv_cache_usage_pct" not in values:
            values["kv_cache_device"] = (usage["device"] or "").upper() or None
            key = "kv cache usage"
        elif key == "kv fetch":
            values.setdefault("kv_fetch", _kv_fetch(raw))
            continue
        known = _FIELDS.get(key)
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
    if sample.deferred is not None:
        parts.append(f"Deferred: {sample.deferred} reqs")
    if sample.kv_fetch is not None and len(sample.kv_fetch) == 3:
        parts.append("KV fetch: {} waiting to start, {} in progress, {} completed waiting"
                     .format(*sample.kv_fetch))
    if sample.preemptions is not None:
        parts.append(f"Preemptions: {sample.preemptions}")
    if sample.kv_cache_usage_pct is not None:
        device = f"{sample.kv_cache_device} " if sample.kv_cache_device else ""
        parts.append(f"{device}KV cache usage: {sample.kv_cache_usage_pct:.1f}%")
    if sample.prefix_cache_hit_rate_pct is not None:
        parts.append(f"Prefix cache hit rate: {sample.prefix_cache_hit_rate_pct:.1f}%")
    if sample.corrupted is not None:
        parts.append(f"Corrupted: {sample.corrupted} reqs")
    if sample.mm_cache_hit_rate_pct is not None:
        parts.append(f"MM cache hit rate: {sample.mm_cache_hit_rate_pct:.1f}%")
    parts.extend(f"{label}: {text}" for label, text in sample.extra)
    if sample.engine is not None:
        head = f"Engine {sample.engine}: "
    elif sample.aggregated_engines is not None:
        head = f"{sample.aggregated_engines} Engines Aggregated: "
    else:
        head = ""
    return head + ", ".join(parts)
