"""The current run of `vllm serve`, as its log tells it.

Each line goes through the parsers once (`parse_line`, `classify`); what it says lands in
`RunInfo` (engine config, version, aux layers, errors, load), the spec-decode tracker and the
start-up tracker. Where a run starts is the vocabulary's rule (`run_mark`, `starts_run`: the
host's follower and the chain's runtime link use the same): at the console's restart marker,
the version banner, `non-default args` or the engine start line, whichever comes first of a
run; a mark that goes back in that order begins the next run, and everything is reset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Flag, auto
from typing import Any

from vllm_console.console.hostside.vocabulary import (
    RESTART_MARKER,
    RunMark,
    run_mark,
    starts_run,
)
from vllm_console.console.parsers.classifier import (
    LEVEL_ANCHORS,
    LOGO_UTF8,
    MESSAGE_ANCHORS,
    LineEvent,
    LineKind,
    classify,
)
from vllm_console.console.parsers.engine import EngineConfig, NonDefaultArgs, SpeculativeSettings
from vllm_console.console.parsers.errors import ErrorEvent, ErrorKind
from vllm_console.console.parsers.prefix import parse_line, strip_ansi_block
from vllm_console.console.parsers.sieve import Sieve
from vllm_console.console.parsers.spec_decode import SpecDecodeSample
from vllm_console.console.parsers.startup import StartupEvent, StartupPhase
from vllm_console.console.parsers.throughput import ThroughputSample
from vllm_console.console.telemetry.logclock import LogClock
from vllm_console.console.telemetry.spec_decode import SpecDecodeTracker, SpecSource
from vllm_console.console.telemetry.startup import STALL_AFTER_S, StartupTracker

MAX_ERRORS = 50
_NOT_KEPT = frozenset({ErrorKind.TRACEBACK_FRAME, ErrorKind.TRACEBACK_CHAIN})


# Markers of the lines a busy server writes per request: uvicorn's access log, vLLM's request
# log. Matched on the raw line, before any parsing.
_PER_REQUEST = (' HTTP/1.1" ', ' HTTP/1.0" ', ' HTTP/2" ', "] Received request ",
                "] Added request ", "] Finished request ", "] Aborted request ",
                "] Generated response ")


def _per_request(text: str) -> bool:
    return any(marker in text for marker in _PER_REQUEST)


def _throughput(text: str) -> bool:
    """The periodic load line (SpecDecoding lines speak of throughput too: not those)."""
    return "Avg prompt throughput:" in text and "metrics:" not in text


# Of `it/s]` and `s/it]`, a tqdm bar that moved (see `RunLog.feed`); starting with `/` rather
# than a common letter, they cost the sieve's search less.
_PROGRESS = ("/s]", "/it]")
# A line that holds none of these, nor a control character, is OTHER for `classify` whatever
# its level, and no progress bar: it changes nothing, and `feed_texts` skips it unparsed (as it
# does per-request lines). Every throughput line holds `Avg ` (of MESSAGE_ANCHORS).
_LINES = Sieve((*MESSAGE_ANCHORS, *LEVEL_ANCHORS, *_PROGRESS, RESTART_MARKER), (LOGO_UTF8,))


def _uncoloured(texts: list[str]) -> list[str]:
    """The texts as `strip_ansi` makes them when colour codes are all they hold (a serve log
    read raw), for the sieve to see what the parsers will see; else as they are. The
    throughput marker, which `feed_texts` reads in the raw text, stays whole: an SGR code ends
    in `[0-9;m`, and the marker starts with none of them."""
    joined = "\n".join(texts)
    if "\x1b" not in joined:
        return texts
    block = strip_ansi_block(joined)
    lines = block.split("\n") if block is not None else texts
    return lines if len(lines) == len(texts) else texts


class Changed(Flag):
    """What a batch of lines changed."""

    NOTHING = 0
    RUN = auto()
    NEW_RUN = auto()
    SPEC = auto()
    STARTUP = auto()
    LOAD = auto()


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the log says about the current run. `started_at` is host-clock epoch seconds."""

    started_at: float | None = None
    version: str | None = None
    model: str | None = None
    engine: EngineConfig | None = None
    args: NonDefaultArgs | None = None
    aux_layers: tuple[int, ...] | None = None
    throughput: ThroughputSample | None = None
    errors: tuple[ErrorEvent, ...] = ()
    stopping: str | None = None
    """The line the server wrote when it was asked to stop (`parsers.shutdown`): its engine
    goes away on purpose from here on."""

    @property
    def speculative(self) -> SpeculativeSettings | None:
        """The engine's speculative config, else the one the API server was given."""
        if self.engine is not None:
            return self.engine.speculative
        return self.args.speculative if self.args is not None else None

    def engine_json(self) -> dict[str, Any]:
        """The `engine` object of `status --json`."""
        spec = self.speculative
        return {"version": self.version, "model": self.model,
                "speculative_config": spec.to_json() if spec is not None else None}


class RunLog:
    """Feeds log lines to the parsers and keeps the current run's facts and trackers."""

    def __init__(self, clock: LogClock | None = None, *,
                 stall_after_s: float = STALL_AFTER_S) -> None:
        self.clock = clock or LogClock()
        self.spec = SpecDecodeTracker()
        self.startup = StartupTracker(stall_after_s)
        self.info = RunInfo()
        self._mark: RunMark | None = None
        self._last_at: float | None = None
        self.throughput_at: float | None = None

    def feed_texts(self, texts: Iterable[str], arrival: float | None = None,
                   keys: list[bytes] | None = None
                   ) -> tuple[list[tuple[int, LineEvent]], Changed]:
        """Parse and classify lines (escapes already stripped or not); `arrival` is the host
        clock when they came in live (None while replaying: the log's own stamps count);
        `keys`: the texts' `batch_keys` when the caller has them (`LogBatch.keys`).

        Returns the notable lines (anything but OTHER: errors, warnings, spec decode, ...)
        with their index, and what changed. Per-request lines (access log, request log) are
        skipped unparsed: they are the bulk of a flood, never evidence, and their text is the
        client's (a prompt could spell a SpecDecoding line). So are the lines the sieve proves
        ordinary (OTHER, and no progress bar): the rest of a DEBUG flood."""
        notable: list[tuple[int, LineEvent]] = []
        changed = Changed.NOTHING
        texts = list(texts)
        uncoloured = _uncoloured(texts)
        # every throughput line among them
        picked = _LINES.select(uncoloured, keys if uncoloured is texts else None)
        last_throughput = max((i for i in picked if _throughput(texts[i])), default=-1)
        for i in picked:
            text = texts[i]
            if _per_request(text) or (i < last_throughput and _throughput(text)):
                continue  # only the newest throughput line of a batch tells the load
            event = classify(parse_line(text))
            if event.kind is not LineKind.OTHER:
                notable.append((i, event))
            changed |= self.feed(event, arrival)
        return notable, changed

    def feed(self, event: LineEvent, arrival: float | None = None) -> Changed:
        """One classified line."""
        kind = event.kind
        text = event.line.text
        mark = run_mark(text)
        if mark is RunMark.RESTART:
            return self._run_boundary(mark, _restart_at(text) or self._at(event, arrival))
        changed = Changed.NOTHING
        if mark is not None:
            changed = self._run_boundary(mark, self._at(event, arrival))
        if kind is LineKind.OTHER or kind is LineKind.WARNING:
            if self.startup.started and not self.startup.ready and \
                    ("it/s]" in text or "s/it]" in text):  # a progress bar moved
                self.startup.progress(self._at(event, arrival))
            return changed
        at = self._at(event, arrival)
        payload = event.payload
        if kind is LineKind.ENGINE_START and isinstance(payload, EngineConfig):
            self.info = replace(self.info, engine=payload,
                                version=payload.version or self.info.version,
                                model=payload.model or self.info.model)
            self.spec.configure(payload.speculative, authoritative=True)
            return changed | Changed.RUN | Changed.SPEC | self._startup(
                StartupEvent(StartupPhase.ENGINE_START, detail=payload.version or ""), at)
        if kind is LineKind.NON_DEFAULT_ARGS and isinstance(payload, NonDefaultArgs):
            self.info = replace(self.info, args=payload, model=self.info.model or payload.model)
            self.spec.configure(payload.speculative, authoritative=False)
            return changed | Changed.RUN | Changed.SPEC
        if kind is LineKind.VERSION and payload is not None:
            version = getattr(payload, "version", None)
            model = getattr(payload, "model", None)
            self.info = replace(self.info, version=self.info.version or version,
                                model=self.info.model or model)
            return changed | Changed.RUN
        if kind is LineKind.AUX_LAYERS and isinstance(payload, tuple):
            self.info = replace(self.info, aux_layers=payload)
            return changed | Changed.RUN
        if kind is LineKind.SPEC_DECODE and isinstance(payload, SpecDecodeSample):
            return changed | (Changed.SPEC if self.spec.feed(payload, at, SpecSource.LOG)
                              else Changed.NOTHING)
        if kind is LineKind.THROUGHPUT and isinstance(payload, ThroughputSample):
            self.info = replace(self.info, throughput=payload)
            self.throughput_at = at
            return changed | Changed.LOAD
        if kind is LineKind.STARTUP and isinstance(payload, StartupEvent):
            return changed | self._startup(payload, at)
        if kind is LineKind.SHUTDOWN and isinstance(payload, str):
            if self.info.stopping is None:
                self.info = replace(self.info, stopping=payload)
                changed |= Changed.RUN
            return changed
        if kind is LineKind.ERROR and isinstance(payload, ErrorEvent):
            if payload.kind not in _NOT_KEPT:
                self.info = replace(self.info, errors=(*self.info.errors, payload)[-MAX_ERRORS:])
                changed |= Changed.RUN
            before_engine = self._mark is not None and self._mark < RunMark.ENGINE
            if self.startup.fail(payload, at, before_engine=before_engine):
                changed |= Changed.STARTUP
        return changed

    def _startup(self, event: StartupEvent, at: float) -> Changed:
        return Changed.STARTUP if self.startup.feed(event, at) else Changed.NOTHING

    def _run_boundary(self, mark: RunMark, at: float) -> Changed:
        """A run mark: it begins a new run or goes on with this one (`starts_run`)."""
        new = starts_run(self._mark, mark)
        self._mark = mark
        if not new:
            return Changed.NOTHING
        self.info = RunInfo(started_at=at)
        self.spec.reset()
        self.startup.reset(at)
        return Changed.NEW_RUN | Changed.RUN | Changed.SPEC | Changed.STARTUP

    def _at(self, event: LineEvent, arrival: float | None) -> float:
        stamped = self.clock.epoch(event.line.timestamp)
        at = stamped if stamped is not None else (
            arrival if arrival is not None else self._last_at)
        if at is None:
            at = self.clock.now()
        self._last_at = at
        return at


def _restart_at(text: str) -> float | None:
    """The time a restart marker gives (`... restart at 2026-05-14T10:05:00+00:00 by ...`)."""
    word = text.partition(RESTART_MARKER)[2].split(maxsplit=1)
    try:
        return datetime.fromisoformat(word[0]).timestamp() if word else None
    except ValueError:
        return None
