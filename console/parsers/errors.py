"""Failures in a vLLM log: engine start failures, tracebacks, and DFlash's own refusals.

vLLM prefixes every line of a traceback, so a traceback arrives as separate lines; per line,
`parse_error` says what each one is, and `group_tracebacks` puts a run of them back together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from vllm_console.console.parsers.prefix import LogLine


class ErrorKind(StrEnum):
    """What an error line is."""

    ENGINE_FAILED = "engine-failed"  # EngineCore failed to start.
    ENGINE_INIT_FAILED = "engine-init-failed"  # RuntimeError: Engine core initialization failed
    ENGINE_DEAD = "engine-dead"  # EngineDeadError
    PROCESS_DIED = "process-died"  # Process EngineCore: (multiprocessing, before its traceback)
    TRACEBACK = "traceback"  # Traceback (most recent call last):
    TRACEBACK_FRAME = "traceback-frame"  # File "...", line N, in f
    TRACEBACK_CHAIN = "traceback-chain"  # The above exception was the direct cause ...
    EXCEPTION = "exception"  # XyzError: message
    DFLASH_NEEDS_V2_RUNNER = "dflash-needs-v2-runner"
    DFLASH_MIXED_UNSUPPORTED = "dflash-mixed-unsupported"  # 0.25.x refusal
    DFLASH_MISSING_WINDOW = "dflash-missing-window"  # sliding attention without a window size
    DFLASH_LAYER_TYPES_LENGTH = "dflash-layer-types-length"  # PR #40898
    DFLASH_INVALID_LAYER_TYPE = "dflash-invalid-layer-type"  # PR #40898
    DFLASH_SLIDING_NEEDS_WINDOW = "dflash-sliding-needs-window"  # PR #40898
    LOGGED_ERROR = "logged-error"  # any other ERROR / CRITICAL line


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """One failure line: its kind, its text, and whether it is a DFlash-specific refusal."""

    kind: ErrorKind
    message: str
    dflash: bool = False
    exception_type: str | None = None


@dataclass(frozen=True, slots=True)
class Frame:
    """One `File "...", line N, in f` frame of a traceback."""

    file: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class Traceback:
    """A traceback put back together (chained ones as one, cause first).

    `exception_type`/`exception_message` are the final exception's; `root_cause` is the first
    exception in the chain (what "See root cause above" points at). `lines` are the messages.
    """

    frames: tuple[Frame, ...]
    exception_type: str | None
    exception_message: str
    root_cause: str | None
    lines: tuple[str, ...]
    dflash: bool


_DFLASH = (
    ("require the V2 model runner", ErrorKind.DFLASH_NEEDS_V2_RUNNER),
    ("does not yet support mixed sliding/full attention", ErrorKind.DFLASH_MIXED_UNSUPPORTED),
    ("sliding attention requires a window size", ErrorKind.DFLASH_MISSING_WINDOW),
    ("layer_types length", ErrorKind.DFLASH_LAYER_TYPES_LENGTH),
    ("Invalid DFlash layer_type", ErrorKind.DFLASH_INVALID_LAYER_TYPE),
    ("sliding_attention layers require sliding_window", ErrorKind.DFLASH_SLIDING_NEEDS_WINDOW),
)
_PYDANTIC_DETAIL = ("Value error, ", "Assertion failed, ")
_V1_REFUSES_MIXED = "does not support: mixed sliding/full dflash drafts"
_FRAME = re.compile(
    r'^\s*File "(?P<file>[^"]{0,4096})", line (?P<line>\d{1,9}), in (?P<fn>.{0,500})$'
)
# `XyzError: msg`, `pkg.mod.XyzError: msg`, or a bare `KeyboardInterrupt`.
_EXCEPTION = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w{0,100}\.){0,20}[A-Z]\w{0,100}"
    r"(?:Error|Exception|Exit|Interrupt))(?::\s?(?P<msg>.*))?$",
    re.DOTALL,
)
# multiprocessing's report that a child process's target raised: `Process EngineCore:` on its
# stderr, unprefixed since 0.31 (vLLM's prefix is only in its log format), then the traceback.
_PROCESS_DIED = re.compile(r"^Process [\w.\-]{1,100}:$")
_CHAIN = (
    "The above exception was the direct cause of the following exception",
    "During handling of the above exception, another exception occurred",
)


def parse_error(message: str, level: str | None = None) -> ErrorEvent | None:
    """What failure a line reports; None for a line that is not one.

    Pass the line's log `level` so that otherwise unknown ERROR/CRITICAL lines still count.
    """
    text = message.strip()
    if "DFlash" in text:
        for needle, kind in _DFLASH:
            if needle in text:
                return ErrorEvent(kind, text, True, _exception_type(text))
    if text.startswith(_PYDANTIC_DETAIL):
        # The reason of a pydantic ValidationError, on the line after it: vLLM 0.32 refuses a
        # config this way in the API server (`Value error, Model Runner V1 does not support:
        # mixed sliding/full dflash drafts [type=value_error, ...]`).
        kind = ErrorKind.DFLASH_NEEDS_V2_RUNNER if _V1_REFUSES_MIXED in text \
            else ErrorKind.EXCEPTION
        return ErrorEvent(kind, text, kind is not ErrorKind.EXCEPTION,
                          "ValueError" if text.startswith("Value error") else "AssertionError")
    if "EngineCore failed to start" in text:
        return ErrorEvent(ErrorKind.ENGINE_FAILED, text)
    if "Engine core initialization failed" in text:
        return ErrorEvent(ErrorKind.ENGINE_INIT_FAILED, text, exception_type=_exception_type(text))
    if "EngineDeadError" in text:
        return ErrorEvent(ErrorKind.ENGINE_DEAD, text, exception_type=_exception_type(text))
    if text.startswith("Traceback (most recent call last)"):
        return ErrorEvent(ErrorKind.TRACEBACK, text)
    if text.startswith("Process ") and _PROCESS_DIED.match(text) is not None:
        return ErrorEvent(ErrorKind.PROCESS_DIED, text)
    if text.startswith('File "') and _FRAME.match(text) is not None:
        return ErrorEvent(ErrorKind.TRACEBACK_FRAME, text)
    if text.startswith(_CHAIN):
        return ErrorEvent(ErrorKind.TRACEBACK_CHAIN, text)
    exc_type = _exception_type(text)
    if exc_type is not None:
        return ErrorEvent(ErrorKind.EXCEPTION, text, exception_type=exc_type)
    if level in ("ERROR", "CRITICAL"):
        return ErrorEvent(ErrorKind.LOGGED_ERROR, text)
    return None


def group_tracebacks(lines: Iterable[LogLine | str]) -> list[Traceback]:
    """Put the tracebacks in a run of log lines back together, in the order they started.

    Give `LogLine`s (tracebacks of different processes interleave; they are kept apart by the
    process tag) or bare messages. Lines outside a traceback are skipped. A traceback ends at
    its exception line unless a chaining line ("The above exception ...") follows.
    """
    builders: dict[tuple[str | None, int | None], _Builder] = {}
    started: list[_Builder] = []
    for line in lines:
        if isinstance(line, str):
            key: tuple[str | None, int | None] = (None, None)
            text = line
        else:
            key, text = (line.proc, line.pid), line.message
        text = text.rstrip()
        builder = builders.get(key)
        if builder is None or builder.done:
            builder = builders[key] = _Builder()
        if not builder.feed(text) and builder.done:
            builder = builders[key] = _Builder()  # the line may start the next traceback
            builder.feed(text)
        if builder.lines and not builder.listed:
            builder.listed = True
            started.append(builder)
    return [b.result() for b in started]


class _Builder:
    """One traceback (with its chained causes) of one process, line by line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.frames: list[Frame] = []
        self.exceptions: list[tuple[str, str]] = []
        self.closed = False  # the latest exception line has been seen
        self.done = False  # something else followed it: the traceback is over
        self.listed = False  # in group_tracebacks' result list

    def feed(self, text: str) -> bool:
        """Take a line; True when it belongs to this traceback."""
        stripped = text.strip()
        if self.done:
            return False
        if stripped.startswith("Traceback (most recent call last)"):
            if self.closed:  # a new traceback right after the last one ended
                self.done = True
                return False
            self.lines.append(text)
            return True
        if not self.lines:
            return False
        if stripped.startswith(_CHAIN):
            self.lines.append(text)
            self.closed = False
            return True
        if self.closed:
            self.done = self.done or bool(stripped)
            return False
        self.lines.append(text)
        frame = _FRAME.match(text)
        if frame is not None:
            self.frames.append(Frame(frame["file"], int(frame["line"]), frame["fn"].strip()))
        elif not text.startswith(" "):
            exc = _EXCEPTION.match(stripped)
            if exc is not None:
                self.exceptions.append((exc["type"], (exc["msg"] or "").strip()))
                self.closed = True
        return True

    def result(self) -> Traceback:
        exceptions = self.exceptions
        final_type, final_msg = exceptions[-1] if exceptions else (None, "")
        root = f"{exceptions[0][0]}: {exceptions[0][1]}".rstrip(": ") if exceptions else None
        return Traceback(
            frames=tuple(self.frames),
            exception_type=final_type,
            exception_message=final_msg,
            root_cause=root,
            lines=tuple(self.lines),
            dflash=any("DFlash" in line for line in self.lines),
        )


_EXCEPTION_SUFFIXES = ("Error", "Exception", "Exit", "Interrupt")


def _exception_type(text: str) -> str | None:
    # Cheap test first: the part before the first colon must end like an exception name.
    if not text.partition(":")[0].endswith(_EXCEPTION_SUFFIXES):
        return None
    m = _EXCEPTION.match(text)
    return m["type"] if m is not None else None
