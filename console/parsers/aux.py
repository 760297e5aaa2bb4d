"""The auxiliary-layer line: which target layers feed the drafter's hidden states.

`Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)` (the V1 model runner), or
the V2 runner's `Using Eagle3 auxiliary layers from config: (...)` and, when the drafter's config
named no layer ids, `... from model: (...)`. With PR #40727 these are `target_layer_ids + 1`, so
the line is the runtime proof that the offset ran.
"""

from __future__ import annotations

import re

_AUX = re.compile(
    r"Using (?:\w+ )?auxiliary layers from (?:(?:speculative |draft |model )?config|model):\s*"
    r"[(\[](?P<ids>[\d,\s]{0,10000})[)\]]"
)


def parse_aux_layers(message: str) -> tuple[int, ...] | None:
    """The layer ids of an auxiliary-layer line, in order; None for any other line."""
    if "auxiliary layers" not in message:
        return None
    m = _AUX.search(message)
    if m is None:
        return None
    parts = m["ids"].replace(",", " ").split()
    if any(len(part) > 9 for part in parts):
        return None  # not layer ids (and int() refuses very long digit strings)
    return tuple(int(part) for part in parts)
