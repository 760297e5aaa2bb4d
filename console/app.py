"""The Textual application: one `HostScreen` per host, a fleet table when there are several.

Data flows one way: each `HostSession` runs its telemetry in a worker and reports immutable
events; the app turns them into messages and sets the widgets' attributes. Actions (checks,
restart, apply reference, export) run in workers and report back as messages; their failures
become notifications in one place (`on_worker_state_changed`).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterable
from pathlib import Path

import platformdirs
from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from checks.models import ChainReport
from console.display import safe_text
from console.draft_diff import DraftDiff
from console.restart import RestartResult, RestartStep
from console.screens.confirm import ConfirmScreen
from console.screens.evidence import EvidenceScreen
from console.screens.fleet import FleetRow, FleetScreen
from console.screens.help import HelpScreen
from console.screens.host import HostScreen
from console.screens.restart import RestartScreen
from console.screens.url_only import show_url_only
from console.session import ActionError, HostSession
from console.settings import APP_NAME
from console.sources.url import UrlSession
from console.telemetry import events as ev
from console.telemetry.startup import StartupState
from console.ui_state import load_ui_state, save_ui_state
from themes import DEFAULT_THEME, STATUS_VARIABLES, THEMES, stylesheet_path
from widgets.checklist import Checklist, ChecklistState
from widgets.draft_diff import DraftDiffPane
from widgets.engine_tree import EngineView
from widgets.gpu_pane import GpuHistory
from widgets.host_header import Sources
from widgets.log_pane import LogPane
from widgets.spec_pane import SpecView


def _bindings(items: Iterable[Binding | tuple[str, ...]]) -> list[Binding]:
    return [b for b in items if isinstance(b, Binding)]


class TelemetryArrived(Message):
    """A telemetry event from one host's session."""

    def __init__(self, host: str, event: ev.TelemetryEvent) -> None:
        super().__init__()
        self.host = host
        self.event = event

    def can_replace(self, message: Message) -> bool:
        # Samples and states supersede older ones still queued; log lines never do.
        return (isinstance(message, TelemetryArrived) and message.host == self.host
                and type(message.event) is type(self.event)
                and not isinstance(self.event, ev.LogLinesReceived | ev.RunUpdated))


class ChecksCompleted(Message):
    def __init__(self, host: str, report: ChainReport | None, error: str = "") -> None:
        super().__init__()
        self.host, self.report, self.error = host, report, error


class DiffLoaded(Message):
    def __init__(self, host: str, diff: DraftDiff) -> None:
        super().__init__()
        self.host, self.diff = host, diff


class RestartProgressed(Message):
    def __init__(self, host: str, step: RestartStep) -> None:
        super().__init__()
        self.host, self.step = host, step


class RestartFinished(Message):
    def __init__(self, host: str, result: RestartResult) -> None:
        super().__init__()
        self.host, self.result = host, result


class ConsoleApp(App[int]):
    """vllm-console."""

    TITLE = "vllm-console"
    CSS_PATH = stylesheet_path()
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("c", "run_checks", "Checks", id="app.checks"),
        Binding("r", "restart", "Restart", id="app.restart"),
        Binding("R", "restart(True)", "Traced restart", id="app.restart_traced"),
        Binding("a", "apply_reference", "Apply reference", id="app.apply_reference"),
        Binding("x", "export", "Export", id="app.export"),
        Binding("t", "next_theme", "Theme", show=False, id="app.theme"),
        Binding("h", "fleet", "Hosts", id="app.fleet"),
        Binding("tab", "app.focus_next", "Next pane", show=False, id="app.focus_next"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False,
                id="app.focus_previous"),
    ]

    def __init__(self, sessions: list[HostSession], *, theme: str | None = None,
                 export_dir: Path | None = None, autostart_checks: bool = True) -> None:
        super().__init__()
        if not sessions:
            raise ValueError("no hosts")
        self.sessions = {s.name: s for s in sessions}
        self.current = sessions[0].name
        self._wanted_theme = theme
        self._screens: dict[str, HostScreen] = {}
        self._gpu_history = {s.name: GpuHistory() for s in sessions}
        self._engine_prev: dict[str, object] = {}
        self._restarting: set[str] = set()
        self._was_ready: dict[str, bool] = {s.name: False for s in sessions}
        self.export_dir = export_dir or Path(platformdirs.user_data_dir(APP_NAME)) / "exports"
        self._autostart_checks = autostart_checks
        self.started = time.monotonic()

    # -- set-up -------------------------------------------------------------------------------
    def get_css_variables(self) -> dict[str, str]:
        variables = super().get_css_variables()
        # Built-in Textual themes (from the palette) lack the console's status variables.
        fallback = {"status-ok": "success", "status-warn": "warning", "status-fail": "error",
                    "status-unknown": "foreground-muted"}
        for name in STATUS_VARIABLES:
            variables.setdefault(name, variables.get(fallback[name], "#888888"))
        variables.setdefault("log-spec", variables["status-ok"])
        variables.setdefault("log-aux", variables.get("accent", variables["status-warn"]))
        return variables

    def on_mount(self) -> None:
        for theme in THEMES.values():
            self.register_theme(theme)
        wanted = self._wanted_theme or load_ui_state().get("theme") or DEFAULT_THEME
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        for name, session in self.sessions.items():
            screen = HostScreen(name, readonly=session.readonly, scenario=session.scenario)
            self._screens[name] = screen
            self.install_screen(screen, name=f"host:{name}")
            self._start_telemetry(session)
        if len(self.sessions) > 1:
            self.push_screen(FleetScreen(self._fleet_rows()))
        else:
            self.push_screen(f"host:{self.current}")
        if self._autostart_checks:
            for name, session in self.sessions.items():
                if not isinstance(session, UrlSession):  # the chain needs SSH
                    self.set_timer(1.5, lambda n=name: self._run_checks(n))
        # Everything built so far (Textual, the widgets, the modules) lives as long as the app:
        # take it out of the cyclic collector's scans, whose full passes otherwise stall the UI
        # for 100 ms and more during a log flood (benchmarks/findings.md).
        gc.freeze()

    def _remember_theme(self, theme: object) -> None:
        save_ui_state({"theme": self.theme})

    def _start_telemetry(self, session: HostSession) -> None:
        def report(event: ev.TelemetryEvent) -> None:
            self.post_message(TelemetryArrived(session.name, event))

        self.run_worker(session.run(report), name=f"telemetry:{session.name}",
                        group=f"telemetry:{session.name}", exit_on_error=False)

    async def on_unmount(self) -> None:
        for session in self.sessions.values():
            with contextlib.suppress(Exception):  # leaving anyway
                await session.close()

    # -- one place for worker failures ----------------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            message = str(error) if isinstance(error, ActionError) else \
                f"{event.worker.name}: {type(error).__name__}: {error}"
            self.notify(message, severity="error", timeout=8)

    # -- telemetry into the panes ---------------------------------------------------------------
    def screen_for(self, host: str) -> HostScreen | None:
        screen = self._screens.get(host)
        if screen is None or not screen.ready:
            return None
        return screen if screen.is_attached else None

    @on(HostScreen.Shown)
    def _hydrate(self, message: HostScreen.Shown) -> None:
        """A host screen was just composed: give it everything known so far."""
        host = message.host
        screen = self.screen_for(host)
        if screen is None:
            return
        session = self.sessions[host]
        snap = session.snapshot
        header = screen.header
        header.link = snap.link
        if snap.sample is not None:
            screen.gpus.view = self._gpu_history[host].add(snap.sample)
        screen.spec.view = SpecView(snap.spec_decode, session.expected_acceptance())
        screen.engine.view = EngineView(snap.run.engine, None, snap.run.args)
        follower = session.telemetry.follower
        if follower is not None:
            screen.log_pane.add_lines([e.display() for e in follower.recent()])
        if session.last_report is not None:
            screen.checklist.state = ChecklistState(session.last_report)
        if session.last_diff is not None:
            screen.diff.diff = session.last_diff
        if isinstance(session, UrlSession):
            show_url_only(screen, session)

    @on(TelemetryArrived)
    def _telemetry(self, message: TelemetryArrived) -> None:
        # NoMatches: the screen is being torn down (exit) while events still arrive.
        with contextlib.suppress(NoMatches):
            self._apply_telemetry(message)

    def _apply_telemetry(self, message: TelemetryArrived) -> None:
        event, host = message.event, message.host
        screen = self.screen_for(host)
        if isinstance(event, ev.GpuSampled):
            view = self._gpu_history[host].add(event.sample)
            if screen is not None:
                screen.gpus.view = view
        top = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(top, FleetScreen):
            top.update_row(self._fleet_row(host))  # applied at most twice a second
        if isinstance(event, ev.ServeWarning):  # a stale `log` in the hosts file, say
            self.notify(safe_text(f"{host}: {event.text}", 600), severity="warning",
                        timeout=20, markup=False)  # host paths are data, never markup
        if screen is None:
            return
        session = self.sessions[host]
        snap = session.snapshot
        header = screen.header
        if isinstance(event, ev.LinkChanged):
            header.link = event.link
        elif isinstance(event, ev.LogLinesReceived):
            screen.log_pane.add_lines(event.batch.display_lines())
        elif isinstance(event, ev.RunUpdated):
            if event.new_run:
                self._engine_prev[host] = screen.engine.view.current
            previous = self._engine_prev.get(host)
            screen.engine.view = EngineView(event.run.engine, previous, event.run.args)  # type: ignore[arg-type]
        elif isinstance(event, ev.ReadinessChanged) and isinstance(session, UrlSession):
            header.activity = session.url_telemetry.summary()
        elif isinstance(event, ev.SpecDecodeUpdated):
            screen.spec.view = SpecView(event.state, session.expected_acceptance())
        elif isinstance(event, ev.StartupProgress):
            ready = event.status.state is StartupState.READY
            if ready and not self._was_ready.get(host, True) and host not in self._restarting:
                # A run just became ready: its runtime evidence is complete now.
                self._run_checks(host)
            self._was_ready[host] = ready
            if host not in self._restarting:
                header.activity = f"serve: {event.status.text}"
        header.sources = Sources(gpu=snap.gpu_source,
                                 log=str(snap.follow.value) if snap.follow else "none",
                                 metrics=snap.readiness.health.value)

    # -- actions --------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        session = self.sessions.get(self.current)
        host_actions = ("run_checks", "restart", "apply_reference", "export")
        top = self.screen_stack[-1] if self.screen_stack else None
        if action in host_actions and isinstance(top, FleetScreen):
            return False  # the fleet table picks a host first
        if action in ("restart", "apply_reference") and session is not None and \
                session.readonly:
            return False  # hidden: --readonly shows no action that changes the host
        return not (action == "fleet" and len(self.sessions) < 2)

    def action_help(self) -> None:
        sections: list[tuple[str, list[Binding]]] = [
            ("Console", [b for b in self.BINDINGS if isinstance(b, Binding)
                         and self.check_action(b.action.split("(")[0], ())])]
        if self.screen_for(self.current) is not None:
            sections += [("Log pane", _bindings(LogPane.BINDINGS)),
                         ("Checklist", _bindings(Checklist.BINDINGS)),
                         ("Draft diff", _bindings(DraftDiffPane.BINDINGS))]
        sections.append(("Anywhere", [Binding("ctrl+p", "command_palette", "command palette"),
                                      Binding("enter", "", "drill in (evidence)"),
                                      Binding("escape", "", "back / close")]))
        self.push_screen(HelpScreen(sections))

    def action_next_theme(self) -> None:
        names = list(THEMES)
        self.theme = names[(names.index(self.theme) + 1) % len(names)] \
            if self.theme in names else names[0]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_run_checks(self) -> None:
        self._run_checks(self.current)

    def _run_checks(self, host: str) -> None:
        screen = self.screen_for(host)
        if screen is not None:
            screen.checklist.state = ChecklistState(screen.checklist.state.report, running=True)
        self._checks_worker(host)
        self._diff_worker(host)

    @work(group="checks", exclusive=False, exit_on_error=False)
    async def _checks_worker(self, host: str) -> None:
        try:
            report = await self.sessions[host].run_checks()
        except ActionError as exc:
            self.post_message(ChecksCompleted(host, None, str(exc)))
            return
        self.post_message(ChecksCompleted(host, report))

    @work(group="diff", exclusive=False, exit_on_error=False)
    async def _diff_worker(self, host: str) -> None:
        self.post_message(DiffLoaded(host, await self.sessions[host].load_diff()))

    @on(ChecksCompleted)
    def _checks_done(self, message: ChecksCompleted) -> None:
        screen = self.screen_for(message.host)
        if screen is not None:
            report = message.report or screen.checklist.state.report
            screen.checklist.state = ChecklistState(report, running=False, error=message.error)

    @on(DiffLoaded)
    def _diff_done(self, message: DiffLoaded) -> None:
        screen = self.screen_for(message.host)
        if screen is not None:
            screen.diff.diff = message.diff

    @on(Checklist.EvidenceRequested)
    def _evidence(self, message: Checklist.EvidenceRequested) -> None:
        self.push_screen(EvidenceScreen(message.link))

    def action_apply_reference(self) -> None:
        session = self.sessions[self.current]
        if session.readonly:
            self.notify("read-only: refused", severity="warning")
            return
        diff = session.last_diff
        if diff is None or diff.error or not diff.wrong:
            why = "the draft config has no reference to apply" if diff is None or diff.error \
                or not diff.rows else "the draft config already matches the reference"
            self.notify(why, severity="warning")
            return
        changes = "\n".join(f"  {c.line()}" for c in diff.changes)  # JSON values
        body = (f"Write the reference values of {diff.reference} into\n  {diff.path}\n\n"
                f"{changes}\n\nA private backup {diff.path}.bak-<time> is kept. vllm serve "
                "reads it at its next start: restart afterwards (r).")
        def confirmed(ok: bool | None) -> None:
            if ok:
                self._apply_worker(session.name)

        self.push_screen(ConfirmScreen("Apply the reference draft config?", body, "Write"),
                         confirmed)

    @work(group="apply", exclusive=True, exit_on_error=False)
    async def _apply_worker(self, host: str) -> None:
        backup = await self.sessions[host].apply_reference()
        self.notify(f"draft config written; backup {backup}. Restart (r) to load it.",
                    timeout=8)
        self._run_checks(host)

    def action_restart(self, trace: bool = False) -> None:
        session = self.sessions[self.current]
        if session.readonly:
            self.notify("read-only: restart refused", severity="warning")
            return
        if session.name in self._restarting:
            self.notify("a restart is already under way", severity="warning")
            return
        self._plan_worker(session.name, trace)

    @work(group="restart-plan", exclusive=True, exit_on_error=False)
    async def _plan_worker(self, host: str, trace: bool) -> None:
        plan = await self.sessions[host].plan_restart(trace=trace)
        title = "Restart vllm serve with the activation trace?" if trace else \
            "Restart vllm serve?"

        dialog = RestartScreen(title, plan, self.sessions[host].edit_plan)

        def confirmed(ok: bool | None) -> None:
            if ok:
                self._restarting.add(host)
                self._restart_worker(host, dialog.plan)  # with the person's edits

        self.push_screen(dialog, confirmed)

    @work(group="restart", exclusive=False, exit_on_error=False)
    async def _restart_worker(self, host: str, plan: object) -> None:
        def progress(step: RestartStep) -> None:
            self.post_message(RestartProgressed(host, step))

        try:
            result = await self.sessions[host].restart(plan, progress)  # type: ignore[arg-type]
        finally:
            self._restarting.discard(host)
        self.post_message(RestartFinished(host, result))

    @on(RestartProgressed)
    def _restart_progress(self, message: RestartProgressed) -> None:
        screen = self.screen_for(message.host)
        if screen is not None:
            step = message.step
            screen.header.activity = f"restart: {step.stage.value} · {step.message[:80]}"

    @on(RestartFinished)
    def _restart_done(self, message: RestartFinished) -> None:
        result = message.result
        screen = self.screen_for(message.host)
        if screen is not None:
            screen.header.activity = ""
        if result.ok:
            self.notify(f"{message.host}: vllm serve is back (pid {result.new_pid}, "
                        f"{result.total_s:.1f} s)", timeout=6)
            self._run_checks(message.host)
        else:
            lines = "\n".join(result.error_lines[-6:])
            self.notify(f"{message.host}: restart {result.outcome.value}: {result.reason}"
                        + (f"\n{lines}" if lines else ""), severity="error", timeout=15)

    def action_export(self) -> None:
        session = self.sessions[self.current]
        screen = self.screen_for(self.current)
        window = screen.log_pane.visible_lines()[-2000:] if screen is not None else []
        try:
            path = session.export(self.export_dir, window)
        except OSError as exc:
            self.notify(f"export failed: {exc.strerror}: {exc.filename}", severity="error")
            return
        self.notify(f"evidence bundle written: {path}", timeout=8)

    # -- fleet -----------------------------------------------------------------------------------
    def _fleet_row(self, name: str) -> FleetRow:
        session = self.sessions[name]
        snap = session.snapshot
        report = session.last_report
        gpus = snap.sample.gpus if snap.sample else ()
        utils = [g.util_pct for g in gpus if g.util_pct is not None]
        latest = snap.spec_decode.latest
        return FleetRow(name=name, state=snap.link.state.value,
                        gpu_util=sum(utils) / len(utils) if utils else None,
                        acceptance=latest.mean_acceptance_length if latest else None,
                        broken_link=report.broken_link if report else None,
                        checked=report is not None, serve_state=snap.serve_state.value,
                        root_cause=report.root_cause if report else None,
                        checked_at=session.last_checked_at)

    def _fleet_rows(self) -> list[FleetRow]:
        return [self._fleet_row(n) for n in self.sessions]

    def action_fleet(self) -> None:
        """Back to the fleet table, which stays under the host screens."""
        top = self.screen_stack[-1] if self.screen_stack else None
        if len(self.sessions) > 1 and isinstance(top, HostScreen):
            self.pop_screen()

    @on(FleetScreen.HostChosen)
    def _host_chosen(self, message: FleetScreen.HostChosen) -> None:
        self.current = message.host
        self.push_screen(f"host:{message.host}")

    # -- command palette -------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        session = self.sessions[self.current]
        yield SystemCommand("Run the verification chain", "re-run the four checks (c)",
                            self.action_run_checks)
        yield SystemCommand("Export evidence bundle", "engine config, diff, chain, log, GPUs (x)",
                            self.action_export)
        yield SystemCommand("Next theme", "dark / light / high contrast (t)",
                            self.action_next_theme)
        yield SystemCommand("Help: every key", "(?)", self.action_help)
        if not session.readonly:
            yield SystemCommand("Restart vllm serve", "stop the tree, relaunch, verify (r)",
                                self.action_restart)
            yield SystemCommand("Restart with activation trace",
                                "relaunch with the trace hook for this run (R)",
                                lambda: self.action_restart(True))
            yield SystemCommand("Apply reference draft config",
                                "write the reference values, keep a backup (a)",
                                self.action_apply_reference)
        if len(self.sessions) > 1:
            yield SystemCommand("Hosts", "the fleet table (h)", self.action_fleet)
