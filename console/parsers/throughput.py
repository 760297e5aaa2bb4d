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
from dataclasses import dataclass, replace
from typing import Any

from vllm_console.console.parsers.labelled import (
    Fields,
    Writers,
    first,
    integer,
    label_key,
    number,
    read_labelled,
    split_labelled,
    write_labelled,
)

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


_FIELDS: Fields = {
    "avg prompt throughput": ("prompt_throughput", first(number)),
    "avg generation throughput": ("generation_throughput", first(number)),
    "running": ("running", first(integer)),
    "waiting": ("waiting", first(integer)),
    "pending": ("waiting", first(integer)),
    "kv cache usage": ("kv_cache_usage_pct", first(number)),
    "prefix cache hit rate": ("prefix_cache_hit_rate_pct", first(number)),
    "gpu prefix cache hit rate": ("prefix_cache_hit_rate_pct", first(number)),
    "deferred": ("deferred", first(integer)),
    "preemptions": ("preemptions", first(integer)),
    "corrupted": ("corrupted", first(integer)),
    "mm cache hit rate": ("mm_cache_hit_rate_pct", first(number)),
}

_KV_FETCH = "KV fetch: {} waiting to start, {} in progress, {} completed waiting"


def _kv_usage(sample: ThroughputSample) -> str:
    device = f"{sample.kv_cache_device} " if sample.kv_cache_device else ""
    return f"{device}KV cache usage: {sample.kv_cache_usage_pct:.1f}%"


# How vLLM's current line writes each field, in its order.
_WRITERS: Writers = (
    ("prompt_throughput", "Avg prompt throughput: {:.1f} tokens/s"),
    ("generation_throughput", "Avg generation throughput: {:.1f} tokens/s"),
    ("running", "Running: {} reqs"),
    ("waiting", "Waiting: {} reqs"),
    ("deferred", "Deferred: {} reqs"),
    ("kv_fetch", lambda s: _KV_FETCH.format(*s.kv_fetch) if len(s.kv_fetch) == 3 else None),
    ("preemptions", "Preemptions: {}"),
    ("kv_cache_usage_pct", _kv_usage),
    ("prefix_cache_hit_rate_pct", "Prefix cache hit rate: {:.1f}%"),
    ("corrupted", "Corrupted: {} reqs"),
    ("mm_cache_hit_rate_pct", "MM cache hit rate: {:.1f}%"),
)


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

    def key_of(label: str, raw: list[str]) -> str | None:
        key = label_key(label)
        usage = _KV_USAGE.fullmatch(key)
        if usage is not None and "kv_cache_usage_pct" not in values:
            values["kv_cache_device"] = (usage["device"] or "").upper() or None
            return "kv cache usage"
        if key == "kv fetch":
            values.setdefault("kv_fetch", _kv_fetch(raw))
            return None
        return key

    extra = read_labelled(split_labelled(message[idx:]), _FIELDS, values, key_of)
    return replace(ThroughputSample(extra=extra), **values)


def format_throughput(sample: ThroughputSample) -> str:
    """Write a sample as vLLM's current throughput line would (fields that are None left out)."""
    if sample.engine is not None:
        head = f"Engine {sample.engine}: "
    elif sample.aggregated_engines is not None:
        head = f"{sample.aggregated_engines} Engines Aggregated: "
    else:
        head = ""
    return head + ", ".join(write_labelled(sample, _WRITERS))
