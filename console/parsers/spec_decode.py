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

from dataclasses import dataclass, replace
from typing import Any

from vllm_console.console.parsers.labelled import (
    Fields,
    Writers,
    first,
    integer,
    number,
    percent,
    read_labelled,
    split_labelled,
    write_labelled,
)

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


def _fields(v0: bool) -> Fields:
    """Label -> how to read it into which field: both V1 wordings and V0's (whose bare rates
    are fractions)."""
    return {
        "mean acceptance length": ("mean_acceptance_length", first(number)),
        "accepted throughput": ("accepted_throughput", first(number)),
        "drafted throughput": ("drafted_throughput", first(number)),
        "accepted": ("accepted_tokens", first(integer)),
        "drafted": ("drafted_tokens", first(integer)),
        "number of accepted tokens": ("accepted_tokens", first(integer)),
        "number of draft tokens": ("drafted_tokens", first(integer)),
        "per-position acceptance rate": ("per_position", _per_position),
        "avg draft acceptance rate": ("draft_acceptance_rate_pct", lambda v: percent(v[0], v0)),
        "draft acceptance rate": ("draft_acceptance_rate_pct", lambda v: percent(v[0], v0)),
    }


_FIELDS = {v0: _fields(v0) for v0 in (False, True)}

# How vLLM's current line writes each field, in its order.
_WRITERS: Writers = (
    ("mean_acceptance_length", "Mean acceptance length: {:.2f}"),
    ("accepted_throughput", "Accepted throughput: {:.2f} tokens/s"),
    ("drafted_throughput", "Drafted throughput: {:.2f} tokens/s"),
    ("accepted_tokens", "Accepted: {} tokens"),
    ("drafted_tokens", "Drafted: {} tokens"),
    ("per_position", lambda s: ("Per-position acceptance rate: "
                                + ", ".join(f"{r:.3f}" for r in s.per_position))
     if s.per_position else None),
    ("draft_acceptance_rate_pct", "Avg Draft acceptance rate: {:.1f}%"),
)


def parse_spec_decode(message: str) -> SpecDecodeSample | None:
    """Parse a SpecDecoding (or V0 `Speculative metrics`) line; None for any other line."""
    for marker in _MARKERS:
        idx = message.find(marker)
        if idx >= 0:
            break
    else:
        return None
    values: dict[str, Any] = {}
    fields = _FIELDS[marker.startswith("Speculative")]
    extra = read_labelled(split_labelled(message[idx + len(marker) :]), fields, values)
    return replace(SpecDecodeSample(extra=extra), **values)


def format_spec_decode(sample: SpecDecodeSample) -> str:
    """Write a sample as vLLM's current SpecDecoding line would (fields that are None left out)."""
    return "SpecDecoding metrics: " + ", ".join(write_labelled(sample, _WRITERS))
