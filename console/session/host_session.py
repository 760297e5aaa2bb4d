"""`HostSession`: everything the console does with one host, headless.

It owns the host link and the telemetry, and carries out the actions (checks, restart, apply
the reference draft config, export). The TUI drives it from workers and renders what it
reports; `check`, `status` and `restart` use the same pieces directly. Never imports textual.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_console.checks.draft_diff import DraftDiff, apply_reference, load_draft_diff
from vllm_console.checks.models import ChainReport
from vllm_console.checks.profile import (
    Acceptance,
    Profile,
    ProfileError,
    expected_acceptance,
    load_profile,
)
from vllm_console.checks.references import ReferenceError, load_reference_file
from vllm_console.checks.restart_hint import HowToRestart
from vllm_console.console.hostclient.discovery import parse_serve_argv
from vllm_console.console.hostclient.launch_record import seen_launch
from vllm_console.console.output.display import safe_text
from vllm_console.console.parsers.redact import redact, redact_text
from vllm_console.console.restart import (
    RestartError,
    RestartPlan,
    RestartResult,
    RestartStep,
    plan_restart,
    restart,
)
from vllm_console.console.restart.edit import edit_plan, parse_argv, parse_env
from vllm_console.console.session.capabilities import CHANGES_THE_HOST, EVERYTHING, Capability
from vllm_console.console.settings import HostConfig
from vllm_console.console.telemetry.events import TelemetryEvent
from vllm_console.console.telemetry.host_telemetry import HostTelemetry
from vllm_console.console.telemetry.snapshot import HostSnapshot
from vllm_console.console.transport.host import Host, HostError, quote_argv
from vllm_console.console.transport.remote_scripts import Inside

if TYPE_CHECKING:  # loaded with the chain
    from vllm_console.checks.links.runtime_activation import EngineLook
    from vllm_console.console.hostclient.stacks import StacksReport

INSTALL_TIMEOUT_S = 300.0
"""`pip install py-spy` downloads one ~3 MB wheel; a slow mirror gets minutes."""


class ActionError(Exception):
    """An action could not be carried out; the message is for the person. (A plain exception,
    not a frozen dataclass: Python sets `__traceback__` on exceptions as they propagate, which a
    frozen one refuses, turning the message into a FrozenInstanceError.)"""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class HostSession:
    """One host: link, telemetry, actions. What it can do is `capabilities` (everything, over
    a login on the host; less for a subclass on a narrower source, `console.sources.url`)."""

    base_capabilities: frozenset[Capability] = EVERYTHING
    """What this kind of session can do, before `--readonly`."""

    def __init__(self, config: HostConfig, host: Host, *, scenario: str = "",
                 restart_words: Sequence[str] = ()) -> None:
        self.config = config
        self.host = host
        self.name = config.name
        self.scenario = scenario
        self.restart_words = tuple(restart_words) or (config.name,)
        """HOST and the options that chose its settings, as the person typed them: what a
        hint's `vllm-console restart ...` needs to reach the same host the same way."""
        self.telemetry = HostTelemetry(host, config)
        self.last_report: ChainReport | None = None
        self.last_checked_at: float | None = None
        """When the last chain run finished (epoch s): the fleet table shows its age."""
        self.last_diff: DraftDiff | None = None
        self.last_stacks: StacksReport | None = None
        self._profile: Profile | None = None

    @property
    def readonly(self) -> bool:
        return self.config.readonly

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this session can show and do (`--readonly` takes the changes away)."""
        caps = self.base_capabilities
        return caps - CHANGES_THE_HOST if self.readonly else caps

    def why_not(self, capability: Capability) -> str:
        """Why this session cannot do `capability`: one line, with the way to get it."""
        if capability in CHANGES_THE_HOST and self.readonly:
            return f"read-only: {capability.value} refused (--readonly)"
        return f"{capability.value} is not available here"

    def source_summary(self) -> str | None:
        """What the header says this view is, for a session on a narrower source (the URL-only
        one: its URL, engine version and model); None for a host's own session."""
        return None

    def require(self, capability: Capability) -> None:
        """Raise ActionError (saying why) unless this session can do `capability`."""
        if capability not in self.capabilities:
            raise ActionError(self.why_not(capability))

    @property
    def snapshot(self) -> HostSnapshot:
        return self.telemetry.snapshot

    def profile(self) -> Profile:
        if self._profile is None:
            try:
                self._profile = load_profile(self.config.checks.profile)
            except ProfileError as exc:
                raise ActionError(str(exc)) from None
        return self._profile

    def expected_acceptance(self) -> Acceptance | None:
        """The range this host's profile expects (`checks.profile` in the hosts file, else the
        running method's), with its source."""
        spec = self.snapshot.run.speculative or self.snapshot.serve.speculative
        return expected_acceptance(spec.method if spec else None, self.config.checks.profile)

    async def run(self, on_event: Callable[[TelemetryEvent], Any]) -> None:
        """Telemetry until cancelled (reconnects on its own)."""
        await self.telemetry.run(on_event)

    @property
    def serve_config(self) -> HostConfig:
        """The configuration the checks and the restart act with: the telemetry's server
        (on a host with several, the one this view keeps to), never another."""
        serve = self.telemetry.serve_settings()
        return self.config if serve is self.config.serve else \
            self.config.model_copy(update={"serve": serve})

    def choose_server(self, port: int) -> None:
        """Work on the host's server on `port` from now on (the switcher): new telemetry
        pinned to it, what was judged of the other one dropped. The caller runs the new
        telemetry (`run`) after stopping the old one's."""
        self.telemetry.stop()
        self.config = self.config.model_copy(update={
            "serve": self.config.serve.model_copy(update={"port": port})})
        self.telemetry = HostTelemetry(self.host, self.config)
        self.last_report = None
        self.last_checked_at = None
        self.last_diff = None

    # -- actions ----------------------------------------------------------------------------
    def _serve_paths(self) -> tuple[str, str]:
        snap = self.snapshot
        draft = self.config.serve.draft or snap.serve.draft or ""
        target = self.config.serve.target or snap.serve.target or ""
        return draft, target

    async def run_checks(self) -> ChainReport:
        self.require(Capability.CHECKS)
        profile = self.profile()
        reference = None
        if self.config.checks.reference:
            try:
                reference = load_reference_file(self.config.checks.reference)
            except ReferenceError as exc:
                raise ActionError(str(exc)) from None
        from vllm_console.checks.chain import run_chain  # heavy: loaded when the chain first runs

        self.last_report = await run_chain(self.host, self.serve_config.serve, profile=profile,
                                           reference=reference, host_label=self.name,
                                           engine=self._engine_look(),
                                           restart=self.how_to_restart())
        self.last_checked_at = time.time()
        return self.last_report

    def how_to_restart(self) -> HowToRestart:
        """For the hints: the console's keys, and the command that restarts this host from a
        shell; none for a simulated host (the demo's exists only inside the console)."""
        keys = not self.readonly  # read-only: no key restarts
        if self.scenario:
            return HowToRestart(keys=keys)
        return HowToRestart.for_host(self.restart_words, keys=keys)

    def _engine_look(self) -> EngineLook | None:
        """The engine's state as the live telemetry judges it (its scrapes over the last
        minutes, the serve tree), for runtime activation; None while it knows nothing, and
        the chain looks at `/metrics` itself."""
        from vllm_console.checks.links.runtime_activation import EngineLook

        snap = self.snapshot
        state, reason = snap.engine_state()
        if state.value == "unknown":
            return None
        every = self.telemetry.options.metrics_interval_s
        return EngineLook(state.value, reason, f"the console's live telemetry: GET "
                          f"{snap.serve.url}/metrics every {every:g} s, and the serve tree")

    async def load_diff(self) -> DraftDiff:
        self.require(Capability.DRAFT_DIFF)
        draft, target = self._serve_paths()
        container = self.snapshot.serve.container
        # The server's paths are its container's: read there, never at the host's namesake.
        inside = Inside(container.runtime, container.ref) if container is not None else None
        self.last_diff = await load_draft_diff(self.host, self.profile(), draft, target,
                                               self.config.checks.reference, inside=inside)
        return self.last_diff

    async def apply_reference(self) -> str:
        """Write the reference values into the draft config.json; returns the backup path."""
        self.require(Capability.APPLY_REFERENCE)
        diff = self.last_diff or await self.load_diff()
        if not diff.wrong:
            raise ActionError("the draft config already matches the reference")
        try:
            backup = await apply_reference(self.host, diff,
                                           self.profile().links.config_correct.compare)
        except HostError as exc:
            raise ActionError(str(exc)) from None
        await self.load_diff()
        return backup

    async def plan_restart(self, *, trace: bool = False) -> RestartPlan:
        """The plan for `r`/`R`. When no server runs, the last launch started again is this
        entry's record on the host or the server this session last saw running, whichever
        started later (a server started by hand that exited leaves no record). A plain
        restart takes out the switches a debug restart put in (`console.restart.debug`)."""
        from vllm_console.console.restart.debug import plain_plan

        plan = await self._planned(trace=trace)
        try:
            return plain_plan(plan, url=self.config.serve.url, match=self.config.serve.match)
        except RestartError as exc:
            raise ActionError(str(exc)) from None

    async def _planned(self, *, trace: bool = False) -> RestartPlan:
        self.require(Capability.RESTART)
        process = self.telemetry.last_process
        seen = seen_launch(process, self.name) if process is not None else None
        try:
            return await plan_restart(self.host, self.serve_config, trace=trace, seen=seen)
        except (HostError, Exception) as exc:  # noqa: BLE001 - shown to the person
            raise ActionError(f"cannot plan the restart: {exc}") from None

    async def plan_debug_restart(self) -> tuple[RestartPlan, bool]:
        """The plan for `D`: a debug relaunch (`console.restart.debug`), or, when the server
        already runs with the debug switches, the plain one that takes them out; and which
        (True: debug). A unit's is refused by name before anything is asked."""
        from vllm_console.console.restart.debug import debug_plan, is_debug, plain_plan

        plan = await self._planned()
        debug = not is_debug(plan)
        snap = self.snapshot
        url, match = self.config.serve.url, self.config.serve.match
        try:
            if not debug:
                return plain_plan(plan, url=url, match=match), False
            gpus = bool(snap.sample is not None and snap.sample.gpus)
            return debug_plan(plan, gpu=gpus, version=snap.status_json()["engine"]["version"],
                              url=url, match=match), True
        except RestartError as exc:
            raise ActionError(str(exc)) from None

    def edit_plan(self, plan: RestartPlan, *, env: str = "", argv: str = "") -> RestartPlan:
        """`plan` with the person's environment (`NAME=value`, `-NAME`) and command line
        changes, as the restart dialog takes them; ActionError says what is wrong with them."""
        try:
            return edit_plan(plan, env=parse_env(env),
                             argv=parse_argv(argv) if argv.strip() else (),
                             url=self.config.serve.url, match=self.config.serve.match)
        except RestartError as exc:
            raise ActionError(str(exc)) from None

    async def restart(self, plan: RestartPlan,
                      on_progress: Callable[[RestartStep], Awaitable[None] | None] | None = None
                      ) -> RestartResult:
        self.require(Capability.RESTART)
        result = await restart(self.host, self.serve_config, trace=plan.trace, plan=plan,
                               on_progress=on_progress)
        if result.ok and plan.mode == "process" and plan.argv:
            # `R` may have moved it to another port: the view keeps to it there.
            self.telemetry.moved_to(parse_serve_argv(plan.argv).port)
        return result

    async def stacks(self, *, native: bool = False) -> StacksReport:
        """The stacks of the server's tree now (`console.hostclient.stacks`)."""
        self.require(Capability.STACKS)
        from vllm_console.console.hostclient.stacks import collect_stacks

        try:
            report = await collect_stacks(self.host, self.config.serve, native=native,
                                          process=self.telemetry.last_process)
        except HostError as exc:
            raise ActionError(str(exc)) from None
        self.last_stacks = report
        return report

    async def install_py_spy(self, report: StacksReport) -> str:
        """Run the report's own install command (`PYTHON -m pip install py-spy`, the serving
        interpreter's environment, nowhere else) as the login user; its last line. ActionError
        says why it did not install."""
        self.require(Capability.INSTALL_PY_SPY)
        if not report.install:
            raise ActionError(f"{self.name}: no serving environment to install py-spy into")
        command = quote_argv(list(report.install))
        try:
            result = await self.host.run(list(report.install), timeout=INSTALL_TIMEOUT_S)
        except HostError as exc:
            raise ActionError(f"{command}: {exc}") from None
        said = [ln for ln in (result.text + result.error_text).splitlines() if ln.strip()]
        if not result.ok:
            raise ActionError(f"{command} failed (exit {result.exit_status}): "
                              f"{said[-1] if said else 'no output'}")
        return said[-1] if said else f"{command}: done"

    async def diagnostics(self) -> dict[str, Any]:
        """What the bundle carries for a stalled or dead engine (or on demand): the stacks of
        the server's tree, the watchdog's dumps with their text, and `vllm collect-env` of
        the serving environment; each part says why when it could not be had."""
        import asyncio

        from vllm_console.console.hostclient.collect_env import collect_env

        process = self.telemetry.last_process
        python = self.config.serve.python or (process.python if process else "") or ""

        async def stacks() -> dict[str, Any]:
            try:
                report = await self.stacks()
            except ActionError as exc:
                return {"error": str(exc)}
            data = report.as_json()
            data["watchdog_dumps"] = [{"path": d.path, "pid": d.pid, "at": d.at,
                                       "text": d.text, "error": d.error}
                                      for d in report.watchdog_dumps]
            return data

        stacks_json, env = await asyncio.gather(stacks(), collect_env(self.host, python,
                                                                      process))
        return {"stacks": stacks_json, "collect_env": env.as_json()}

    def evidence_bundle(self, log_window: list[str],
                        diagnostics: dict[str, Any] | None = None) -> dict[str, Any]:
        """Everything a colleague needs to see what this screen shows (secrets redacted);
        with `diagnostics` (stacks, watchdog dumps, collect-env) when they were gathered."""
        snap = self.snapshot
        diff = self.last_diff
        return redact({
            "host": self.name,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "status": snap.status_json(),
            "engine_fields": _jsonable(dict(snap.run.engine.fields)) if snap.run.engine else None,
            "non_default_args": _jsonable(dict(snap.run.args.args)) if snap.run.args else None,
            "checks": self.last_report.to_json() if self.last_report else None,
            "draft_diff": None if diff is None else {
                "path": diff.path, "reference": diff.reference, "error": diff.error,
                "fields": [{"field": r.field, "expected": r.expected, "actual": r.actual,
                            "ok": r.ok} for r in diff.rows],
                "findings": [f.__dict__ for f in diff.findings],
                "full_diff": list(diff.full_diff)},
            "gpus": snap.status_json()["gpus"],
            # Redacted here too: a caller may hand raw lines (the TUI's are display lines).
            "log_window": [safe_text(redact_text(line)) for line in log_window],
            **({"diagnostics": diagnostics} if diagnostics is not None else {}),
        })

    def export(self, directory: Path, log_window: list[str],
               diagnostics: dict[str, Any] | None = None) -> Path:
        """Write the evidence bundle as private JSON (mode 600) and return its path."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name)
        # Stamped to the second; a second export within it takes the next free `-N` (opened
        # exclusively, so two exports are always two files and none is overwritten).
        for n in itertools.count(1):
            path = directory / f"vllm-console-{safe_name}-{stamp}{f'-{n}' if n > 1 else ''}.json"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                break
            except FileExistsError:
                continue
        with os.fdopen(fd, "w") as fh:
            json.dump(self.evidence_bundle(log_window, diagnostics), fh, indent=2,
                      default=repr)
        return path

    async def close(self) -> None:
        self.telemetry.stop()
        await self.host.close()


def _jsonable(value: Any) -> Any:
    from vllm_console.console.parsers.pyrepr import to_jsonable

    return to_jsonable(value)
