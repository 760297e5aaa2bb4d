"""Reading `Label: value, Label: value` lists, the shape of vLLM's periodic stats lines.

A value may itself be a comma-separated list of numbers (`Per-position acceptance rate: 0.7,
0.4`): a comma-separated part without a `Label:` continues the previous value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

#: label key -> (field name, how to read the label's value parts into it; None: unreadable).
Fields = Mapping[str, tuple[str, Callable[[list[str]], Any]]]
#: (field name, `Label: {}` template for its value, or a function of the whole sample).
Writers = Sequence[tuple[str, "str | Callable[[Any], str | None]"]]

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


def read_labelled(pairs: Iterable[tuple[str, list[str]]], fields: Fields, values: dict[str, Any],
                  key: Callable[[str, list[str]], str | None] | None = None,
                  ) -> tuple[tuple[str, str], ...]:
    """Read each known label's value into `values` (the first readable value of a field wins);
    return the unknown labels as (label, text) pairs, the sample's `extra`. `key` turns a label
    into its key in `fields` (default `label_key`); None when it has dealt with the label itself."""
    extra: list[tuple[str, str]] = []
    for label, raw in pairs:
        k = label_key(label) if key is None else key(label, raw)
        if k is None:
            continue
        known = fields.get(k)
        if known is None:
            extra.append((label, ", ".join(raw).rstrip(".")))
            continue
        name, read = known
        value = read(raw)
        if value is not None and name not in values:
            values[name] = value
    return tuple(extra)


def write_labelled(sample: Any, writers: Writers) -> list[str]:
    """The `Label: value` parts for a sample's fields that are not None, in `writers`' order (a
    template is formatted with the field's value, a function gets the sample; None: left out),
    then the sample's `extra` (label, text) pairs."""
    parts: list[str] = []
    for name, write in writers:
        value = getattr(sample, name)
        if value is None:
            continue
        part = write.format(value) if isinstance(write, str) else write(sample)
        if part is not None:
            parts.append(part)
    parts.extend(f"{label}: {text}" for label, text in sample.extra)
    return parts


def first(read: Callable[[str], Any]) -> Callable[[list[str]], Any]:
    """A `Fields` reader of a label's first value part: `first(number)`."""
    return lambda raw: read(raw[0])


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
