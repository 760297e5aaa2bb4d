"""One call per log line: what the line is, for highlighting and for routing to the panels.

This runs on every line of a busy server's log, so each parser is reached only through a cheap
substring check; and a message that holds none of `MESSAGE_ANCHORS` (one substring that every
line a parser accepts must hold), with a level that does not count, is `OTHER` at once: the
`Sieve` answers that from a cache for a flood's lines, which differ mostly in their numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import NamedTuple

from vllm_console.console.hostside.vocabulary import ARGS_LINE, ENGINE_START, READY_LINE
from vllm_console.console.parsers.aux import parse_aux_layers
from vllm_console.console.parsers.engine import (
    EngineConfig,
    NonDefaultArgs,
    VersionBanner,
    parse_engine_start,
    parse_non_default_args,
    parse_version_banner,
)
from vllm_console.console.parsers.errors import _CHAIN, ErrorEvent, parse_error
from vllm_console.console.parsers.prefix import LogLine, parse_line
from vllm_console.console.parsers.shutdown import GATES as SHUTDOWN_GATES
from vllm_console.console.parsers.shutdown import parse_shutdown
from vllm_console.console.parsers.sieve import Sieve
from vllm_console.console.parsers.spec_decode import SpecDecodeSample, parse_spec_decode
from vllm_console.console.parsers.startup import StartupEvent, parse_startup
from vllm_console.console.parsers.throughput import ThroughputSample, parse_throughput


class LineKind(StrEnum):
    """What a log line is."""

    ENGINE_START = "engine-start"
    NON_DEFAULT_ARGS = "non-default-args"
    VERSION = "version"
    AUX_LAYERS = "aux-layers"
    SPEC_DECODE = "spec-decode"
    THROUGHPUT = "throughput"
    STARTUP = "startup"
    SHUTDOWN = "shutdown"
    ERROR = "error"
    WARNING = "warning"
    OTHER = "other"


Payload = (
    EngineConfig
    | NonDefaultArgs
    | VersionBanner
    | tuple[int, ...]
    | SpecDecodeSample
    | ThroughputSample
    | StartupEvent
    | ErrorEvent
    | str
    | None
)


class LineEvent(NamedTuple):
    """A classified line and what its parser made of it.

    Payload by kind: ENGINE_START `EngineConfig`, NON_DEFAULT_ARGS `NonDefaultArgs`, VERSION
    `VersionBanner`, AUX_LAYERS `tuple[int, ...]`, SPEC_DECODE `SpecDecodeSample`, THROUGHPUT
    `ThroughputSample`, STARTUP `StartupEvent`, SHUTDOWN the message (`parse_shutdown`), ERROR
    `ErrorEvent`; WARNING and OTHER None.
    """

    # A NamedTuple, like LogLine, because one is built per line: immutable and cheap.

    kind: LineKind
    line: LogLine
    payload: Payload = None


def classify(line: LogLine) -> LineEvent:
    """Classify one parsed line. Never raises."""
    try:
        return _classify(line)
    except Exception:  # a parser bug must not stop the log view; the parsers' tests catch it
        return LineEvent(LineKind.OTHER, line)


def classify_text(raw: str | bytes) -> LineEvent:
    """`classify(parse_line(raw))` for one raw line."""
    return classify(parse_line(raw))


# For each way `_by_parsers` can find a message more than OTHER, whatever the line's level, one
# substring that such a message must hold (each parser's own test or pattern says which). Keep
# in step with the parsers; tests/parsers/test_parsers_fastpath.py compares both ways on any text.
MESSAGE_ANCHORS = (
    "LLM ",  # engine start (`... LLM engine (`), version banner (`vLLM ... server version`)
    "-default args:",  # `non-default args:`
    "Spec",  # `SpecDecoding metrics:`, `Speculative metrics:`
    "Avg ",  # throughput: `Avg prompt throughput`, `Avg generation throughput`
    "Using ",  # `Using ... auxiliary layers from ... config`
    "Starting ",  # start-up: `Starting to load model`, `Starting vLLM ... server`
    "Loading ",  # `Loading weights took`, `Loading safetensors checkpoint shards`, drafter
    "Model loading took",
    "KV cache ",  # `Available KV cache memory`, `GPU KV cache size`
    "Graph capturing finished",
    ") took",  # `init engine (...) took N s`
    READY_LINE,
    *SHUTDOWN_GATES,  # a server asked to stop
    "DFlash",  # DFlash's refusals
    "EngineCore failed to start",
    "Engine core initialization failed",
    "Traceback (most recent call last)",  # the start of a traceback's lines
    "Process ",  # `Process EngineCore:`, multiprocessing's line before a child's traceback
    "Value error, ",  # the reason under a pydantic ValidationError (errors._PYDANTIC_DETAIL)
    "Assertion failed, ",
    'File "',
    *_CHAIN,
    # An exception line's part before its first colon ends with one of these (and EngineDeadError)
    "Error",
    "Exception",
    "Exit",
    "Interrupt",
)
# The ASCII logo's block elements (U+2580..U+259F) in UTF-8: the logo's version banner.
LOGO_UTF8 = rb"\xe2\x96[\x80-\x9f]"
# Levels that make a line more than OTHER (parse_line's names) and how a line spells them.
NOTABLE_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
LEVEL_ANCHORS = ("WARN", "ERROR", "CRITICAL", "FATAL")
_MESSAGES = Sieve(MESSAGE_ANCHORS, (LOGO_UTF8,))


def _classify(line: LogLine) -> LineEvent:
    if line.level not in NOTABLE_LEVELS and not _MESSAGES.maybe(line.message):
        # No parser can accept it. (`LineEvent(LineKind.OTHER, line)`, built without the
        # NamedTuple's Python-level `__new__`: the same object at a third of the cost.)
        return tuple.__new__(LineEvent, (LineKind.OTHER, line, None))
    return _by_parsers(line)


# Each parser is tried only on a message holding one of its gates (a substring every line it
# accepts holds), in this order; start-up lines have no such substring ("" is in every message).
_PARSERS: tuple[tuple[tuple[str, ...], Callable[[str], Payload], LineKind], ...] = (
    ((ENGINE_START,), parse_engine_start, LineKind.ENGINE_START),
    ((ARGS_LINE,), parse_non_default_args, LineKind.NON_DEFAULT_ARGS),
    (("metrics:",), parse_spec_decode, LineKind.SPEC_DECODE),
    (("throughput:",), parse_throughput, LineKind.THROUGHPUT),
    (("auxiliary layers",), parse_aux_layers, LineKind.AUX_LAYERS),
    (("version", "model "), parse_version_banner, LineKind.VERSION),
    (SHUTDOWN_GATES, parse_shutdown, LineKind.SHUTDOWN),
    (("",), parse_startup, LineKind.STARTUP),
)


def _by_parsers(line: LogLine) -> LineEvent:
    """What the parsers make of the line (`_classify` without its shortcut)."""
    msg = line.message
    for gates, parse, kind in _PARSERS:
        for gate in gates:
            if gate in msg:
                payload = parse(msg)
                if payload is not None:
                    return LineEvent(kind, line, payload)
                break
    error = parse_error(msg, line.level)
    if error is not None:
        return LineEvent(LineKind.ERROR, line, error)
    if line.level == "WARNING":
        return LineEvent(LineKind.WARNING, line)
    return LineEvent(LineKind.OTHER, line)
