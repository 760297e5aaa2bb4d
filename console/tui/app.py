"""The Textual application: one `HostScreen` per host, a fleet table when there are several.

Data flows one way: each `HostSession` runs its telemetry in a worker and reports immutable
events; the app routes them, as messages, to the host's screen (`HostScreen.show`), which owns
that host's state and renders it. The host's actions (checks, restart, apply reference,
export) are its screen's (`console/tui/screens/host.py`); the app keeps what is the whole
console's: opening the sessions, the telemetry, the fleet table, help, themes, the palette,
and the one place where a worker's failure becomes a notification (`on_worker_state_changed`).

Start-up: the first frame needs Textual and the screens' skeleton only. A host given as a
`PendingSession` (the command line's way) gets its session made after that frame is painted,
and every host's telemetry and first checks start then (docs/design.md, "Start-up"); until
then the host's actions are shown disabled.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gc
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs
from textual import on
from textual.app import SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from vllm_console.console import APP_NAME
from vllm_console.console.output.display import safe_text
from vllm_console.console.output.messages import failure_line
from vllm_console.console.session.pending import PendingSession
from vllm_console.console.telemetry import events as ev
from vllm_console.console.transport.host import ConnectionState
from vllm_console.console.tui.driver import QuietApp
from vllm_console.console.tui.screens.evidence import EvidenceScreen
from vllm_console.console.tui.screens.fleet import FleetRow, FleetScreen
from vllm_console.console.tui.screens.host import HostScreen, url_only_line
from vllm_console.console.tui.screens.host_view import HostView
from vllm_console.console.tui.ui_state import load_ui_state, save_ui_state
from vllm_console.themes import DEFAULT_THEME, THEMES, stylesheet_path
from vllm_console.widgets.checklist import Checklist
from vllm_console.widgets.draft_diff import DraftDiffPane
from vllm_console.widgets.log_pane import LogPane

if TYPE_CHECKING:  # the sessions' modules load after the first frame (`_open_sessions`)
    from vllm_console.checks.profile import Acceptance
    from vllm_console.console.session.host_session import HostSession

WORKERS_END_S = 10.0
"""How long leaving waits for the cancelled workers' own clean-up (a restart's log drain)."""


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


class ConsoleApp(QuietApp[int]):
    """vllm-console."""

    TITLE = "vllm-console"
    CSS_PATH = stylesheet_path()
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        # Textual's ctrl+c only says how to quit, in a toast: here it quits, as in a shell.
        Binding("ctrl+c", "quit", "Quit", show=False, id="app.ctrl_c"),
        Binding("question_mark", "help", "Help", tooltip="every key", id="app.help"),
        Binding("t", "next_theme", "Next theme", tooltip="dark / light / high contrast",
                show=False, id="app.theme"),
        Binding("h", "fleet", "Hosts", tooltip="the fleet table", id="app.fleet"),
        Binding("tab", "app.focus_next", "Next pane", show=False, id="app.focus_next"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False,
                id="app.focus_previous"),
    ]

    def __init__(self, sessions: Sequence[HostSession | PendingSession], *,
                 theme: str | None = None, export_dir: Path | None = None,
                 autostart_checks: bool = True) -> None:
        super().__init__()
        if not sessions:
            raise ValueError("no hosts")
        self.sessions: dict[str, HostSession] = {
            s.name: s for s in sessions if not isinstance(s, PendingSession)}
        """Every host's session, in the given order once they are open (`_open_sessions`)."""
        self._pending = [s for s in sessions if isinstance(s, PendingSession)]
        self._order = [s.name for s in sessions]
        self.current = sessions[0].name
        self.export_dir = export_dir or Path(platformdirs.user_data_dir(APP_NAME)) / "exports"
        self._screens = {s.name: self._host_screen(s) for s in sessions}
        self._autostart_checks = autostart_checks
        self._switches = 0  # servers chosen in the switcher (`_server_chosen`)
        # The console's themes only, from the start (the stylesheet names their status
        # variables): Textual's own lack the status colours, and the palette's Theme entry
        # offers what is registered.
        for name in list(self.available_themes):
            self.unregister_theme(name)
        for console_theme in THEMES.values():
            self.register_theme(console_theme)
        wanted = theme or load_ui_state().get("theme") or DEFAULT_THEME
        self.theme = wanted if wanted in THEMES else DEFAULT_THEME

    # -- set-up -------------------------------------------------------------------------------
    def _host_screen(self, session: HostSession | PendingSession, generation: int = 0
                     ) -> HostScreen:
        """The host's screen, made before its session is open; what it asks of the session
        before then is answered empty (the backlog) or None (the expected acceptance, shown
        with the first sample)."""
        name = session.name

        def backlog() -> list[str]:
            opened = self.sessions.get(name)
            follower = opened.telemetry.follower if opened is not None else None
            return [e.display() for e in follower.recent()] if follower is not None else []

        def expected() -> Acceptance | None:
            opened = self.sessions.get(name)
            return opened.expected_acceptance() if opened is not None else None

        summary = None if isinstance(session, PendingSession) or \
            session.source_summary() is None else session.source_summary
        screen = HostScreen(
            name, export_dir=self.export_dir, readonly=session.readonly,
            scenario=session.scenario, expected_acceptance=expected, log_backlog=backlog,
            serve_summary=summary, generation=generation)
        if not isinstance(session, PendingSession):
            screen.attach(session)
        elif session.url_only:
            screen.show_server_only(url_only_line())
        return screen

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        for name in self._order:
            self.install_screen(self._screens[name], name=f"host:{name}")
        if len(self._order) > 1:
            self.push_screen(FleetScreen(self._fleet_rows()))
        else:
            self.push_screen(f"host:{self.current}")
        self.call_after_refresh(lambda: self.run_worker(self._open_sessions(), name="open",
                                                        group="open", exit_on_error=False))

    async def _open_sessions(self) -> None:
        """Once the first frame is painted: make the pending sessions (their imports are most
        of the console's start-up), start every host's telemetry and, 1.5 s later, its checks."""
        opened = {}
        for pending in self._pending:
            try:
                opened[pending.name] = await pending.open()
            except Exception as exc:  # noqa: BLE001 - said on one line, as the CLI does
                self.exit(return_code=2,
                          message=failure_line(f"vllm-console: {pending.name}", exc))
                return
        self._pending = []
        self.sessions = {name: self.sessions.get(name) or opened[name] for name in self._order}
        for name, session in opened.items():
            self._screens[name].attach(session)  # the host's actions are enabled now
        for session in self.sessions.values():
            self._start_telemetry(session)
        if self._autostart_checks:
            for screen in self._screens.values():
                self.set_timer(1.5, screen.checks_at_start)  # unless it became ready
        self.refresh_bindings()
        # Everything built so far (Textual, the widgets, the modules) lives as long as the app:
        # take it out of the cyclic collector's scans, whose full passes otherwise stall the UI
        # for 100 ms and more during a log flood (benchmarks/findings.md). `vllm-console`
        # starts with the collector off (`console.cli.parser.main`): on from here.
        gc.freeze()
        gc.enable()

    def _remember_theme(self, theme: object) -> None:
        save_ui_state({"theme": self.theme})

    def _start_telemetry(self, session: HostSession) -> None:
        telemetry = session.telemetry

        def report(event: ev.TelemetryEvent) -> None:
            if session.telemetry is telemetry:  # not one the switcher has replaced
                self.post_message(TelemetryArrived(session.name, event))

        self.run_worker(session.run(report), name=f"telemetry:{session.name}",
                        group=f"telemetry:{session.name}", exit_on_error=False)

    async def on_unmount(self) -> None:
        # The workers end before the loop does: one still starting a process when the loop's
        # own teardown cancels every task (asyncio's pipe-connecting one too) waits forever,
        # and the console would not give the shell back. Textual cancels them on the way out
        # without waiting; some still clean up on the host (the restart reads the log's rest).
        self.workers.cancel_all()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(worker.wait() for worker in self.workers),
                                                  return_exceptions=True), WORKERS_END_S)
        for session in self.sessions.values():
            with contextlib.suppress(Exception):  # leaving anyway
                await session.close()

    # -- one place for worker failures ----------------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            from vllm_console.console.session.host_session import ActionError

            error = event.worker.error
            message = str(error) if isinstance(error, ActionError) else \
                f"{event.worker.name}: {type(error).__name__}: {error}"
            self.notify(message, severity="error", timeout=8)

    # -- telemetry to the host screens ----------------------------------------------------------
    def host_screen(self, host: str) -> HostScreen:
        """The host's screen, shown or not: it holds the host's state."""
        return self._screens[host]

    def screen_for(self, host: str) -> HostScreen | None:
        """The host's screen when it is shown (mounted), else None."""
        screen = self._screens.get(host)
        return screen if screen is not None and screen.ready else None

    @on(TelemetryArrived)
    def _telemetry(self, message: TelemetryArrived) -> None:
        # NoMatches: the screen is being torn down (exit) while events still arrive.
        with contextlib.suppress(NoMatches):
            self._screens[message.host].show(self.sessions[message.host].snapshot,
                                             message.event)
        top = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(top, FleetScreen):
            top.update_row(self._fleet_row(message.host))  # applied at most twice a second
        if isinstance(message.event, ev.ServeWarning):  # a stale `log` in the hosts file, say
            self.notify(safe_text(f"{message.host}: {message.event.text}", 600),
                        severity="warning", timeout=20, markup=False)  # paths are data

    # -- keys ---------------------------------------------------------------------------------
    def _key_sections(self) -> list[tuple[str, DOMNode | None, list[Binding]]]:
        """Every key, by where it acts, with the node whose action it runs: one source for
        `?` and the command palette."""
        sections: list[tuple[str, DOMNode | None, list[Binding]]] = [
            ("Console", self, _bindings(self.BINDINGS))]
        screen = self.screen_for(self.current)
        if screen is not None:
            sections += [
                ("Host screen", screen, [
                    b for b in _bindings([*HostScreen.BINDINGS, *HostView.BINDINGS])
                    if screen.check_action(b.action.split("(")[0], ()) is not False]),
                ("Log pane", screen.log_pane, _bindings(LogPane.BINDINGS)),
                ("Checklist", screen.checklist, _bindings(Checklist.BINDINGS)),
                ("Draft diff", screen.diff, _bindings(DraftDiffPane.BINDINGS)),
                ("Evidence", None, _bindings(EvidenceScreen.BINDINGS))]
        sections.append(("Anywhere", None, [
            Binding("ctrl+p", "command_palette", "command palette"),
            Binding("enter", "", "drill in (evidence)"),
            Binding("escape", "", "back / close / restore a maximised pane"),
            Binding("left,right", "", "switch tabs (Draft diff / Engine config) on the tab bar"),
        ]))
        return sections

    def action_help(self) -> None:
        from vllm_console.console.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen([(title, bindings)
                                     for title, _, bindings in self._key_sections()]))

    def action_next_theme(self) -> None:
        names = list(THEMES)
        self.theme = names[(names.index(self.theme) + 1) % len(names)] \
            if self.theme in names else names[0]
        self.notify(f"theme: {self.theme}", timeout=2)

    # -- fleet -----------------------------------------------------------------------------------
    def _fleet_row(self, name: str) -> FleetRow:
        session = self.sessions.get(name)
        if session is None:  # not open yet
            return FleetRow(name=name, state=ConnectionState.CONNECTING.value, gpu_util=None,
                            acceptance=None, broken_link=None, checked=False)
        snap = session.snapshot
        report = session.last_report
        gpus = snap.sample.gpus if snap.sample else ()
        utils = [g.util_pct for g in gpus if g.util_pct is not None]
        shown = snap.spec_decode.shown
        latest = shown[0] if shown is not None else None
        expected = session.expected_acceptance() if latest else None
        engine, _reason = snap.engine_state()
        ttft = (snap.serving.latency or {}).get("ttft_s")
        load = snap.load
        return FleetRow(name=name, state=snap.link.state.value,
                        gpu_util=sum(utils) / len(utils) if utils else None,
                        acceptance=latest.mean_acceptance_length if latest else None,
                        broken_link=report.broken_link if report else None,
                        checked=report is not None, serve_state=snap.serve_state.value,
                        root_cause=report.root_cause if report else None,
                        checked_at=session.last_checked_at,
                        acceptance_low=expected.is_low(latest.mean_acceptance_length)
                        if expected is not None and latest is not None else None,
                        engine=engine.value, ttft_p99=ttft.get("p99") if ttft else None,
                        running=load.running if load is not None else None,
                        waiting=load.waiting if load is not None else None,
                        engines=snap.serving.engines,
                        servers=snap.servers if len(snap.servers) > 1 else ())

    def _fleet_rows(self) -> list[FleetRow]:
        return [self._fleet_row(n) for n in self._order]

    def action_fleet(self) -> None:
        """Back to the fleet table, which stays under the host screens."""
        if len(self._order) < 2:
            self.notify("one host: there is no fleet table (it lists the hosts when the "
                        "console watches several)", severity="information", timeout=5)
            return
        top = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(top, HostScreen):
            self.pop_screen()

    @on(HostScreen.ServerChosen)
    async def _server_chosen(self, message: HostScreen.ServerChosen) -> None:
        """Another of the host's servers: its own telemetry and a fresh screen, so that
        every pane (log, engine config, spec decoding, serving, checklist, draft diff)
        shows that server alone."""
        name = message.host
        session = self.sessions.get(name)
        if session is None:
            return
        session.choose_server(message.port)
        old = self._screens[name]
        self._switches += 1
        fresh = self._host_screen(session, generation=self._switches)
        self._screens[name] = fresh
        if old in self.screen_stack:
            while self.screen_stack[-1] is not old:
                await self.pop_screen()
            await self.pop_screen()
        self.uninstall_screen(old)
        self.install_screen(fresh, name=f"host:{name}")
        await self.push_screen(f"host:{name}")
        self._start_telemetry(session)
        if self._autostart_checks:
            self.set_timer(1.5, fresh.checks_at_start)
        self.refresh_bindings()

    @on(FleetScreen.HostChosen)
    def _host_chosen(self, message: FleetScreen.HostChosen) -> None:
        self.current = message.host
        self.push_screen(f"host:{message.host}")

    # -- command palette -------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every action with its key, from the same bindings as `?`; of Textual's own, only
        Theme (the console's themes) and Screenshot: its Quit, Keys and Maximize duplicate
        q, ? and z."""
        for title, node, bindings in self._key_sections():
            actions: set[str] = set()
            for binding in bindings:
                command = _command(title, node, binding, self.get_key_display(binding))
                if command is not None and binding.action not in actions:
                    actions.add(binding.action)  # q and ctrl+c: one Quit
                    yield command
        for command in super().get_system_commands(screen):
            if command.title in ("Theme", "Screenshot"):
                yield command


def _command(section: str, node: DOMNode | None, binding: Binding,
             key: str) -> SystemCommand | None:
    """The palette entry of a key binding: "Log pane: Search", "key /"; None for a key with
    no action of its own (enter, esc) or one that needs a parameter the palette cannot give."""
    name, _, args = binding.action.partition("(")
    action = getattr(node, f"action_{name.removeprefix('app.')}", None) if node else None
    if action is None or not binding.description:
        return None
    title = f"{section}: {binding.description}"
    help_ = f"key {key}" + (f" · {binding.tooltip}" if binding.tooltip else "")
    value = args.rstrip(")")
    if value:
        try:
            argument = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None
        return SystemCommand(title, help_, lambda: action(argument))
    return SystemCommand(title, help_, action)
