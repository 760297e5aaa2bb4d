"""The one rule for "does this command line match the `match` words".

Used on the host (the agent's serve tracker, discovery) and on the laptop (restart checks a
last-launch record against `match` with it).
"""

from __future__ import annotations

from collections.abc import Sequence


def matches(argv: Sequence[str], words: Sequence[str]) -> bool:
    """Whether each word is a substring of a distinct argv element, in order.

    An empty word list matches nothing: a blank `match` must never make every process of the
    user the server (a restart would stop it)."""
    if not words:
        return False
    at = 0
    for element in argv:
        if words[at] in element:
            at += 1
            if at == len(words):
                return True
    return False
