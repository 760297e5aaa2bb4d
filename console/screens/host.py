"""One host's screen: header, GPUs, spec decode, checklist, draft diff / engine config, log.

The screen only renders: the app hands it immutable snapshots (`apply`), and its widgets post
messages up. It never talks to the host.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.message import Message
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from widgets.checklist import Checklist, ChecklistState
from widgets.draft_diff import DraftDiffPane
from widgets.engine_tree import EngineTree, EngineView
from widgets.gpu_pane import GpuPane, GpuView
from widgets.host_header import HostHeader
from widgets.key_footer import KeyFooter
from widgets.log_pane import LogPane
from widgets.spec_pane import SpecPane, SpecView


class HostScreen(Screen[None]):
    """The console for one host."""

    # Textual repaints the whole screen when focus moves (`focused` repaints); the styles
    # that change (`:focus-within` borders) repaint their own widgets (docs/benchmarks.md).
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    class Shown(Message):
        """The screen is composed: the app fills it from what it already knows."""

        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def __init__(self, host_name: str, *, readonly: bool = False, scenario: str = "",
                 log_lines: int = 20_000) -> None:
        super().__init__(name=host_name, id=f"host-{abs(hash(host_name))}")
        self.host_name = host_name
        self._readonly = readonly
        self._scenario = scenario
        self._log_lines = log_lines
        self.ready = False

    def compose(self) -> ComposeResult:
        header = HostHeader(id="header")
        header.host_name = self.host_name
        header.readonly = self._readonly
        header.scenario = self._scenario
        yield header
        with Horizontal(id="top-row"):
            gpu = GpuPane(id="gpus", classes="pane")
            gpu.border_title = "GPUs"
            yield gpu
            spec = SpecPane(id="spec", classes="pane")
            spec.border_title = "Speculative decoding"
            yield spec
        with Horizontal(id="middle-row"):
            checklist = Checklist(id="checklist", classes="pane")
            checklist.border_title = "Checklist"
            yield checklist
            with TabbedContent(id="config-tabs", classes="pane"):
                with TabPane("Draft config diff", id="tab-diff"):
                    yield DraftDiffPane(id="diff")
                with TabPane("Engine config", id="tab-engine"):
                    yield EngineTree(id="engine")
        log = LogPane(self._log_lines, id="log-pane")
        log.add_class("pane")
        log.border_title = "Serve log"
        yield log
        yield KeyFooter()

    def on_mount(self) -> None:
        try:
            self._widgets: dict[str, Widget] = {
                "header": self.query_one(HostHeader), "gpus": self.query_one(GpuPane),
                "spec": self.query_one(SpecPane), "checklist": self.query_one(Checklist),
                "diff": self.query_one(DraftDiffPane), "engine": self.query_one(EngineTree),
                "log_pane": self.query_one(LogPane)}
        except NoMatches:
            return  # mounted while the app shuts down: stays not ready, never filled
        self.query_one("#checklist", Checklist).state = ChecklistState()
        self.query_one("#gpus", GpuPane).view = GpuView()
        self.query_one("#spec", SpecPane).view = SpecView()
        self.query_one("#engine", EngineTree).view = EngineView()
        self.query_one("#log-pane #log").focus()
        self.ready = True
        self.post_message(self.Shown(self.host_name))

    def on_unmount(self) -> None:
        self.ready = False

    # Typed accessors for the app (it sets attributes; widgets never call each other). Kept
    # from mount, so that a message arriving while the screen is torn down (at exit) sets an
    # attribute on a detached widget instead of failing a query.
    @property
    def header(self) -> HostHeader:
        return self._widgets["header"]  # type: ignore[return-value]

    @property
    def gpus(self) -> GpuPane:
        return self._widgets["gpus"]  # type: ignore[return-value]

    @property
    def spec(self) -> SpecPane:
        return self._widgets["spec"]  # type: ignore[return-value]

    @property
    def checklist(self) -> Checklist:
        return self._widgets["checklist"]  # type: ignore[return-value]

    @property
    def diff(self) -> DraftDiffPane:
        return self._widgets["diff"]  # type: ignore[return-value]

    @property
    def engine(self) -> EngineTree:
        return self._widgets["engine"]  # type: ignore[return-value]

    @property
    def log_pane(self) -> LogPane:
        return self._widgets["log_pane"]  # type: ignore[return-value]
