"""The current run of the serve log, as the runtime-activation link reads it: the lines the
log probe brings back (from a little before the last run mark, plus the log's tail), read into
one immutable `CurrentRun` (engine line, aux layers, refusals, failures, trace lines, ready).

The current run begins where the console's telemetry says it does (one rule,
`console.hostside.vocabulary.current_run_start`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vllm_console.checks.profile import Refusal, RuntimeActivationSpec
from vllm_console.checks.trace import TRACE_TAG, TraceEvent, parse_trace_line
from vllm_console.console.hostside.vocabulary import RunMark, current_run_start, run_mark
from vllm_console.console.hostside.watchdog import WATCHDOG_MARK, paths_in
from vllm_console.console.parsers.aux import parse_aux_layers
from vllm_console.console.parsers.classifier import classify
from vllm_console.console.parsers.engine import EngineConfig, NonDefaultArgs, VersionBanner
from vllm_console.console.parsers.errors import ErrorKind, parse_error
from vllm_console.console.parsers.prefix import LogLine, parse_line
from vllm_console.console.parsers.spec_decode import parse_spec_decode

WATCHDOG_LINE = WATCHDOG_MARK.decode()
"""What the log probe also brings back: vLLM's watchdog naming a dump it wrote."""

TAIL_BYTES = 1 << 20
"""How much of the log's end is searched past start-up (a crash on the first request, the
latest acceptance): vLLM writes ~1 KB every 10 s when idle, more under traffic."""


# How far before the last run mark the probe reads: the same run's earlier marks (restart
# marker, banner, arguments) and lines (a trace's `missing` events from the API server) lie
# within a few KB of its engine line, even at DEBUG level.
LOOKBACK = 1024 * 1024


@dataclass(frozen=True)
class CurrentRun:
    """What the current run's lines say."""

    started: bool = False
    """A run mark (restart marker, banner, arguments, engine line) begins the run."""
    start_offset: int | None = None
    engine_line: str | None = None
    engine_draft: str | None = None
    version: str | None = None
    aux: tuple[int, ...] | None = None
    aux_line: str | None = None
    refusals: tuple[tuple[Refusal, str], ...] = ()
    failures: tuple[str, ...] = ()
    exceptions: tuple[str, ...] = ()
    trace: tuple[TraceEvent, ...] = ()
    trace_lines: tuple[str, ...] = ()
    ready: bool = False
    marker: str | None = None
    """A restart's marker line that starts the run, when there is one."""
    hook_errors: tuple[str, ...] = ()
    """The trace hook's own `hook error:` lines (not trace events)."""
    engine_method: str | None = None
    """The speculative method the engine start line names."""
    engine_tokens: int | None = None
    asked: Mapping[str, Any] = field(default_factory=dict)
    """`non-default args`, as the API server logged them."""
    loaded: tuple[str, ...] = ()
    """Lines that show the drafter built or loaded (the profile's `loaded`)."""
    died: tuple[str, ...] = ()
    """Failures and exceptions after start-up (an engine that died on a request)."""
    acceptance: float | None = None
    """The latest `SpecDecoding metrics` mean acceptance length."""
    drafted: int = 0
    """Draft tokens in the `SpecDecoding metrics` lines seen past start-up."""
    watchdog_dumps: tuple[str, ...] = ()
    """The dump files this run's `[Watchdog]Dumped stack to PATH` lines name (vLLM 0.33+;
    PATH is the server's own: its container's, when it runs in one)."""

    @property
    def traced(self) -> bool:
        """The run was relaunched by a traced restart (its marker says `trace=on`)."""
        return self.marker is not None and self.marker.rstrip().endswith("trace=on")


def read_run(lines: Sequence[Sequence[Any]], spec: RuntimeActivationSpec,
             tail: Sequence[Sequence[Any]] = ()) -> CurrentRun:
    """Sort the current run's lines into what the link needs (without a run mark, the lines
    are a log's tail: read, but `started` is False). `tail`: the lines past start-up."""
    run = _read_run(lines, spec)
    if not run.started:
        return run
    run = replace(run, watchdog_dumps=_watchdog_dumps(run, [*lines, *tail]))
    return _read_tail(run, tail, spec) if tail else run


def _watchdog_dumps(run: CurrentRun, lines: Sequence[Sequence[Any]]) -> tuple[str, ...]:
    start = run.start_offset or 0
    found: list[str] = []
    for offset, raw in lines:
        if isinstance(offset, int) and offset >= start and WATCHDOG_LINE in str(raw):
            found += paths_in(str(raw).encode("utf-8", "replace"))
    return tuple(dict.fromkeys(found))


def _read_tail(run: CurrentRun, tail: Sequence[Sequence[Any]],
               spec: RuntimeActivationSpec) -> CurrentRun:
    died: list[str] = []
    acceptance, drafted = None, 0
    start = run.start_offset or 0
    for offset, raw in tail:
        if not isinstance(offset, int) or offset < start:
            continue
        line = parse_line(str(raw))
        message = line.message
        sample = parse_spec_decode(message)
        if sample is not None:
            acceptance = sample.mean_acceptance_length if \
                sample.mean_acceptance_length is not None else acceptance
            drafted += sample.drafted_tokens or 0
            continue
        if _broke(line, spec):
            died.append(message.strip())
    return replace(run, died=tuple(dict.fromkeys([*run.died, *died])), acceptance=acceptance,
                   drafted=drafted)


def _broke(line: LogLine, spec: RuntimeActivationSpec) -> bool:
    """A line past start-up that says the engine broke: a failure marker (`EngineDeadError`),
    or an exception the engine's own processes logged as an error (a request the API server
    refused, a client's 404, is not the engine breaking)."""
    if any(f in line.text for f in spec.failures):
        return True
    if line.proc is None or line.proc.startswith("APIServer") or \
            line.level not in ("ERROR", "CRITICAL"):
        return False
    error = parse_error(line.message, line.level)
    return error is not None and error.kind is ErrorKind.EXCEPTION


def _read_run(lines: Sequence[Sequence[Any]], spec: RuntimeActivationSpec) -> CurrentRun:
    parsed = [(offset, classify(parse_line(str(raw)))) for offset, raw in lines]
    first = current_run_start(run_mark(event.line.text) for _offset, event in parsed)
    patterns = [(r, re.compile(r.pattern)) for r in spec.refusals]
    engine_line = engine_draft = version = aux_line = marker = None
    aux: tuple[int, ...] | None = None
    refusals: list[tuple[Refusal, str]] = []
    failures: list[str] = []
    exceptions: list[str] = []
    trace: list[TraceEvent] = []
    trace_lines: list[str] = []
    hook_errors: list[str] = []
    loaded: list[str] = []
    asked: Mapping[str, Any] = {}
    engine_method: str | None = None
    engine_tokens: int | None = None
    died: list[str] = []
    ready = False
    for _offset, event in parsed[first or 0:]:
        line = event.line
        text, message = line.text, line.message
        mark = run_mark(text)
        if mark is RunMark.RESTART:
            marker = marker or text
            continue
        if mark is RunMark.BANNER and isinstance(event.payload, VersionBanner):
            version = version or event.payload.version
            continue
        if mark is RunMark.ENGINE and isinstance(event.payload, EngineConfig):
            if engine_line is None:
                engine_line, version = text, event.payload.version or version
                if event.payload.speculative is not None:
                    engine_draft = event.payload.speculative.model
                    engine_method = event.payload.speculative.method
                    engine_tokens = event.payload.speculative.num_spec_tokens
            continue
        if mark is RunMark.ARGS and isinstance(event.payload, NonDefaultArgs):
            asked = asked or event.payload.args
            continue
        if mark is not None:
            continue
        if any(m in text for m in spec.loaded):
            loaded.append(message.strip())
        if TRACE_TAG in text:
            trace_event = parse_trace_line(text)
            if trace_event is not None:
                trace.append(trace_event)
                trace_lines.append(message)
            elif "hook error:" in text:
                hook_errors.append(text[text.index(TRACE_TAG):].strip())
            continue
        found_aux = parse_aux_layers(message)
        if found_aux is not None:
            aux, aux_line = found_aux, message
        for refusal, pattern in patterns:
            if pattern.search(text):
                refusals.append((refusal, message.strip()))
                break
        error = parse_error(message, line.level)
        if ready:  # past start-up: the engine came up, then broke on a request
            if _broke(line, spec):
                died.append(message.strip())
            continue
        if any(f in text for f in spec.failures):
            failures.append(message.strip())
        if "[type=" in message and exceptions and "validation error" in exceptions[-1]:
            # pydantic's reason, on the line after its `ValidationError: N validation error
            # for X` (which says little by itself); parse_error calls it a ValueError too.
            exceptions[-1] += " — " + message.strip().split(" [type=", 1)[0]
        elif error is not None and error.kind is ErrorKind.EXCEPTION:
            exceptions.append(message.strip())
        if any(m in text for m in spec.ready_markers):
            ready = True
    return CurrentRun(first is not None, parsed[first][0] if first is not None else None,
                  engine_line, engine_draft, version, aux, aux_line, tuple(refusals),
                  tuple(failures), tuple(exceptions), tuple(trace), tuple(trace_lines), ready,
                  marker, tuple(hook_errors), engine_method, engine_tokens, asked,
                  tuple(loaded), tuple(dict.fromkeys(died)))
