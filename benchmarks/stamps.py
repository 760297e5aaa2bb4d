"""Reading the flood writer's lines and their latencies: stdlib only, so that
`toolong_driver.py` (run with toolong's own interpreter) shares it with `common.py`."""

from __future__ import annotations

from collections.abc import Sequence


def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank) of `values`; -1 when there are none."""
    if not values:
        return -1.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return round(ordered[rank], 2)


def stamp_of(text: str) -> tuple[int, int] | None:
    """(line number, write time in ns) of a line the flood writer wrote, else None."""
    at = text.rfind(" t=")
    if at < 0:
        return None
    n_at = text.rfind("n=", 0, at)
    try:
        return int(text[n_at + 2:at]), int(text[at + 3:].split(None, 1)[0])
    except (ValueError, IndexError):
        return None
