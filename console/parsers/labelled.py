"""Reading `Label: value, Label: value` lists, the shape of vLLM's periodic stats lines.

A value may itself be a comma-separated list of numbers (`Per-position acceptance rate: 0.7,
0.4`): a comma-separated part without a `Label:` continues the previous value.
"""

from __future__ import annotations

import math
import re

_NUMBER = re.compile(r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,4})?|[-+]?nan|[-+]?inf)")


def split_labelled(body: str) -> list[tuple[str, list[str]]]:
    """`"A: 1, B: 2, 3"` -> `[("A", ["1"]), ("B", ["2", "3"])]`."""
    out: list[tuple[str, list[str]]] = []
    for part in body.split(","):
        label, sep, value = part.partition(":")
        if sep:
            out.append((label.strip(), [value.strip()]))
        elif out:
            out[-1][1].append(part.strip())
    return out


def label_key(label: str) -> str:
    """A label as a lookup key: lower case, single spaces (`"Avg  Draft"` -> `"avg draft"`)."""
    return " ".join(label.lower().split())


def number(text: str) -> float | None:
    """The number a value starts with (`"76.80 tokens/s"` -> 76.8); None when there is none."""
    m = _NUMBER.match(text)
    return float(m[1]) if m is not None else None


def integer(text: str) -> int | None:
    """The whole number a value starts with (`"768 tokens"` -> 768); None otherwise."""
    value = number(text)
    if value is None or not math.isfinite(value) or not value.is_integer():
        return None
    return int(value)


def percent(text: str, fraction_without_sign: bool = False) -> float | None:
    """A percentage: `"32.6%"` -> 32.6; a bare `"0.642"` -> 64.2 when `fraction_without_sign`."""
    value = number(text)
    if value is None:
        return None
    if "%" in text or not fraction_without_sign:
        return value
    return value * 100.0
