"""Making host-controlled text safe and short enough for the screen.

Log lines and config values come from the host: they may carry terminal escapes, C0/C1
controls or bidi overrides. The parsers strip escapes; this module also neutralises what is
left (bidi controls reorder what the person reads) and cuts very long lines for display only.
"""

from __future__ import annotations

import re

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
