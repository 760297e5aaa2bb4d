"""`s`: where each process of the server is — the Python stack of every thread of its tree
(py-spy on the host, `console.hostclient.stacks`), one section per process (role and pid), the
innermost frame in vLLM's own code marked, idle threads outside vLLM folded to one line.

A second dump follows the first by `SECOND_DUMP_S` on its own: a thread whose stack did not change
between the two is marked as not moved (a hung engine's step never does). `s` dumps again (and
compares with the dump before), `f` unfolds the idle threads, `y` copies the text.
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
                Binding("y", "copy", "Copy", id="stacks.copy")]

    def __init__(self, session: HostSession, *, second_dump_s: float = SECOND_DUMP_S) -> None:
        super().__init__()
        self.session = session
        self.second_dump_s = second_dump_s
        self.report: StacksReport | None = None
        self.previous: StacksReport | None = None
        self.fold = True
        self.dumps = 0
        """How many dumps have been shown (the tests wait on it)."""

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
