"""Making host-controlled text safe and short enough for the screen.

Log lines and config values come from the host: they may carry terminal escapes, C0/C1
controls or bidi overrides. The parsers strip escapes; this module also neutralises what is
left (bidi controls reorder what the person reads) and cuts very long lines for display only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import compress, islice, repeat

from vllm_console.console.parsers.redact import may_hold_secret
from vllm_console.console.parsers.sieve import batch_keys

# Bidi embedding/override/isolate controls and marks: they let text lie about its order. And
# the Unicode line and paragraph separators, which `str.splitlines` (and so a screen row
# splitter) breaks at: one log line must never look like several.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
DISPLAY_MAX = 2000
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))


def plain_ascii(lines: list[str], max_len: int = DISPLAY_MAX) -> bool:
    """Whether every line is printable ASCII of at most `max_len` characters, so that
    `safe_text` would return each unchanged: one C-speed pass over the whole batch (deleting
    the printable bytes leaves nothing), ~5x cheaper than `str.isprintable`."""
    joined = "".join(lines)
    return (joined.isascii() and not joined.encode("ascii").translate(None, _PRINTABLE_ASCII)
            and max(map(len, lines), default=0) <= max_len)


# A line's key (`batch_keys`, the telemetry sieve's): its UTF-8, ASCII digits made `#` and
# controls NUL. No digit is a letter of a secret word, a separator after one or a control, and
# `#` is none of them either; a control and NUL are both not printable: so a line and its key
# get the same answer, and a flood's lines, which differ mostly in their numbers, share a few.
_PRINTABLE_ASCII_LF = _PRINTABLE_ASCII + b"\n"


class PlainLines:
    """Which lines of a batch the screen must change (a secret-looking word to redact, a
    control or a bidi character to make inert, more than `width` characters), the others being
    shown as they are; the answer is cached by the line's key (above).

    Per line of a flood, a dict lookup in C over the batch's keys (made once per batch, for
    the telemetry too), where testing the joined batch for secret words each time cost ~0.5 µs
    a line, most of a line's display work (`bench_perline`). Lines not seen before are decided
    together, as before. At most `max_keys` answers are kept (then forgotten at once), for
    keys up to `max_key_bytes`."""

    def __init__(self, max_keys: int = 4096, max_key_bytes: int = 1024) -> None:
        self._changes: dict[bytes, bool] = {}  # key -> the line is not plain (width aside)
        self._max_keys = max_keys
        self._max_key_bytes = max_key_bytes

    def changed(self, texts: Sequence[str], width: int = DISPLAY_MAX,
                keys: list[bytes] | None = None) -> list[int]:
        """The indices, ascending, of the `texts` that are not printable ASCII of at most
        `width` characters free of secret-looking words. `keys`: their `batch_keys`, when the
        caller has them (`LogBatch.keys`: made once for the telemetry and the screen)."""
        if not texts:
            return []
        if keys is None:
            keys = batch_keys(texts)
        if keys is None:  # a text holds a line feed, a control: no shortcut
            return list(range(len(texts)))
        changes = self._changes
        # Cached False (plain) is the common case, skipped in C; the rest come through.
        maybe = list(compress(range(len(keys)), map(changes.get, keys, repeat(True))))
        unknown = [keys[i] for i in maybe if keys[i] not in changes]
        decided = self._decide(unknown) if unknown else {}
        out = [i for i in maybe if decided.get(keys[i], changes.get(keys[i], True))]
        if max(map(len, texts)) > width:
            out = sorted({*out, *(i for i, text in enumerate(texts) if len(text) > width)})
        return out

    def _decide(self, keys: list[bytes]) -> dict[bytes, bool]:
        """Answers for keys not seen before: the batch of them at once when none needs a
        change (nearly always), else each on its own; remembered."""
        joined = b"\n".join(keys)
        if joined.isascii() and not joined.translate(None, _PRINTABLE_ASCII_LF) \
                and not may_hold_secret(joined.decode("ascii")):
            decided = dict.fromkeys(keys, False)
        else:
            decided = {key: not key.isascii() or bool(key.translate(None, _PRINTABLE_ASCII))
                       or may_hold_secret(key.decode("ascii")) for key in keys}
        changes = self._changes
        if len(changes) + len(decided) > self._max_keys:
            changes.clear()
        kept = ((k, v) for k, v in decided.items() if len(k) <= self._max_key_bytes)
        changes.update(islice(kept, self._max_keys))
        return decided


def _visible(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def safe_text(text: str, max_len: int = DISPLAY_MAX) -> str:
    """`text` with controls and bidi overrides made visible and inert, cut to max_len cells."""
    # Fast path, taken by nearly every log line: printable ASCII holds no control and no bidi.
    if len(text) <= max_len and text.isascii() and text.isprintable():
        return text
    if _CONTROL.search(text):
        text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if _BIDI.search(text):
        text = _BIDI.sub(_visible, text)
    if len(text) > max_len:
        text = f"{text[:max_len]}… [+{len(text) - max_len} chars]"
    return text
