"""A cheap, exact pre-test for the per-line hot path: may a line hold any of some substrings?

A busy server at DEBUG level writes 100k lines/s and more, and nearly none of them is a line
that any parser reads: the parsers are all reached through substring tests (`classifier`), so
a line that holds none of a set of "anchor" substrings (one that each line a parser accepts
must hold) and no control character is ordinary, known without parsing it.

Asking for ~40 substrings costs ~1-2 µs a line, regex or `in` alike. But a flood's lines differ
mostly in their numbers. With its ASCII digits made `#` (no anchor holds a digit or a `#`, so
this changes no answer) and its control characters made NUL, a line becomes a key that repeats,
and the answer is cached under it: a translation and a dict lookup per line, both in C and, in
`Sieve.select`, over a whole batch at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import compress, repeat

# What strip_ansi removes, made NUL (so one search finds any): ASCII controls but tab, and DEL;
# C1 controls (U+0080..U+009F) are two bytes in UTF-8 and searched for as such.
_CONTROLS = bytes([*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f])
_KEY_ONE = bytes.maketrans(b"0123456789" + _CONTROLS, b"#" * 10 + b"\0" * len(_CONTROLS))
# For a batch joined with `\n`: the same, but `\n` kept to split it again.
_KEEP_LF = _CONTROLS.replace(b"\n", b"")
_KEY_BATCH = bytes.maketrans(b"0123456789" + _KEEP_LF, b"#" * 10 + b"\0" * len(_KEEP_LF))
_C1_UTF8 = rb"\xc2[\x80-\x9f]"
_NOT_IN_ANCHORS = re.compile(r"[0-9#\x00-\x1f\x7f-\x9f]")


def batch_keys(texts: Sequence[str]) -> list[bytes] | None:
    """Each text's key (its UTF-8, digits made `#` and controls NUL), from one translation of
    the joined batch; None when a text holds a line feed (the keys would not line up). Made
    once per follower batch (`LogBatch.keys`) for this sieve and the screen's `PlainLines`."""
    if not texts:
        return []
    keys = "\n".join(texts).encode("utf-8", "surrogatepass").translate(_KEY_BATCH).split(b"\n")
    return keys if len(keys) == len(texts) else None


class Sieve:
    """Says which lines may hold one of `anchors` (plain substrings, each free of digits, `#`
    and control characters) or a match of one of `patterns` (bytes regexes over the line's
    UTF-8, in which digits read as `#`), or a control character that `strip_ansi` removes.
    False means surely none of them; True, maybe. Answers are cached (at most `max_keys`, for
    lines up to `max_key_bytes`: a longer one is searched each time)."""

    def __init__(self, anchors: Iterable[str], patterns: Iterable[bytes] = (),
                 max_keys: int = 4096, max_key_bytes: int = 1024) -> None:
        words = sorted(set(anchors))
        for word in words:
            if not word or not word.isascii() or _NOT_IN_ANCHORS.search(word):
                raise ValueError(f"not an anchor: {word!r}")
        alternatives = [re.escape(w.encode()) for w in words] + [b"\0", _C1_UTF8, *patterns]
        self._search = re.compile(b"|".join(alternatives)).search
        self._verdicts: dict[bytes, bool] = {}
        self._max_keys = max_keys
        self._max_key_bytes = max_key_bytes

    def maybe(self, text: str) -> bool:
        """False when `text` surely holds no anchor, no pattern match, no control character."""
        key = text.encode("utf-8", "surrogatepass").translate(_KEY_ONE)
        verdict = self._verdicts.get(key)
        return self._decide(key) if verdict is None else verdict

    def select(self, texts: list[str], keys: list[bytes] | None = None) -> list[int]:
        """The indices of the `texts` for which `maybe` is True, in order. `keys`: their
        `batch_keys`, when the caller has them."""
        if not texts:
            return []
        split = batch_keys(texts) if keys is None else keys
        if split is None:  # a text holds a line feed: one by one
            return [i for i, text in enumerate(texts) if self.maybe(text)]
        verdicts = self._verdicts
        # Cached False is the common case, and skipped in C; unknown keys come through.
        candidates = compress(range(len(split)), map(verdicts.get, split, repeat(True)))
        return [i for i in candidates if verdicts.get(split[i]) or self._decide(split[i])]

    def _decide(self, key: bytes) -> bool:
        verdict = self._search(key) is not None
        if len(key) <= self._max_key_bytes:
            if len(self._verdicts) >= self._max_keys:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict
