"""`s`: where each process of the server is — the Python stack of every thread of its tree
(py-spy on the host, `console.hostclient.stacks`), one section per process (role and pid), the
innermost frame in vLLM's own code marked, idle threads outside vLLM folded to one line.

A second dump follows the first by `SECOND_DUMP_S` on its own: a thread whose stack did not change
between the two is marked as not moved (a hung engine's step never does). `s` dumps again (and
compares with the dump before), `f` unfolds the idle threads, `y` copies the text. With no
py-spy on the host, `i` offers to install it into the serving interpreter's environment (the
exact `PYTHON -m pip install py-spy`, confirmed first; never in read-only mode), then dumps.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from vllm_console.widgets.status import STATUS_CLASSES, status_style

if TYPE_CHECKING:
    from vllm_console.console.hostclient.stacks import StacksReport
    from vllm_console.console.session.host_session import HostSession

SECOND_DUMP_S = 3.0


class StacksScreen(ModalScreen[None]):
    """Esc goes back; `s` dumps again; `f` folds or unfolds idle threads."""

    COMPONENT_CLASSES = STATUS_CLASSES
    BINDINGS = [Binding("escape,q", "dismiss", "Back", id="stacks.close"),
                Binding("s", "dump", "Dump again", id="stacks.dump"),
                Binding("f", "toggle_fold", "Fold idle", id="stacks.fold"),
                Binding("y", "copy", "Copy", id="stacks.copy"),
                Binding("i", "install", "Install py-spy", id="stacks.install")]

    def __init__(self, session: HostSession, *, second_dump_s: float = SECOND_DUMP_S) -> None:
        super().__init__()
        self.session = session
        self.second_dump_s = second_dump_s
        self.report: StacksReport | None = None
        self.previous: StacksReport | None = None
        self.fold = True
        self.dumps = 0
        """How many dumps have been shown (the tests wait on it)."""
        self.installed = False
        """py-spy was installed from this screen."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="evidence-box"):
            yield Static(f"Stacks · {self.session.name}", id="evidence-title")
            yield Static("dumping the server's processes (py-spy on the host)…",
                         id="stacks-body", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._dump_worker(second=True)

    @work(group="stacks", exclusive=True, exit_on_error=False)
    async def _dump_worker(self, second: bool = False) -> None:
        from vllm_console.console.session.host_session import ActionError

        try:
            report = await self.session.stacks()
        except ActionError as exc:
            self.query_one("#stacks-body", Static).update(Text(str(exc)))
            return
        self._show(report)
        if second and not report.problem:
            await asyncio.sleep(self.second_dump_s)
            try:
                self._show(await self.session.stacks())
            except ActionError as exc:
                self.notify(str(exc), severity="error")

    def _show(self, report: StacksReport) -> None:
        self.previous, self.report = self.report, report
        self.dumps += 1
        self._redraw()

    def _redraw(self) -> None:
        from vllm_console.console.hostclient.stacks_text import MARK, render_stacks

        if self.report is None:
            return
        lines = render_stacks(self.report, previous=self.previous, fold=self.fold)
        if self.can_install():
            from vllm_console.console.transport.host import quote_argv

            offer = f"press i to install it: {quote_argv(list(self.report.install))} " \
                    "(asks first)"
            at = lines.index(self.report.problem) + 1 if self.report.problem in lines else 0
            lines.insert(at, offer)
        self.refresh_bindings()
        if self.previous is None and not self.report.problem:
            lines.insert(1, f"(a second dump in {self.second_dump_s:g} s shows which threads "
                            "did not move)")
        text = Text()
        bold = Style(bold=True)
        for line in lines:
            if line.startswith(("api-server ", "engine-core ", "worker ", "other ",
                                "vLLM watchdog dump ")):
                text.append(line + "\n", style=bold)
            elif line.lstrip().startswith(MARK + " "):
                text.append(line + "\n", style=status_style(self, "warn") + bold)
            elif "NOT MOVED" in line or line.startswith("  not dumped") or \
                    line == self.report.problem:
                text.append(line + "\n", style=status_style(self, "fail") + bold)
            else:
                text.append(line + "\n")
        self.query_one("#stacks-body", Static).update(text)

    def can_install(self) -> bool:
        """py-spy is missing, the report says where it goes, and this session may change the
        host (read-only never offers it)."""
        from vllm_console.console.session.capabilities import Capability

        return bool(self.report is not None and self.report.install
                    and Capability.INSTALL_PY_SPY in self.session.capabilities)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "install":
            return self.can_install()
        return True

    def action_install(self) -> None:
        from vllm_console.console.transport.host import quote_argv
        from vllm_console.console.tui.screens.confirm import ConfirmScreen

        if not self.can_install() or self.report is None:
            return
        report = self.report
        python = report.install[0]
        body = (f"runs on {self.session.name}, as the login user:\n"
                f"  {quote_argv(list(report.install))}\n"
                f"into the serving interpreter's environment ({python}), where the console "
                "looks for py-spy; nothing else is installed or changed. pip fetches py-spy "
                "from the index it is configured with.")

        def confirmed(ok: bool | None) -> None:
            if ok:
                self._install_worker(report)

        self.app.push_screen(ConfirmScreen(f"Install py-spy on {self.session.name}?", body,
                                           "Install"), confirmed)

    @work(group="stacks-install", exclusive=True, exit_on_error=False)
    async def _install_worker(self, report: StacksReport) -> None:
        from vllm_console.console.session.host_session import ActionError

        body = self.query_one("#stacks-body", Static)
        body.update(Text(f"installing py-spy into {report.install[0]}'s environment…"))
        try:
            said = await self.session.install_py_spy(report)
        except ActionError as exc:
            self.notify(str(exc), severity="error", timeout=15)
            self._redraw()
            return
        self.notify(f"py-spy installed: {said}", timeout=6)
        self.installed = True
        self._dump_worker(second=True)

    def action_dump(self) -> None:
        self._dump_worker()

    def action_toggle_fold(self) -> None:
        self.fold = not self.fold
        self._redraw()

    def action_copy(self) -> None:
        from vllm_console.console.hostclient.stacks_text import render_stacks

        if self.report is not None:
            self.app.copy_to_clipboard("\n".join(render_stacks(self.report, fold=False)))
            self.notify("copied the stacks (OSC 52)", timeout=3)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
