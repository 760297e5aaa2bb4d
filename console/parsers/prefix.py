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
    # isprintable() is a fast C check; it is also False for some harmless characters (tab,
    # zero-width space), which then just take the slower regex path.
    if text.isprintable() or _ANY_CONTROL.search(text) is None:
        return text
    return _CONTROLS.sub("", text)


def parse_line(raw: str | bytes) -> LogLine:
    """Take one line (no line ending) apart into its prefix fields and message. Never raises."""
    if not isinstance(raw, str):
        raw = bytes(raw).decode("utf-8", errors="replace")
    text = strip_ansi(raw)
    m = _PREFIX.match(text)
    assert m is not None  # every part of the pattern is optional
    proc, pid_text, level, ts, src = m.groups()
    pid = int(pid_text) if pid_text is not None else None
    end = m.end()
    if level is None:
        u = _UVICORN.match(text, end)
        if u is not None:
            level, end = u[1], u.end()
    if level is not None and level in _LEVEL_NAMES:
        level = _LEVEL_NAMES[level]
    return LogLine(raw, text, proc, pid, level, ts, src, text[end:] if end else text)
