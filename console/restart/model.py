"""What a restart is and what it reports: the plan, its progress steps and its result.

All frozen: the TUI renders them as they come (`on_progress`), the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vllm_console.console.parsers import StartupPhase
from vllm_console.console.parsers.redact import is_secret_key, redact, redact_text
from vllm_console.console.transport.host import quote_argv


def shown_argv(argv: Sequence[str]) -> str:
    """A command line as the console shows it: shell-quoted, secret values (`--api-key X`,
    `--hf-token=X`) replaced by `<redacted>`. The relaunch itself keeps `argv` whole."""
    return quote_argv(redact([str(a) for a in argv]))


def _shown(value: object) -> object:
    """Text a person will see, redacted whatever it came from (the host's words, a log line,
    a look-alike's command line): a property of these models, not of each caller."""
    if isinstance(value, str):
        return redact_text(value, max(len(value), 1))
    if isinstance(value, tuple | list):
        return tuple(_shown(v) for v in value)
    return value


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, defer_build=True)


class Stage(StrEnum):
    """Where a restart stands. The host-side step reports the stages up to `launched`, and
    `ready`/`failed`/`refused` at its end; the client adds `planned`, `phase` (a start-up
    phase seen in the log), `verified` and `link-lost`/`link-back`."""

    PLANNED = "planned"
    STARTED = "started"
    LOCKED = "locked"
    REFUSED = "refused"
    NOTE = "note"
    STOPPING = "stopping"
    TERM_SENT = "term-sent"
    KILL_SENT = "kill-sent"
    STOPPED = "stopped"
    GPU_RELEASED = "gpu-released"
    GPU_SKIPPED = "gpu-skipped"
    PORT_FREE = "port-free"
    LAUNCHING = "launching"
    LAUNCHED = "launched"
    PHASE = "phase"
    READY = "ready"
    VERIFIED = "verified"
    FAILED = "failed"
    LINK_LOST = "link-lost"
    LINK_BACK = "link-back"
    OTHER = "other"

    @classmethod
    def of(cls, value: str) -> Stage:
        try:
            return cls(value)
        except ValueError:
            return cls.OTHER


class Outcome(StrEnum):
    """How a restart ended. CLI exit status: READY 0; FAILED 1; REFUSED and ERROR 2."""

    READY = "ready"
    FAILED = "failed"
    REFUSED = "refused"
    ERROR = "error"

    @property
    def exit_status(self) -> int:
        return {"ready": 0, "failed": 1}.get(self.value, 2)


class RestartStep(_Frozen):
    """One progress report."""

    stage: Stage
    """What happened."""
    message: str
    """One line for a person (redacted)."""
    elapsed_s: float = 0.0
    """Seconds since the restart began (host clock for host-side steps)."""
    pid: int | None = None
    """The process the step is about, when there is one (the new server once launched)."""
    phase: StartupPhase | None = None
    """For `phase` steps: the start-up phase the log reached."""

    _redacted = field_validator("message")(_shown)


class PhaseTiming(_Frozen):
    """A start-up phase and how long it took (to the next phase, as the log showed it)."""

    phase: StartupPhase
    """The phase."""
    started_s: float
    """When the log reached it, in seconds after the relaunch."""
    duration_s: float | None
    """Until the next phase began (None for the last one seen)."""
    reported_s: float | None = None
    """What vLLM itself says the phase took (`Loading weights took 138.88 seconds`)."""
    detail: str = ""
    """The rest of the line in words (model, GiB, tokens)."""


class RestartOptions(_Frozen):
    """Timeouts of a restart, in seconds."""

    term_timeout_s: float = Field(default=30.0, gt=0)
    """How long the tree gets to exit after SIGTERM before SIGKILL."""
    kill_timeout_s: float = Field(default=10.0, gt=0)
    """How long SIGKILLed processes get to vanish before the restart gives up."""
    free_timeout_s: float = Field(default=60.0, gt=0)
    """How long GPU memory and the port get to be released after the tree exited."""
    startup_timeout_s: float = Field(default=1800.0, gt=0)
    """How long the new server gets to answer (large models load for many minutes)."""
    step_start_timeout_s: float = Field(default=15.0, gt=0)
    """How long the host-side step gets to say its first word before the restart is reported
    as not started."""
    link_timeout_s: float = Field(default=120.0, gt=0)
    """How long the client waits for a lost SSH link to come back before it lets the host
    finish on its own."""


class RestartPlan(_Frozen):
    """What a restart will do: shown in the confirm dialog, then carried out as it is."""

    host: str
    """The host's name."""
    mode: str
    """`process` (stop the tree, relaunch the command), `unit` (systemctl) or `container`
    (`docker restart`: the server is the container's main process)."""
    command: str
    """The exact command line that will run (shell-quoted), or `systemctl restart UNIT`."""
    argv: tuple[str, ...] = ()
    """The command's words."""
    cwd: str = ""
    """Its working directory."""
    log: str = ""
    """Where its output goes (appended after a marker line)."""
    unit: str = ""
    """The systemd unit, in `unit` mode."""
    user_unit: bool = False
    """`systemctl --user`."""
    pid: int | None = None
    """The running server's pid (None when none runs: the last launch is started again)."""
    start_ticks: int = 0
    """Its start time (clock ticks since boot): with the pid, its identity."""
    user: str = ""
    """The user it runs as."""
    members: tuple[tuple[int, int, str], ...] = ()
    """The tree to stop: (pid, start ticks, name), the server first."""
    url: str = ""
    """The server's URL as seen from the host."""
    port: int | None = None
    """Its port."""
    trace: bool = False
    """Relaunch with the activation trace hook."""
    watch: tuple[str, ...] = ()
    """The functions the trace watches (`module:qualname`)."""
    env_changes: tuple[tuple[str, str | None], ...] = ()
    """Environment differences from the running server's (None: removed)."""
    notes: tuple[str, ...] = ()
    """Things worth knowing before saying yes (a log that is not a file, ...)."""

    _redacted = field_validator("notes")(_shown)
    original_env: dict[str, str] = Field(default_factory=dict, repr=False)
    """The server's environment without any trace hook (it may hold secrets: never shown)."""
    launch_env: dict[str, str] = Field(default_factory=dict, repr=False)
    """The environment the relaunch gets."""
    python: str = ""
    """The interpreter that runs the host-side step."""
    bundle: str = ""
    """The host-side step's installed path."""
    hook_dir: str = ""
    """The trace hook's directory on the host (traced runs)."""
    last_key: str = ""
    """Names this host entry's last-launch record on the host (entries never share one)."""
    inputs: tuple[str, ...] = ()
    """Paths the relaunch needs (model, draft): checked before anything is stopped."""
    last_argv: tuple[str, ...] = ()
    """The last run's command line, when the person edited it (`console.restart.edit`)."""
    container: tuple[str, str, str, str] | None = None
    """In `container` mode: (runtime, name or id, id, restart policy)."""
    recreate: bool = False
    """In `container` mode: the container is made again with the change (trace hook, edited
    command line or environment), not restarted in place."""
    container_argv: tuple[str, ...] = ()
    """In `container` mode: the server's command line as the container runs it now (the part
    of its main command an edited one replaces)."""
    compose: tuple[str, str] = ("", "")
    """In `container` mode: its compose project and service, when compose made it."""
    env_edits: tuple[tuple[str, str | None, str | None], ...] = ()
    """The person's environment changes: (name, the last run's value, the relaunch's), None
    for unset."""

    def describe(self) -> str:
        """Several lines for the confirm dialog: what stops, what starts, where it logs."""
        lines = []
        if self.mode == "container" and not self.recreate:
            names = ", ".join(f"{name} {pid}" for pid, _s, name in self.members)
            lines.append(f"{self.command}: the container stops ({names}: SIGTERM, then "
                         "SIGKILL) and starts again as it is (same image, command, mounts)")
            lines.append(f"ready: its new server owns port {self.port} and answers"
                         if self.port else "ready: its new server answers")
            lines.extend(f"note: {n}" for n in self.notes)
            return "\n".join(lines)
        if self.mode == "container":
            return self._describe_recreation()
        if self.mode == "unit":
            lines.append(f"systemctl{' --user' if self.user_unit else ''} stop/start "
                         f"{self.unit}")
        names = ", ".join(f"{name} {pid}" for pid, _s, name in self.members)
        if self.pid is not None:
            lines.append(f"stop: {names}")
        elif names:
            lines.append(f"stop: {names} (left by an earlier server); the last launch is "
                         "started again")
        else:
            lines.append("stop: nothing runs (the last launch is started again)")
        if self.mode != "unit":
            if self.last_argv and tuple(self.last_argv) != tuple(self.argv):
                lines.append(f"- start: {shown_argv(self.last_argv)}")
                lines.append(f"+ start: {self.command}")
            else:
                lines.append(f"start: {self.command}")
            if self.cwd:
                lines.append(f"in: {self.cwd}")
        lines.extend(self._env_lines())
        if self.log:
            lines.append(f"log: {self.log} (appended)")
        if self.trace:
            lines.append("trace: " + ", ".join(self.watch))
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


    def _env_lines(self) -> list[str]:
        """The environment's diff as the dialog shows it: the person's edits as -/+ pairs,
        then the plan's own changes (the trace hook's) they did not touch; secrets redacted."""
        lines = []
        for key, was, now in self.env_edits:
            lines.append(f"- env: {_shown_env(key, was)}")
            lines.append(f"+ env: {_shown_env(key, now)}")
        edited = {key for key, _was, _now in self.env_edits}
        lines.extend(f"env: {_shown_env(key, value)}" if value is not None
                     else f"env: unset {key}"
                     for key, value in self.env_changes if key not in edited)
        return lines

    def _describe_recreation(self) -> str:
        runtime, ref = (self.container or ("docker", "?"))[:2]
        names = ", ".join(f"{name} {pid}" for pid, _s, name in self.members)
        project, service = self.compose
        if project:
            lines = [f"recreate: {self.command}; compose stops {ref} ({names}: SIGTERM, "
                     "then SIGKILL) and starts the new one under its name; if compose fails, "
                     "the service is brought up again from its own files",
                     "kept: everything the project's compose files say (they are not "
                     "edited; the override holds only what changes)"]
        else:
            lines = [f"recreate: {runtime} create, then stop {ref} ({names}: SIGTERM, then "
                     "SIGKILL), start the new one under its name; the old one is removed once "
                     "the new server is ready, and started again if the new one cannot start",
                     "kept: image, mounts, network, ports, devices and GPUs, shm size, "
                     "limits, labels, restart policy"]
        if self.argv != self.container_argv:
            lines.append(f"- command: {shown_argv(self.container_argv)}")
            lines.append(f"+ command: {shown_argv(self.argv)}")
        else:
            lines.append(f"command: {shown_argv(self.argv)}")
        lines.extend(self._env_lines())
        if self.trace and self.hook_dir:
            lines.append(f"mount: {self.hook_dir} (the trace hook, read-only)")
            lines.append("trace: " + ", ".join(self.watch))
        lines.append(f"ready: its new server owns port {self.port} and answers"
                     if self.port else "ready: its new server answers")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _shown_env(key: str, value: str | None) -> str:
    """One variable as the dialog's diff shows it (a secret's value never)."""
    if value is None:
        return f"{key} unset"
    return f"{key}={'<redacted>' if is_secret_key(key) else value}"


class RestartResult(_Frozen):
    """How a restart went."""

    host: str
    """The host's name."""
    outcome: Outcome
    """ready, failed (the server did not come up), refused, error (could not run)."""
    reason: str
    """One line: why it ended as it did."""
    command: str = ""
    """The command that was relaunched."""
    trace: bool = False
    """Whether the relaunch was traced."""
    old_pid: int | None = None
    """The server that was stopped."""
    new_pid: int | None = None
    """The server that was started."""
    steps: tuple[RestartStep, ...] = ()
    """Every progress report, in order."""
    phases: tuple[PhaseTiming, ...] = ()
    """Start-up phases with their durations."""
    error_lines: tuple[str, ...] = ()
    """Failure lines from the log after the marker (tracebacks, refusals), when it failed."""
    marker: str = ""
    """The marker line written to the log before the relaunch."""
    log: str = ""
    """The log."""
    stop_s: float | None = None
    """Seconds from the first signal until the tree, GPU memory and port were free."""
    startup_s: float | None = None
    """Seconds from the relaunch until the server answered."""
    total_s: float = 0.0
    """Seconds the whole restart took, as the client saw it."""
    notes: tuple[str, ...] = ()
    """Remarks (GPU memory not checked, a process left alone, ...)."""

    _redacted = field_validator("reason", "command", "error_lines", "notes")(_shown)

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.READY

    @property
    def exit_status(self) -> int:
        return self.outcome.exit_status
