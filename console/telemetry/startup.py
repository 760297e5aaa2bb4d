"""Start-up tracking: which phase a starting `vllm serve` is in, for how long, and whether it
is stuck, while its HTTP port still refuses or hangs.

The log says where it is ("loading weights 2m10s"); when no progress line comes for
`stall_after_s` it is shown as "stalled N s" (not "dead": the process still lives). A fatal line
(engine failed, a DFlash refusal, an exception before the engine started) makes it "failed";
the serve tree vanishing makes it "exited".

Which lines start a run is the vocabulary's rule (`console.hostside.vocabulary.run_mark`,
`starts_run`: the host's follower reads it too); which end its start-up is `ends_startup`. The
telemetry (`run_log.RunLog`) and the chain's runtime-activation link
(`checks.links.current_run.CurrentRun`) use both alike, so that the status bar and `check`
never tell two stories.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from vllm_console.console.parsers.errors import ErrorEvent, ErrorKind
from vllm_console.console.parsers.startup import StartupEvent, StartupPhase

STALL_AFTER_S = 120.0

_ACTIVITY = {
    StartupPhase.ENGINE_START: "initialising engine",
    StartupPhase.LOADING_WEIGHTS: "loading weights",
    StartupPhase.LOADING_DRAFTER: "loading drafter",
    StartupPhase.MODEL_LOADED: "profiling memory",
    StartupPhase.KV_CACHE: "allocating KV cache",
    StartupPhase.GRAPH_CAPTURE: "warming up",
    StartupPhase.ENGINE_READY: "starting API server",
    StartupPhase.SERVER_STARTING: "starting API server",
    StartupPhase.READY: "ready",
}
_FATAL = frozenset({ErrorKind.ENGINE_FAILED, ErrorKind.ENGINE_INIT_FAILED, ErrorKind.ENGINE_DEAD})


def ends_startup(error: ErrorEvent, *, before_engine: bool) -> bool:
    """Whether a failure line ends the run's start-up: an engine failure or a DFlash refusal
    always; any exception while the run has not reached its engine line (the API server dies
    on an uncaught one, e.g. a configuration error raised while building the engine config)."""
    if error.dflash or error.kind in _FATAL:
        return True
    return before_engine and error.kind is ErrorKind.EXCEPTION


class StartupState(StrEnum):
    UNKNOWN = "unknown"
    NOT_RUNNING = "not-running"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    EXITED = "exited"


@dataclass(frozen=True, slots=True)
class StartupStep:
    """A start-up phase as the log showed it: when it began, the duration vLLM reports for it,
    and its first line's detail (which model is loading, how many GiB)."""

    phase: StartupPhase
    at: float
    seconds: float | None = None
    detail: str = ""
    late: bool = False
    """Its line came in a burst after a lost link: when it was written is unknown."""


class PhaseSteps:
    """The phases one start-up went through, one step a phase: the one rule the telemetry's
    start-up status and the restart's report count phases by.

    A phase's later lines (a tqdm bar moving on, `Loading weights took N seconds`) belong to
    its step: the first line's detail is kept, because it says what the phase works on (the
    model path, "loading drafter model") where the later ones only say how far a bar got; a
    duration vLLM reports is recorded on the step. The drafter's own weights (their bar and
    `Loading weights took`, after `Loading drafter model`) are the drafter's phase, not a
    second `loading-weights`."""

    def __init__(self, limit: int = 64) -> None:
        self._limit = limit
        self._steps: list[StartupStep] = []

    @property
    def steps(self) -> tuple[StartupStep, ...]:
        return tuple(self._steps)

    @property
    def phase(self) -> StartupPhase | None:
        """The phase the start-up is in: the last step's (None before any)."""
        return self._steps[-1].phase if self._steps else None

    def add(self, event: StartupEvent, at: float, *, late: bool = False
            ) -> StartupEvent | None:
        """Count a start-up line at `at`. Returns the event as counted (its phase folded
        into the drafter's) when it opened a step or reported a duration; None when it only
        repeated its phase."""
        last = self._steps[-1] if self._steps else None
        if last is not None and last.phase is StartupPhase.LOADING_DRAFTER and \
                event.phase is StartupPhase.LOADING_WEIGHTS:
            event = replace(event, phase=StartupPhase.LOADING_DRAFTER)
        if last is not None and last.phase is event.phase:
            if event.seconds is None:
                return None
            self._steps[-1] = replace(last, seconds=event.seconds)
            return event
        self._steps.append(StartupStep(event.phase, at, event.seconds, event.detail, late))
        if len(self._steps) > self._limit:
            del self._steps[:-self._limit]
        return event


@dataclass(frozen=True, slots=True)
class StartupStatus:
    """Where start-up stands at `now` (host clock, epoch s)."""

    state: StartupState
    activity: str = ""
    phase: StartupPhase | None = None
    run_started: float | None = None
    activity_since: float | None = None
    last_progress: float | None = None
    ready_at: float | None = None
    failure: str | None = None
    steps: tuple[StartupStep, ...] = ()
    now: float = 0.0
    stall_after_s: float = STALL_AFTER_S

    @property
    def activity_elapsed_s(self) -> float | None:
        if self.activity_since is None:
            return None
        return max(0.0, self.now - self.activity_since)

    @property
    def stalled_s(self) -> float | None:
        """Seconds without a progress line, once past `stall_after_s` while starting."""
        if self.state is not StartupState.STARTING or self.last_progress is None:
            return None
        quiet = self.now - self.last_progress
        return quiet if quiet >= self.stall_after_s else None

    @property
    def startup_s(self) -> float | None:
        """How long the last start took (ready minus start), when it completed."""
        if self.ready_at is None or self.run_started is None:
            return None
        return max(0.0, self.ready_at - self.run_started)

    @property
    def text(self) -> str:
        """"loading weights 2m10s", "… · stalled 75 s", "ready (started in 3m25s)", ..."""
        if self.state is StartupState.STARTING:
            elapsed = self.activity_elapsed_s
            line = self.activity + (f" {format_duration(elapsed)}" if elapsed is not None else "")
            stalled = self.stalled_s
            return line + (f" · stalled {stalled:.0f} s" if stalled is not None else "")
        if self.state is StartupState.READY:
            took = self.startup_s
            return "ready" + (f" (started in {format_duration(took)})" if took is not None else "")
        if self.state is StartupState.FAILED:
            return f"failed: {self.failure}"
        if self.state is StartupState.EXITED:
            return "exited" + (f": {self.failure}" if self.failure else "")
        if self.state is StartupState.NOT_RUNNING:
            return "not running"
        return "unknown"


def format_duration(seconds: float) -> str:
    """45s, 2m10s, 1h02m."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class StartupTracker:
    """Follows one run's start-up from its log lines; `status(now, running)` is its view."""

    def __init__(self, stall_after_s: float = STALL_AFTER_S) -> None:
        self.stall_after_s = stall_after_s
        self.reset(None)

    def reset(self, at: float | None) -> None:
        """A new run starts (its first preamble or engine line) at `at`."""
        self._run_started = at
        self._activity = "starting" if at is not None else ""
        self._activity_since = at
        self._last_progress = at
        self._ready_at: float | None = None
        self._failure: str | None = None
        self._dflash_failure = False
        self._failure_before_engine = False
        self._steps = PhaseSteps()

    @property
    def started(self) -> bool:
        return self._run_started is not None

    @property
    def ready(self) -> bool:
        return self._ready_at is not None

    def feed(self, event: StartupEvent, at: float) -> bool:
        """A start-up line at `at`. True: the status changed."""
        if self._run_started is None:
            self._run_started = at
        if event.phase is StartupPhase.ENGINE_START and self._failure_before_engine:
            self._failure = None  # the API server went on: that exception was not its end
            self._failure_before_engine = False
        self._last_progress = at
        self._steps.add(event, at)
        phase = self._steps.phase or event.phase  # the phase as counted (drafter folded in)
        activity = _ACTIVITY.get(phase, phase.value)
        if phase is StartupPhase.LOADING_WEIGHTS and event.seconds is not None:
            activity = "loading model"
        elif phase is StartupPhase.KV_CACHE and event.tokens is not None:
            activity = "capturing CUDA graphs"
        if phase is StartupPhase.READY:
            self._ready_at = at
        if activity != self._activity:
            self._activity, self._activity_since = activity, at
        return True

    def progress(self, at: float) -> None:
        """A progress bar moved (no phase change): not stalled."""
        self._last_progress = at

    def fail(self, error: ErrorEvent, at: float, *, before_engine: bool = False) -> bool:
        """A failure line (`before_engine`: the run has not reached its engine line). Fatal
        ones (`ends_startup`) fail the start; a DFlash refusal is the message kept, as the root
        cause. One before the engine line holds until an engine line shows the server went
        on."""
        if not ends_startup(error, before_engine=before_engine):
            return False
        if self._failure is not None and (self._dflash_failure or not error.dflash):
            return False
        self._failure = error.message[:500]
        self._dflash_failure = error.dflash
        self._failure_before_engine = before_engine and not error.dflash \
            and error.kind not in _FATAL
        return True

    def status(self, now: float, running: bool | None) -> StartupStatus:
        """The status at `now`; `running`: whether the serve process lives (None: unknown)."""
        if self._failure is not None:
            state = StartupState.EXITED if running is False else StartupState.FAILED
        elif running is False:
            state = StartupState.EXITED if self._run_started is not None else (
                StartupState.NOT_RUNNING)
        elif self._ready_at is not None:
            state = StartupState.READY
        elif self._run_started is not None or running:
            state = StartupState.STARTING
        else:
            state = StartupState.UNKNOWN
        activity = self._activity or "starting (no log line yet)"
        return StartupStatus(state, activity, self._steps.phase, self._run_started,
                             self._activity_since, self._last_progress, self._ready_at,
                             self._failure, self._steps.steps, now, self.stall_after_s)
