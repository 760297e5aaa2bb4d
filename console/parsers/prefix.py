"""The prefix vLLM puts on every log line, and stripping terminal escapes.

Forms handled (after escapes are stripped):

    (EngineCore_DP0 pid=7) INFO 05-14 10:02:03 [core.py:123] message
    (APIServer pid=1) INFO:     Application startup complete.          uvicorn
    (EngineCore_DP0 pid=7) Loading safetensors checkpoint shards: 50%   tqdm, no level
    INFO 05-14 10:02:03 [...v1/engine/core.py:123] message              no process tag
    anything else                                                       unprefixed
"""

from __future__ import annotations

import re
from typing import NamedTuple

# SGR colour codes are by far the most common; the rest are stripped for safety: other CSI
# sequences, OSC (title, hyperlinks; an unterminated one loses only its introducer, not the
# rest of the line), two-byte ESC sequences, 8-bit C1 controls, and C0 controls except tab.
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_CONTROLS = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b\][^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x9d[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -~]?"
    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]"
)
_ANY_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_ASCII_CONTROLS = bytes([*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f])  # of _ANY_CONTROL

_LEVELS = "DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
# One match for the whole prefix, every part optional: `(PROC pid=N) ` (PROC may hold spaces,
# `VllmWorker rank=1`; Ray adds `, ip=...`), then `LEVEL MM-DD HH:MM:SS [file.py:LINE] `.
_PREFIX = re.compile(
    r"(?:\((?P<proc>[^()\n]{1,80}) pid=(?P<pid>\d{1,10})(?:,[^()]{0,80})?\) ?)?"
    rf"(?:(?P<level>{_LEVELS}) "
    r"(?:\d{4}-)?(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d{1,6})? "
    r"\[(?P<src>[^\]\n]{0,300}:\d{1,7})\] ?)?"
)
_UVICORN = re.compile(rf"(?P<level>{_LEVELS}):\s+")
# Python's logging prints WARNING; `WARN` and `FATAL` are aliases some wrappers use.
_LEVEL_NAMES = {"WARN": "WARNING", "FATAL": "CRITICAL"}


class LogLine(NamedTuple):
    """One log line taken apart.

    `raw` is the line as received; `text` the same without terminal escapes. `message` is what
    follows the prefix (the whole `text` when there is none). Parts the line lacks are None.
    """

    # A NamedTuple rather than a frozen dataclass: one is built per log line, at up to ~100k
    # lines/s, and a frozen dataclass's __init__ costs five times as much. Still immutable.

    raw: str
    text: str
    proc: str | None = None
    pid: int | None = None
    level: str | None = None
    timestamp: str | None = None
    source: str | None = None
    message: str = ""


def strip_ansi(text: str) -> str:
    """Remove colour codes and any other terminal control sequence or control character."""
    if "\x1b" in text:
        text = _SGR.sub("", text)
    if text.isascii():
        # Deleting the control characters in C and comparing lengths is twice as fast as
        # isprintable(), and exact (an ASCII text has no C1 control).
        if len(text.encode().translate(None, _ASCII_CONTROLS)) == len(text):
            return text
    # isprintable() is a fast C check; it is also False for some harmless characters (tab,
    # zero-width space), which then just take the slower regex path.
    elif text.isprintable() or _ANY_CONTROL.search(text) is None:
        return text
    return _CONTROLS.sub("", text)


# What `strip_ansi` removes, but for `\n` (the line ends of a block) and `\x1b` (SGR codes are
# removed before the check; any other escape remains and fails it): one `in` (memchr) each.
_C0_BUT_LF = tuple(chr(c) for c in (*range(0x00, 0x0a), *range(0x0b, 0x20), 0x7f) if c != 0x09)
_C0_BUT_LF_BYTES = "".join(_C0_BUT_LF).encode()
_C1_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")  # U+0080..U+009F as UTF-8


def strip_ansi_block(block: str) -> str | None:
    """`strip_ansi` on every line of a `\\n`-separated block, in a few passes over the whole
    block, when its only control characters are the line feeds and SGR colour codes (all
    vLLM writes: `\\x1b[1;36m(APIServer pid=1)\\x1b[0;0m`). None otherwise: strip line by line.
    (An SGR code holds no line feed, so removing them from the block removes them from each
    line; with no other control character left, that is all `strip_ansi` does to a line.)
    """
    if "\x1b" in block:
        block = _SGR.sub("", block)
    if block.isascii():
        if any(c in block for c in _C0_BUT_LF):
            return None
    else:
        data = block.encode("utf-8", "surrogatepass")
        if len(data.translate(None, _C0_BUT_LF_BYTES)) != len(data) or _C1_UTF8.search(data):
            return None
    return block


# Whole prefixes seen lately (up to and including `] `), with what `_PREFIX` made of them. In a
# flood most lines share theirs with many others (same process, level, second and source line).
_PREFIXES: dict[str, tuple[str | None, int | None, str, str, str, int]] = {}
_MAX_PREFIXES = 4096
_new = tuple.__new__


def parse_line(raw: str | bytes) -> LogLine:
    """Take one line (no line ending) apart into its prefix fields and message. Never raises.

    A line that starts with a prefix seen before gets that prefix's fields from a cache. Exact:
    the prefix is cached only when `_PREFIX` matched the whole of it with the level part, which
    ends with `] `; everything the pattern reads to get there lies inside it (the process tag
    cannot pass its `)`, nor the source its `]`), so on any text that starts with it the
    pattern takes the same path. The first `] ` of a line finds the candidate.
    """
    if not isinstance(raw, str):
        raw = bytes(raw).decode("utf-8", errors="replace")
    text = strip_ansi(raw)
    close = text.find("] ")
    if close > 0:
        known = _PREFIXES.get(text[:close + 2])
        if known is not None:
            proc, pid, level, ts, src, end = known
            # `LogLine(...)` without the NamedTuple's Python-level `__new__` (which costs twice
            # the rest of a cached parse): the same object.
            return _new(LogLine, (raw, text, proc, pid, level, ts, src, text[end:]))
    m = _PREFIX.match(text)
    assert m is not None  # every part of the pattern is optional
    proc, pid_text, level, ts, src = m.groups()
    pid = int(pid_text) if pid_text is not None else None
    end = m.end()
    if level is None:
        u = _UVICORN.match(text, end)
        if u is not None:
            level, end = u[1], u.end()
    elif end == close + 2:
        if len(_PREFIXES) >= _MAX_PREFIXES:
            _PREFIXES.clear()
        _PREFIXES[text[:end]] = (proc, pid, _LEVEL_NAMES.get(level, level), ts, src, end)
    if level is not None and level in _LEVEL_NAMES:
        level = _LEVEL_NAMES[level]
    return _new(LogLine, (raw, text, proc, pid, level, ts, src, text[end:] if end else text))
