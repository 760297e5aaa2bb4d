"""One host's screen: its panes (`HostView`) and its actions — checks, restart, apply the
reference, export — each run in a worker of the screen, with what it reports shown on it.

The screen owns its host's flow (as posting's `MainScreen` does): the app opens the session
and routes telemetry to every host's screen; the keys of a host act on that host's screen. A
screen is made before its session exists (the session opens after the first frame): until
`attach`, its keys are shown disabled. What the session cannot do (`capabilities`: a URL-only
server has no log, GPUs or checks) is one line in the pane it would fill, and its key is not
offered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual import on, work
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from vllm_console.console.session.capabilities import SERVER_ONLY, Capability
from vllm_console.console.tui.screens.evidence import EvidenceScreen
from vllm_console.console.tui.screens.host_view import HostView
from vllm_console.widgets.checklist import Checklist, ChecklistState

if TYPE_CHECKING:  # the sessions' modules load after the first frame
    from pathlib import Path

    from vllm_console.checks.draft_diff import DraftDiff
    from vllm_console.console.restart import RestartPlan, RestartResult, RestartStep
    from vllm_console.console.session.host_session import HostSession

HOST_ONLY = {Capability.GPUS: "GPUs", Capability.LOG: "serve log",
             Capability.ENGINE_CONFIG: "engine config", Capability.CHECKS: "checks",
             Capability.DRAFT_DIFF: "draft diff", Capability.RESTART: "restart"}
"""What a session on the URL alone lacks, as its one line names it."""
ACTIONS = {"run_checks": Capability.CHECKS, "restart": Capability.RESTART,
           "servers": Capability.LOG,
           "apply_reference": Capability.APPLY_REFERENCE, "export": Capability.EXPORT,
           "stacks": Capability.STACKS, "debug_restart": Capability.RESTART}
"""The host's actions and what each needs of the session."""


def server_only_line(missing: Iterable[Capability]) -> str:
    """The one line a URL-only screen gives what needs the host."""
    lacking = set(missing)
    host_only = [label for c, label in HOST_ONLY.items() if c in lacking]
    # 118 characters with every item: the whole line fits a 120-column terminal.
    return (f"needs SSH: {', '.join(host_only)} · add ssh = \"user@host\" beside url "
            "(hosts file)")


def url_only_line() -> str:
    """That line for a session on the URL alone, before it is made (`PendingSession.url_only`)."""
    return server_only_line(c for c in Capability if c not in SERVER_ONLY)


class HostScreen(HostView):
    """The console for one host."""

    BINDINGS = [
        Binding("c", "run_checks", "Checks", tooltip="re-run the verification chain",
                id="host.checks"),
        Binding("r", "restart", "Restart", tooltip="stop the tree, relaunch, verify",
                id="host.restart"),
        Binding("R", "restart(True)", "Traced restart",
                tooltip="relaunch with the activation trace for this run",
                id="host.restart_traced"),
        Binding("a", "apply_reference", "Apply reference",
                tooltip="write the reference values, keep a backup", id="host.apply_reference"),
        Binding("x", "export", "Export",
                tooltip="evidence bundle: engine config, diff, chain, log, GPUs",
                id="host.export"),
        Binding("s", "stacks", "Stacks",
                tooltip="where each vLLM process is: py-spy dump of the server's tree",
                id="host.stacks"),
        Binding("X", "export(True)", "Export + diagnostics",
                tooltip="the bundle with the stacks, watchdog dumps and vllm collect-env",
                id="host.export_diagnostics"),
        Binding("D", "debug_restart", "Debug restart",
                tooltip="relaunch with vLLM's debug switches (DEBUG log, NCCL_DEBUG, the "
                        "watchdog); again: a plain restart without them",
                id="host.restart_debug"),
        # Not in the footer (most hosts run one server): the header says "server i of n"
        # where there are several, `?` and the palette list it.
        Binding("p", "servers", "Servers",
                tooltip="the host's vLLM servers: choose the one to work on",
                id="host.servers", show=False),
    ]

    class ServerChosen(Message):
        """The person chose another of the host's servers (the switcher)."""

        def __init__(self, host: str, port: int) -> None:
            super().__init__()
            self.host = host
            self.port = port

    def __init__(self, host_name: str, *, export_dir: Path, **view: object) -> None:
        super().__init__(host_name, **view)  # type: ignore[arg-type]
        self.session: HostSession | None = None
        """The host's session, once open (`attach`)."""
        self.export_dir = export_dir
        self._checks_started = False  # the chain ran (or runs) once at least

    def attach(self, session: HostSession) -> None:
        """The session is open: the keys act, the panes it cannot fill say why."""
        self.session = session
        missing = {c: session.why_not(c) for c in Capability if c not in session.capabilities}
        if Capability.CHECKS in missing:
            self.show_checks(ChecklistState(error=missing[Capability.CHECKS]))
        if Capability.DRAFT_DIFF in missing:
            from vllm_console.checks.draft_diff import DraftDiff

            self.show_diff(DraftDiff(error=missing[Capability.DRAFT_DIFF]))
        if {Capability.GPUS, Capability.LOG, Capability.CHECKS} <= missing.keys():
            self.show_server_only(server_only_line(missing))
        if session.source_summary() is not None:  # the header says what this view is
            self.set_serve_summary(lambda: session.source_summary() or "")
        if missing.keys() & {Capability.GPUS, Capability.ENGINE_CONFIG, Capability.LOG}:
            self.show_unavailable(
                gpu=missing.get(Capability.GPUS, ""),
                engine=missing.get(Capability.ENGINE_CONFIG, ""),
                log=[missing[c] for c in (Capability.LOG, Capability.RESTART) if c in missing])
        self.refresh_bindings()

    def can(self, capability: Capability) -> bool:
        return self.session is not None and capability in self.session.capabilities

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        needed = ACTIONS.get(action)
        if action == "export" and parameters[:1] == (True,):
            needed = Capability.STACKS  # `X`: the diagnostics need the host (py-spy)
        if action == "search_log" and isinstance(self.focused, Input):
            return False  # `/` is a character of the search (or of the restart's env)
        if self.server_only and (action in ("next_tab", "toggle_maximize", "search_log")
                                 or action == "maximize_pane"
                                 and parameters[:1] not in (("spec",),)):
            return False  # those panes are hidden: one line says they need SSH
        if needed is None:
            return True
        if self.session is None:
            return None  # shown, disabled: the session opens right after the first frame
        return needed in self.session.capabilities  # hidden: --readonly, or URL only

    # -- checks ----------------------------------------------------------------------------
    def run_became_ready(self) -> None:
        self.run_checks()

    def engine_alarm_changed(self, alarm: bool) -> None:
        # The header turned red (or back): the checklist must not stay `unknown` until `c`.
        self.run_checks()

    def action_run_checks(self) -> None:
        self.run_checks()

    def checks_at_start(self) -> None:
        """The first run of the chain, for a server that did not become ready since the
        console opened (one that did was checked then)."""
        if not self._checks_started:
            self.run_checks()

    def run_checks(self) -> None:
        """Run the chain and load the draft diff (when the session can)."""
        if not self.can(Capability.CHECKS):
            return
        self._checks_started = True
        self.show_checks(ChecklistState(running=True))
        self._checks_worker()
        if self.can(Capability.DRAFT_DIFF):
            self._diff_worker()

    # Exclusive: a newer run cancels the one going, whose answer would describe the host
    # as it was before (and could come last, over the newer one's).
    @work(group="checks", exclusive=True, exit_on_error=False)
    async def _checks_worker(self) -> None:
        from vllm_console.console.session.host_session import ActionError

        assert self.session is not None
        try:
            report = await self.session.run_checks()
        except ActionError as exc:
            self.show_checks(ChecklistState(None, error=str(exc)))
            return
        self.show_checks(ChecklistState(report))

    @work(group="diff", exclusive=True, exit_on_error=False)
    async def _diff_worker(self) -> None:
        assert self.session is not None
        diff: DraftDiff = await self.session.load_diff()
        self.show_diff(diff)

    @on(Checklist.EvidenceRequested)
    def _evidence(self, message: Checklist.EvidenceRequested) -> None:
        self.app.push_screen(EvidenceScreen(message.link))

    # -- apply the reference ---------------------------------------------------------------
    def action_apply_reference(self) -> None:
        session = self.session
        if session is None or not self.can(Capability.APPLY_REFERENCE):
            return
        diff = session.last_diff
        if diff is None or diff.error or not diff.wrong:
            why = "the draft config has no reference to apply" if diff is None or diff.error \
                or not diff.rows else "the draft config already matches the reference"
            self.notify(why, severity="warning")
            return
        changes = "\n".join(f"  {c.line()}" for c in diff.changes)  # JSON values
        where = f"\n  (inside {diff.inside}: written through its mount on the host)" \
            if diff.inside else ""
        body = (f"Write the reference values of {diff.reference} into\n  {diff.path}{where}\n\n"
                f"{changes}\n\nA private backup <file>.bak-<time> is kept beside it. vllm "
                "serve reads it at its next start: restart afterwards (r).")

        def confirmed(ok: bool | None) -> None:
            if ok:
                self._apply_worker()

        from vllm_console.console.tui.screens.confirm import ConfirmScreen

        self.app.push_screen(ConfirmScreen("Apply the reference draft config?", body, "Write"),
                             confirmed)

    @work(group="apply", exclusive=True, exit_on_error=False)
    async def _apply_worker(self) -> None:
        assert self.session is not None
        backup = await self.session.apply_reference()
        self.notify(f"draft config written; backup {backup}. Restart (r) to load it.",
                    timeout=8)
        self.run_checks()

    # -- restart ---------------------------------------------------------------------------
    def action_restart(self, trace: bool = False) -> None:
        if not self.can(Capability.RESTART):
            return
        if self.restarting:
            self.notify("a restart is already under way", severity="warning")
            return
        self._plan_worker(trace)

    def action_debug_restart(self) -> None:
        if not self.can(Capability.RESTART):
            return
        if self.restarting:
            self.notify("a restart is already under way", severity="warning")
            return
        self._debug_plan_worker()

    @work(group="restart-plan", exclusive=True, exit_on_error=False)
    async def _plan_worker(self, trace: bool) -> None:
        assert self.session is not None
        plan = await self.session.plan_restart(trace=trace)
        self._confirm_restart("Restart vllm serve with the activation trace?" if trace else
                              "Restart vllm serve?", plan)

    @work(group="restart-plan", exclusive=True, exit_on_error=False)
    async def _debug_plan_worker(self) -> None:
        assert self.session is not None
        plan, debug = await self.session.plan_debug_restart()
        self._confirm_restart("Restart vllm serve with the debug switches?" if debug else
                              "Restart vllm serve without the debug switches?", plan)

    def _confirm_restart(self, title: str, plan: RestartPlan) -> None:
        from vllm_console.console.tui.screens.restart import RestartScreen

        session = self.session
        assert session is not None
        dialog = RestartScreen(title, plan, session.edit_plan)

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.begin_restart()
                self._restart_worker(dialog.plan)  # with the person's edits

        self.app.push_screen(dialog, confirmed)

    @work(group="restart", exclusive=False, exit_on_error=False)
    async def _restart_worker(self, plan: RestartPlan) -> None:
        assert self.session is not None
        result: RestartResult | None = None
        try:
            result = await self.session.restart(plan, self._restart_progress)
        finally:
            self.end_restart()
        self._restart_done(result)

    def _restart_progress(self, step: RestartStep) -> None:
        self.show_restart_step(step)

    def _restart_done(self, result: RestartResult) -> None:
        if result.ok:
            self.notify(f"{self.host_name}: vllm serve is back (pid {result.new_pid}, "
                        f"{result.total_s:.1f} s)", timeout=6)
            self.run_checks()
        else:
            lines = "\n".join(result.error_lines[-6:])
            self.notify(f"{self.host_name}: restart {result.outcome.value}: {result.reason}"
                        + (f"\n{lines}" if lines else ""), severity="error", timeout=15)

    # -- stacks ----------------------------------------------------------------------------
    def action_stacks(self) -> None:
        if self.session is None or not self.can(Capability.STACKS):
            return
        from vllm_console.console.tui.screens.stacks import StacksScreen

        self.app.push_screen(StacksScreen(self.session))
    # -- several servers -------------------------------------------------------------------
    def action_servers(self) -> None:
        if self.session is None:
            return
        from vllm_console.console.telemetry.servers_view import switcher_rows
        from vllm_console.console.tui.screens.servers import ServerSwitcher

        rows = switcher_rows(self.session.snapshot)
        if not rows:
            self.notify("no vLLM server found on this host yet", severity="information")
            return

        def chosen(port: int | None) -> None:
            if port is not None:
                self.post_message(self.ServerChosen(self.host_name, port))

        self.app.push_screen(ServerSwitcher(self.host_name, rows), chosen)

    # -- export ----------------------------------------------------------------------------
    def action_export(self, diagnostics: bool = False) -> None:
        """The bundle; with the diagnostics (stacks, watchdog dumps, collect-env) when asked
        (`X`) or when the engine is stalled or dead, which is when they tell the most."""
        if self.session is None or not self.can(Capability.EXPORT):
            return
        window = self.log_pane.visible_lines()[-2000:] if self.ready else []
        engine = self.session.snapshot.engine_state()[0].value
        if (diagnostics or engine in ("stalled", "dead")) and self.can(Capability.STACKS):
            self.notify("gathering the stacks and vllm collect-env for the bundle…", timeout=5)
            self._export_worker(window)
            return
        self._write_export(window)

    @work(group="export", exclusive=True, exit_on_error=False)
    async def _export_worker(self, window: list[str]) -> None:
        assert self.session is not None
        self._write_export(window, await self.session.diagnostics())

    def _write_export(self, window: list[str], diagnostics: dict[str, object] | None = None
                      ) -> None:
        assert self.session is not None
        try:
            path = self.session.export(self.export_dir, window, diagnostics)
        except OSError as exc:
            self.notify(f"export failed: {exc.strerror}: {exc.filename}", severity="error")
            return
        self.notify(f"evidence bundle written: {path}", timeout=8)
