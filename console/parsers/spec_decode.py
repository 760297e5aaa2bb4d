"""vLLM's periodic speculative-decoding line (APIServer, every ~10 s while traffic flows).

Current form::

    SpecDecoding metrics: Mean acceptance length: 2.63, Accepted throughput: 76.80 tokens/s,
    Drafted throughput: 235.49 tokens/s, Accepted: 768 tokens, Drafted: 2355 tokens,
    Per-position acceptance rate: 0.726, 0.467, 0.240, Avg Draft acceptance rate: 32.6%

Older builds start with `Draft acceptance rate: 38.8%`; V0 printed `Speculative metrics: Draft
acceptance rate: 0.642, System efficiency: 0.598, Number of accepted tokens: ...` with fractions.
Newer builds may append fields: they land in `extra`. `DiffusionDecoding metrics` is another
family and is not read here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from console.parsers.labelled import integer, label_key, number, percent, split_labelled

_MARKERS = ("SpecDecoding metrics:", "Speculative metrics:")


@dataclass(frozen=True, slots=True)
class SpecDecodeSample:
    """One interval of speculative decoding; None for what the source did not give.

    `draft_acceptance_rate_pct` is a percentage (0..100); `per_position` holds one acceptance
    fraction (0..1) per speculative token; throughputs are tokens/s. `extra` keeps fields this
    parser does not know, as (label, text) pairs.
    """

    mean_acceptance_length: float | None = None
    draft_acceptance_rate_pct: float | None = None
    per_position: tuple[float, ...] = ()
    accepted_tokens: int | None = None
    drafted_tokens: int | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    extra: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The `spec_decode` object of `status --json`."""
        return {
            "mean_acceptance_length": self.mean_acceptance_length,
            "draft_acceptance_rate_pct": self.draft_acceptance_rate_pct,
            "per_position": list(self.per_position),
            "accepted_tokens": self.accepted_tokens,
            "drafted_tokens": self.drafted_tokens,
        }


def _per_position(values: list[str]) -> tuple[float, ...]:
    numbers = (number(v.strip("[]() ")) for v in values)
    return tuple(n for n in numbers if n is not None)


# label -> how to read it into which field. Both V1 wordings and V0's.
_FIELDS: dict[str, tuple[str, Callable[[list[str], bool], Any]]] = {
    "mean acceptance length": ("mean_acceptance_length", lambda v, _: number(v[0])),
    "accepted throughput": ("accepted_throughput", lambda v, _: number(v[0])),
    "drafted throughput": ("drafted_throughput", lambda v, _: number(v[0])),
    "accepted": ("accepted_tokens", lambda v, _: integer(v[0])),
    "drafted": ("drafted_tokens", lambda v, _: integer(v[0])),
    "number of accepted tokens": ("accepted_tokens", lambda v, _: integer(v[0])),
    "number of draft tokens": ("drafted_tokens", lambda v, _: integer(v[0])),
    "per-position acceptance rate": ("per_position", lambda v, _: _per_position(v)),
    "avg draft acceptance rate": ("draft_acceptance_rate_pct", lambda v, v0: percent(v[0], v0)),
    "draft acceptance rate": ("draft_acceptance_rate_pct", lambda v, v0: percent(v[0], v0)),
}


def parse_spec_decode(message: str) -> SpecDecodeSample | None:
    """Parse a SpecDecoding (or V0 `Speculative metrics`) line; None for any other line."""
    for marker in _MARKERS:
        idx = message.find(marker)
        if idx >= 0:
            break
    else:
        return None
    v0 = marker.startswith("Speculative")
    values: dict[str, Any] = {}
    extra: list[tuple[str, str]] = []
    for label, raw in split_labelled(message[idx + len(marker) :]):
        known = _FIELDS.get(label_key(label))
        if known is None:
            extra.append((label, ", ".join(raw).rstrip(".")))
            continue
        name, read = known
        value = read(raw, v0)
        if value is not None and name not in values:
            values[name] = value
    return replace(SpecDecodeSample(extra=tuple(extra)), **values)


def format_spec_decode(sample: SpecDecodeSample) -> str:
    """Write a sample as vLLM's current SpecDecoding line would (fields that are None left out)."""
    parts: list[str] = []
    if sample.mean_acceptance_length is not None:
        parts.append(f"Mean acceptance length: {sample.mean_acceptance_length:.2f}")
    if sample.accepted_throughput is not None:
        parts.append(f"Accepted throughput: {sample.accepted_throughput:.2f} tokens/s")
    if sample.drafted_throughput is not None:
        parts.append(f"Drafted throughput: {sample.drafted_throughput:.2f} tokens/s")
    if sample.accepted_tokens is not None:
        parts.append(f"Accepted: {sample.accepted_tokens} tokens")
    if sample.drafted_tokens is not None:
        parts.append(f"Drafted: {sample.drafted_tokens} tokens")
    if sample.per_position:
        rates = ", ".join(f"{r:.3f}" for r in sample.per_position)
        parts.append(f"Per-position acceptance rate: {rates}")
    if sample.draft_acceptance_rate_pct is not None:
        parts.append(f"Avg Draft acceptance rate: {sample.draft_acceptance_rate_pct:.1f}%")
    parts.extend(f"{label}: {text}" for label, text in sample.extra)
    return "SpecDecoding metrics: " + ", ".join(parts)
