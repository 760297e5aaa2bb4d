"""Reading a relaunch's log from the marker on: start-up phases, failure lines, trace lines."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from checks.trace import parse_trace_line
from console.parsers import (
    ErrorKind,
    StartupEvent,
    StartupPhase,
    parse_error,
    parse_line,
    parse_startup,
)
from console.restart.model import PhaseTiming

MAX_ERROR_LINES = 40
TAIL_LINES = 15
# Lines that only give a traceback its shape: the log keeps them, the report does not.
_CONTEXT = (ErrorKind.TRACEBACK, ErrorKind.TRACEBACK_FRAME, ErrorKind.TRACEBACK_CHAIN)


@dataclass
class _Seen:
    phase: StartupPhase
    at: float
    reported_s: float | None
    detail: str
    late: bool = False
    """Received in a burst after a lost link: when it was written is unknown."""


@dataclass
class StartupTracker:
    """Fed the log lines after the marker, in order; keeps what a restart reports."""

    t0: float = field(default_factory=time.monotonic)
    marker_seen: bool = False
    ready: bool = False
    trace_events: int = 0
    _phases: list[_Seen] = field(default_factory=list)
    _errors: list[str] = field(default_factory=list)
    _tail: list[str] = field(default_factory=list)

    def feed(self, raw: str, now: float | None = None, *, late: bool = False
             ) -> StartupEvent | None:
        """Take one line; returns the start-up event it reports when it opens a new phase or
        says how long one took. `late`: it was written while the link was down (its phase's
        timing is then unknown, never 0)."""
        now = time.monotonic() if now is None else now
        if not self.marker_seen and raw.startswith("[vllm-console] restart at"):
            self.marker_seen = True
            return None
        new: StartupEvent | None = None
        for piece in raw.split("\r"):  # tqdm redraws with a bare CR
            if not piece.strip():
                continue
            if "[vllm-console-trace]" in piece and parse_trace_line(piece) is not None:
                self.trace_events += 1
                continue
            line = parse_line(piece)
            self._tail = [*self._tail[-(TAIL_LINES - 1):], line.text]
            event = parse_startup(line.message)
            if event is not None:
                new = self._phase(event, now, late) or new
                continue
            error = parse_error(line.message, line.level)
            if error is not None and error.kind not in _CONTEXT:
                self._errors.append(line.text)
        return new

    def _phase(self, event: StartupEvent, now: float, late: bool = False
               ) -> StartupEvent | None:
        if event.phase is StartupPhase.READY:
            self.ready = True
        last = self._phases[-1] if self._phases else None
        if last is not None and last.phase is StartupPhase.LOADING_DRAFTER and \
                event.phase is StartupPhase.LOADING_WEIGHTS:
            # The drafter's own weights (its tqdm bar, its `Loading weights took`): that phase.
            event = replace(event, phase=StartupPhase.LOADING_DRAFTER)
        if last is not None and last.phase is event.phase:
            if event.seconds is not None:
                last.reported_s = event.seconds
                return event
            return None
        self._phases.append(_Seen(event.phase, now, event.seconds, event.detail, late))
        return event

    def phases(self, end: float | None = None) -> tuple[PhaseTiming, ...]:
        """The phases seen, each lasting until the next began (the last until `end`); None
        where a phase or the next one arrived late (after a lost link)."""
        out = []
        for i, seen in enumerate(self._phases):
            later = self._phases[i + 1] if i + 1 < len(self._phases) else None
            nxt = later.at if later is not None else end
            if seen.late or (later is not None and later.late):
                nxt = None
            out.append(PhaseTiming(
                phase=seen.phase, started_s=round(seen.at - self.t0, 3),
                duration_s=None if nxt is None else round(max(0.0, nxt - seen.at), 3),
                reported_s=seen.reported_s, detail=seen.detail))
        return tuple(out)

    def error_lines(self) -> tuple[str, ...]:
        """The failure lines seen: exceptions (the root cause first), DFlash refusals, engine
        failures, ERROR lines; traceback frames are left to the log. The last lines of the log
        when there were none."""
        if not self._errors:
            return tuple(self._tail)
        if len(self._errors) <= MAX_ERROR_LINES:
            return tuple(self._errors)
        half = MAX_ERROR_LINES // 2
        return (*self._errors[:half], f"... {len(self._errors) - 2 * half} more ...",
                *self._errors[-half:])
