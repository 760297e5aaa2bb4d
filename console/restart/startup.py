"""Reading a relaunch's log from the marker on: start-up phases, failure lines, trace lines.

The phases are counted by the telemetry's rule (`PhaseSteps`), so the restart report and the
status bar name the same phases; what is the restart's own is here: the marker, the trace
lines, the failure lines and tail it reports, and timing phases that came late (after a lost
link) as unknown."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from vllm_console.checks.trace import parse_trace_line
from vllm_console.console.hostside.vocabulary import TRACE_TAG, RunMark, run_mark
from vllm_console.console.parsers import (
    ErrorKind,
    StartupEvent,
    StartupPhase,
    parse_error,
    parse_line,
    parse_startup,
)
from vllm_console.console.restart.model import PhaseTiming
from vllm_console.console.telemetry.startup import PhaseSteps

MAX_ERROR_LINES = 40
TAIL_LINES = 15
# Lines that only give a traceback its shape: the log keeps them, the report does not.
_CONTEXT = (ErrorKind.TRACEBACK, ErrorKind.TRACEBACK_FRAME, ErrorKind.TRACEBACK_CHAIN)


@dataclass
class RelaunchTracker:
    """Fed the log lines after the marker, in order; keeps what a restart reports."""

    t0: float = field(default_factory=time.monotonic)
    marker_seen: bool = False
    ready: bool = False
    trace_events: int = 0
    _steps: PhaseSteps = field(default_factory=PhaseSteps)
    _errors: list[str] = field(default_factory=list)
    _tail: list[str] = field(default_factory=list)

    def feed(self, raw: str, now: float | None = None, *, late: bool = False
             ) -> StartupEvent | None:
        """Take one line; returns the start-up event it reports when it opens a new phase or
        says how long one took. `late`: it was written while the link was down (its phase's
        timing is then unknown, never 0)."""
        now = time.monotonic() if now is None else now
        if not self.marker_seen and run_mark(raw) is RunMark.RESTART:
            self.marker_seen = True
            return None
        new: StartupEvent | None = None
        for piece in raw.split("\r"):  # tqdm redraws with a bare CR
            if not piece.strip():
                continue
            if TRACE_TAG in piece and parse_trace_line(piece) is not None:
                self.trace_events += 1
                continue
            line = parse_line(piece)
            self._tail = [*self._tail[-(TAIL_LINES - 1):], line.text]
            event = parse_startup(line.message)
            if event is not None:
                self.ready = self.ready or event.phase is StartupPhase.READY
                new = self._steps.add(event, now, late=late) or new
                continue
            error = parse_error(line.message, line.level)
            if error is not None and error.kind not in _CONTEXT:
                self._errors.append(line.text)
        return new

    def phases(self, end: float | None = None) -> tuple[PhaseTiming, ...]:
        """The phases seen, each lasting until the next began (the last until `end`); None
        where a phase or the next one arrived late (after a lost link)."""
        steps = self._steps.steps
        out = []
        for i, step in enumerate(steps):
            later = steps[i + 1] if i + 1 < len(steps) else None
            nxt = later.at if later is not None else end
            if step.late or (later is not None and later.late):
                nxt = None
            out.append(PhaseTiming(
                phase=step.phase, started_s=round(step.at - self.t0, 3),
                duration_s=None if nxt is None else round(max(0.0, nxt - step.at), 3),
                reported_s=step.seconds, detail=step.detail))
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
