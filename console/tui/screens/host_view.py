"""What one host's screen shows: header, serving strip, GPUs, spec decode, checklist, draft
diff / engine config, log (`HostView`; `HostScreen` in `host.py` adds the host's actions). On a
session that reaches the server alone (URL only), the panes that need the host give their room
to the serving pane (load and its history, outcomes, request shapes), the latency table and the
spec pane, and one line says they need SSH.

The view owns its host's state: the app routes every telemetry event of the host to
`show(snapshot, event)`, mounted or not (a host behind the fleet table keeps its history), and
the view renders what it holds when it is shown and on each change. It never talks to the
host; what its actions report comes in through `show_checks`, `show_diff`, `show_restart_step`.

Layouts: below ~120x40 the compact layout keeps the acceptance figure, the checklist verdicts
and the root cause on screen and hides the GPUs and the config tabs (1-5 maximise a pane, `z`
the focused one); from 60 rows up, checklist summaries wrap instead of being cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane

from vllm_console.checks.verdicts import LINK_IDS
from vllm_console.console.telemetry import events as ev
from vllm_console.console.telemetry.history import AcceptanceHistory, GpuHistory
from vllm_console.console.telemetry.servers_view import gpu_owners, header_words
from vllm_console.console.telemetry.startup import StartupState
from vllm_console.console.transport.host import ConnectionState, LinkStatus
from vllm_console.console.tui.serving_figures import ServingFigures
from vllm_console.widgets.checklist import Checklist, ChecklistState
from vllm_console.widgets.draft_diff import DraftDiffPane
from vllm_console.widgets.engine_tree import EngineTree, EngineView
from vllm_console.widgets.gpu_pane import GpuPane, GpuView
from vllm_console.widgets.host_header import HostHeader, Sources, describe_age
from vllm_console.widgets.key_footer import KeyFooter
from vllm_console.widgets.latency_table import LatencyTable, LatencyView
from vllm_console.widgets.log_pane import LogPane
from vllm_console.widgets.serving_pane import ServingPane, ServingPaneView
from vllm_console.widgets.serving_strip import ServingStrip, ServingView
from vllm_console.widgets.spec_pane import SpecPane, SpecView

if TYPE_CHECKING:  # not needed for the first frame (docs/design.md, "Start-up")
    from textual.timer import Timer

    from vllm_console.checks.draft_diff import DraftDiff
    from vllm_console.checks.profile import Acceptance
    from vllm_console.console.restart import RestartStep
    from vllm_console.console.telemetry.snapshot import HostSnapshot

COMPACT_BELOW = (120, 40)
"""Columns, rows: below either, the compact layout."""
TALL_FROM = 60
SERVING_FULL_FROM = 46
"""Rows from which the serving strip has its three lines (below: one, as in the compact
layout, so the log keeps its rows at 120x40)."""
SERVING_TRENDS_FROM = 50
"""Rows from which the serving strip adds a line of trends (sparklines)."""
"""Rows from which checklist summaries wrap over several lines instead of being cut."""
URL_SPEC_FULL_FROM = 30
"""Rows from which a URL-only screen's spec pane keeps its per-position rows when compact."""
PANES = {"1": ("gpus", "GPUs"), "2": ("spec", "speculative decoding"),
         "3": ("checklist", "checklist"), "4": ("config-tabs", "draft diff / engine config"),
         "5": ("log-pane", "serve log")}
"""Key -> pane id, what it shows: 1-5 maximise that pane."""
_SERVING_EVENTS = (ev.ServingChanged, ev.LoadSampled, ev.ServeTreeChanged, ev.ReadinessChanged,
                   ev.RunUpdated, ev.StartupProgress)
"""The events after which the engine's verdict or the serving figures may read otherwise."""
COMPACT_HINT = "1: GPUs · 4: diff/engine · z: maximise"


class HostView(Screen[None]):
    """The panes of one host and the state they render."""

    # Textual repaints the whole screen when focus moves (`focused` repaints); the styles
    # that change (`:focus-within` borders) repaint their own widgets (docs/benchmarks.md).
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    # A maximised pane keeps the footer: `q` and `?` stay in sight (Textual keeps only its
    # own `Footer` class by default).
    ALLOW_IN_MAXIMIZED_VIEW = "KeyFooter"

    BINDINGS = [
        Binding("z", "toggle_maximize", "Maximise",
                tooltip="the focused pane fills the screen; z or esc: back", id="host.maximize"),
        # From any pane, and a priority key: it runs as it is read, so the keys typed right
        # behind it (a paste, a fast typist) are routed to the search box it opens, never to
        # the pane that had focus, where `t` switched the theme and `a` applied the reference.
        # In a text box `/` is typed (`HostScreen.check_action`).
        Binding("slash", "search_log", "Search", tooltip="search the serve log from any pane",
                priority=True, id="host.search"),
        Binding("v", "next_tab", "Diff/Engine",
                tooltip="switch the Draft config diff / Engine config tabs", id="host.next_tab"),
        *(Binding(key, f"maximize_pane('{pane}')", f"maximise {label}", show=False,
                  id=f"host.pane_{key}") for key, (pane, label) in PANES.items()),
    ]

    def __init__(self, host_name: str, *, readonly: bool = False, scenario: str = "",
                 expected_acceptance: Callable[[], Acceptance | None] = lambda: None,
                 log_backlog: Callable[[], Iterable[str]] = tuple,
                 serve_summary: Callable[[], str] | None = None,
                 log_lines: int = 20_000, generation: int = 0) -> None:
        # `generation`: the screen made again for another server of the host (the switcher)
        # while the old one still leaves: another id.
        super().__init__(name=host_name, id=f"host-{abs(hash(host_name))}"
                         + (f"-{generation}" if generation else ""))
        self.host_name = host_name
        self._readonly = readonly
        self._scenario = scenario
        self._expected = expected_acceptance
        self._log_backlog = log_backlog
        self._serve_summary = serve_summary
        self._log_notes: tuple[str, ...] = ()
        self._log_lines = log_lines
        self.ready = False
        # What the screen holds, shown or not.
        self._link = LinkStatus(ConnectionState.CONNECTING)
        self._sources = Sources()
        self._gpu_history = GpuHistory()
        self._acceptance = AcceptanceHistory()
        self._gpu = GpuView()
        self._spec = SpecView()
        self._engine = EngineView()
        self._checks = ChecklistState()
        self._diff: DraftDiff | None = None
        self._serve_text = ""
        self._restart_text = ""
        self._was_ready = False
        self._last_data_at: float | None = None
        self._serving_figures = ServingFigures()
        self._serving = ServingView()
        self._serving_pane = ServingPaneView()
        self._latency = LatencyView()
        self._tick_timer: Timer | None = None
        self._tick_due = 0.0
        self._server_only = ""
        self._server_words = ""

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        header = HostHeader(id="header")
        header.host_name = self.host_name
        header.readonly = self._readonly
        header.scenario = self._scenario
        yield header
        serving = ServingStrip(id="serving", classes="pane")
        serving.border_title = "Serving"
        yield serving
        with Horizontal(id="url-row"):  # the URL-only screen's room (`show_server_only`)
            pane = ServingPane(id="serving-pane", classes="pane")
            pane.border_title = "Serving"
            yield pane
            latency = LatencyTable(id="latency", classes="pane")
            latency.border_title = "Latency"
            yield latency
        with Horizontal(id="top-row"):
            gpu = GpuPane(id="gpus", classes="pane")
            gpu.border_title = "GPUs"
            yield gpu
            spec = SpecPane(id="spec", classes="pane")
            spec.border_title = "Speculative decoding"
            yield spec
        with Horizontal(id="middle-row"):
            checklist = Checklist(id="checklist", classes="pane")
            checklist.readonly = self._readonly
            yield checklist
            with TabbedContent(id="config-tabs", classes="pane"):
                with TabPane("Draft config diff", id="tab-diff"):
                    yield DraftDiffPane(id="diff")
                with TabPane("Engine config", id="tab-engine"):
                    yield EngineTree(id="engine")
        yield Static(id="needs-ssh")
        log = LogPane(self._log_lines, id="log-pane")
        log.add_class("pane")
        log.border_title = "Serve log"
        yield log
        yield KeyFooter()

    def on_mount(self) -> None:
        # Kept from mount: at exit the panes are removed before the screen, while results
        # still arrive; they then land on a detached widget instead of failing a query.
        self._panes: dict[type[Widget], Widget] = {
            kind: self.query_one(kind) for kind in (HostHeader, ServingStrip, GpuPane, SpecPane,
                                                    Checklist, DraftDiffPane, EngineTree,
                                                    LogPane, ServingPane, LatencyTable)}
        self.ready = True
        if not self.server_only:
            self.query_one("#log-pane #log").focus()
        self.log_pane.add_lines([*self._log_notes, *self._log_backlog()])
        if self._serve_summary is not None:
            self._serve_text = self._serve_summary()
        self._render_all()
        self._apply_server_only()
        self._apply_layout()
        self._arm_tick()

    def on_unmount(self) -> None:
        self.ready = False

    def on_resize(self) -> None:
        if self.ready:
            self._apply_layout()

    def _apply_layout(self) -> None:
        width, height = self.size
        compact = width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]
        tall = not compact and height >= TALL_FROM
        short = not compact and height < SERVING_FULL_FROM
        roomy = not compact and height >= SERVING_TRENDS_FROM
        self.set_class(compact, "-compact")
        self.set_class(tall, "-tall")
        self.set_class(short, "-short")
        self.set_class(roomy, "-roomy")
        self._show_staleness()  # the pane subtitles: the compact hint or the data's age
        # The URL-only screen has the room for the per-position rows down to 30 rows.
        spec_compact = compact and not (self.server_only and height >= URL_SPEC_FULL_FROM)
        self.set_class(spec_compact, "-spec-compact")
        self.spec.compact = spec_compact
        self.header.compact = compact
        self.serving.rows = 1 if compact or short else 4 if roomy else 3
        self.checklist.detail_lines = self._checklist_lines(compact, tall)

    def _checklist_lines(self, compact: bool, tall: bool) -> int:
        """Summary lines under each link: the layout's, or, with the checklist maximised, as
        many as its height gives the four links (their summaries and hints)."""
        if self.maximized is self.checklist:
            rows = self.size.height - 3  # its border and the footer
            return max(1, min(6, (rows - len(LINK_IDS)) // (2 * len(LINK_IDS))))
        return 0 if compact else 3 if tall else 1

    def watch_maximized(self) -> None:
        if self.ready:
            self._apply_layout()

    @property
    def compact(self) -> bool:
        return self.has_class("-compact")

    # -- the one way in for telemetry ------------------------------------------------------
    def show(self, snap: HostSnapshot, event: ev.TelemetryEvent) -> None:
        """Take one telemetry event of this host into the screen's state, and render what it
        changed when the screen is shown. `snap` is the whole picture after the event."""
        if isinstance(event, ev.LinkChanged):
            self._link = event.link
        elif isinstance(event, ev.GpuSampled):
            box = snap.serve.container
            self._gpu = GpuView(event.sample, self._gpu_history.add(event.sample),
                                containers={box.id: box.name} if box is not None else {},
                                boxed={pid: (name, box.name) for pid, name in
                                       snap.serve.processes} if box is not None else {},
                                owners=gpu_owners(snap))
            self._last_data_at = time.monotonic()
        elif isinstance(event, ev.LogLinesReceived):
            self._last_data_at = time.monotonic()
            if self.ready:
                self.log_pane.add_batch(event.batch, event.notable)
        elif isinstance(event, ev.RunUpdated):
            previous = self._engine.current if event.new_run else self._engine.previous
            self._engine = EngineView(event.run.engine, previous, event.run.args)
            if event.new_run:
                self._spec = SpecView(self._spec.state, self._spec.expected,
                                      self._acceptance.new_run())
        elif isinstance(event, ev.SpecDecodeUpdated):
            self._spec = SpecView(event.state, self._expected(), self._acceptance.add(event.state))
        elif isinstance(event, ev.StartupProgress):
            ready = event.status.state is StartupState.READY
            if ready and not self._was_ready and not self._restart_text:
                self.run_became_ready()
            self._was_ready = ready
            self._serve_text = f"serve: {event.status.text}"
        elif isinstance(event, ev.ReadinessChanged) and self._serve_summary is not None:
            self._serve_text = self._serve_summary()  # URL-only: what this view is
        if isinstance(event, ev.LoadSampled | ev.ServingChanged | ev.SpecDecodeUpdated):
            # The server's own figures: what a URL-only screen shows, aged like the rest.
            self._last_data_at = time.monotonic()
        if isinstance(event, _SERVING_EVENTS):
            self._serving_figures.take(snap)
            self._set_serving(self._serving_view())
        if isinstance(event, (*_SERVING_EVENTS, ev.LinkChanged)) and self.ready:
            self._arm_tick(sooner_only=True)
        self._server_words = header_words(snap)
        self._sources = Sources(gpu=snap.gpu_source,
                                log=str(snap.follow.value) if snap.follow else "none",
                                metrics=snap.readiness.health.value)
        if self.ready:
            self._paint(event)

    def run_became_ready(self) -> None:
        """A run of the server just became ready (not one this screen restarted): its
        runtime evidence is complete now. `HostScreen` re-runs the checks."""

    def engine_alarm_changed(self, alarm: bool) -> None:
        """The engine became stalled or dead (`alarm`), or came back: the checklist's
        runtime evidence is out of date. `HostScreen` re-runs the checks."""

    def _set_serving(self, view: ServingView) -> None:
        was = self._serving.alarm
        self._serving = view
        self._serving_pane = self._serving_figures.pane_view(view)
        self._latency = self._serving_figures.latency_view(view)
        if view.alarm != was:
            self.engine_alarm_changed(view.alarm)

    def _paint(self, event: ev.TelemetryEvent) -> None:
        if isinstance(event, ev.GpuSampled):
            self.gpus.view = self._gpu
        elif isinstance(event, ev.RunUpdated):
            self.engine.view = self._engine
            self.spec.view = self._spec
        elif isinstance(event, ev.SpecDecodeUpdated):
            self.spec.view = self._spec
        if isinstance(event, _SERVING_EVENTS):
            self._paint_serving()
        self._render_header()

    def _paint_serving(self) -> None:
        self.serving.view = self._serving
        self.serving_pane.view = self._serving_pane
        self.latency.view = self._latency

    def _render_all(self) -> None:
        self.gpus.view = self._gpu
        self.spec.view = self._spec
        self.engine.view = self._engine
        self.checklist.state = self._checks
        self.diff.diff = self._diff
        self._paint_serving()
        self._render_header()

    def _render_header(self) -> None:
        header = self.header
        header.link = self._link
        header.sources = self._sources
        header.activity = self._restart_text or self._serve_text
        header.server = self._server_words
        serving = self._serving
        header.engine_alert = (f"engine {serving.engine_words()} [s stacks]: "
                               f"{serving.engine_reason}") if serving.alarm else ""
        stale = self.stale
        if stale != header.stale:
            header.stale = stale
            self._show_staleness()

    # -- a link outage: every pane shows its data as old -----------------------------------
    @property
    def stale(self) -> bool:
        """The link is down and what the panes hold came over it earlier."""
        return self._link.state is not ConnectionState.CONNECTED and \
            self._last_data_at is not None

    def _arm_tick(self, sooner_only: bool = False) -> None:
        """The next tick: when what is shown moves on with time alone (a stale screen's age
        and a stall's length each second, a figure's age at its next step), not every second:
        a screen left alone wakes once per step."""
        wait = 1.0 if self.stale else self._serving_figures.next_change_s()
        if wait is None:
            return
        due = time.monotonic() + wait
        if sooner_only and self._tick_timer is not None and due >= self._tick_due - 0.05:
            return
        if self._tick_timer is not None:
            self._tick_timer.stop()
        self._tick_due = due
        self._tick_timer = self.set_timer(wait, self._tick)

    def _tick(self) -> None:
        self._tick_timer = None
        serving = self._serving_view()
        if serving != self._serving:  # an age or a stall's length moved on
            self._set_serving(serving)
            self._paint_serving()
            self._render_header()
        if self.stale:
            self._show_staleness()  # the age goes on
        self._arm_tick()

    def _show_staleness(self) -> None:
        if not self.ready:
            return
        stale = self.stale
        self.set_class(stale, "-stale")
        age = None if self._last_data_at is None else time.monotonic() - self._last_data_at
        self.header.stale = stale
        self.header.data_age_s = age
        for pane in self.query(".pane"):
            pane.border_subtitle = f"stale · {describe_age(age)}" if stale else ""
        if not stale:
            self.checklist.update_title()
            if self.compact and not self.server_only:
                self.spec.border_subtitle = COMPACT_HINT

    # -- what the host's actions report ----------------------------------------------------
    def show_checks(self, state: ChecklistState) -> None:
        """A checks run started (running=True) or ended; a failed run keeps the last report."""
        if state.report is None and not state.running:
            state = ChecklistState(self._checks.report, running=False, error=state.error)
        elif state.report is None:
            state = ChecklistState(self._checks.report, running=True)
        self._checks = state
        if self.ready:
            self.checklist.state = state

    def show_diff(self, diff: DraftDiff) -> None:
        self._diff = diff
        if self.ready:
            self.diff.diff = diff

    def show_restart_step(self, step: RestartStep) -> None:
        if not self._restart_text:
            return  # a restart this screen did not start, or one already over
        self._restart_text = f"restart: {step.stage.value} · {step.message[:80]}"
        self._restart_changed()

    def show_unavailable(self, *, gpu: str, engine: str, log: Iterable[str]) -> None:
        """Panes this host cannot fill (a session without the capability), each with why."""
        self._gpu = GpuView(error=gpu)
        self._engine = EngineView(note=engine)
        self._log_notes = tuple(log)
        if self.ready:
            self._render_all()
            self.log_pane.add_lines(list(self._log_notes))

    def set_serve_summary(self, summary: Callable[[], str]) -> None:
        """What the header says this view is (a URL-only session's URL, model and version),
        once its session is made."""
        self._serve_summary = summary
        self._serve_text = summary()
        if self.ready:
            self._render_header()

    def show_server_only(self, line: str) -> None:
        """A session on the server's URL alone: the panes that need the host (GPUs, checklist,
        config tabs, log) give their room to what the server tells, and say so in one line."""
        self._server_only = line
        if self.ready:
            self._apply_server_only()

    def _apply_server_only(self) -> None:
        line = self._server_only
        self.set_class(bool(line), "-server-only")
        # No GPU, no log in a URL-only view: no badges for them, no wait for a log.
        self.header.chips = ("metrics",) if line else ("gpu", "log", "metrics")
        self.spec.waiting_for = "the server's /metrics" if line else "the serve log"
        self._apply_layout()
        self.query_one("#needs-ssh", Static).update(Text(line, no_wrap=True,
                                                         overflow="ellipsis"))
        for hidden in ("#gpus", "#middle-row", "#log-pane"):
            # Hidden, and not focusable either: their keys would act on nothing shown.
            self.query_one(hidden).disabled = bool(line)
        if line:
            self.set_focus(None)

    @property
    def server_only(self) -> bool:
        return bool(self._server_only)

    def _serving_view(self) -> ServingView:
        """The serving figures; during a restart this screen runs, an engine that stopped or
        has not come back yet is `restarting`, never `dead` (the old one is stopped on
        purpose, the new one starts)."""
        view = self._serving_figures.view()
        if self._restart_text and view.engine in ("dead", "stalled", "unknown", "stopping"):
            return replace(view, engine="restarting", engine_reason=self._restart_text,
                           engine_for_s=None)
        return view

    def _restart_changed(self) -> None:
        self._set_serving(self._serving_view())
        if self.ready:
            self._paint_serving()
            self._render_header()

    def begin_restart(self) -> None:
        self._restart_text = "restart: starting"
        self._restart_changed()

    def end_restart(self) -> None:
        """The header goes back to the server's own state (`serve: ready (started in N s)`)."""
        self._restart_text = ""
        self._restart_changed()

    @property
    def restarting(self) -> bool:
        return bool(self._restart_text)

    # -- keys ------------------------------------------------------------------------------
    def _pane_of(self, widget: Widget | None) -> Widget | None:
        while widget is not None and widget is not self:
            if widget.has_class("pane"):
                return widget
            widget = widget.parent if isinstance(widget.parent, Widget) else None
        return None

    def action_toggle_maximize(self) -> None:
        """`z`: the focused pane fills the screen; again (or Esc) brings the layout back."""
        if self.maximized is not None:
            self.minimize()
            return
        pane = self._pane_of(self.focused)
        if pane is not None:
            self.maximized = pane  # any pane, whether or not its class allows maximising

    def action_maximize_pane(self, pane_id: str) -> None:
        """1-5: that pane, maximised (the compact layout's way to the hidden panes)."""
        pane = self.query_one(f"#{pane_id}")
        if self.maximized is pane:
            self.minimize()
            return
        target = pane if pane.focusable else next(
            (w for w in pane.query("*") if w.focusable), None)
        if target is not None:
            target.focus()
        self.maximized = pane

    def action_search_log(self) -> None:
        """`/` outside the log pane: the log's search box, the layout back if a pane was
        maximised (the log pane is hidden then)."""
        if self.maximized is not None and self.maximized is not self.log_pane:
            self.minimize()
        self.log_pane.action_search()

    def action_next_tab(self) -> None:
        """`v`: Draft config diff <-> Engine config, without the mouse (in the compact
        layout, which hides the tabs, they are maximised first)."""
        tabs = self.query_one(TabbedContent)
        tabs.active = "tab-engine" if tabs.active == "tab-diff" else "tab-diff"
        if self.compact and self.maximized is not tabs:
            self.maximized = tabs

    # -- the widgets, for reading (tests, benchmarks, the export's log window) -------------
    @property
    def header(self) -> HostHeader:
        return self._panes[HostHeader]  # type: ignore[return-value]

    @property
    def serving(self) -> ServingStrip:
        return self._panes[ServingStrip]  # type: ignore[return-value]

    @property
    def serving_pane(self) -> ServingPane:
        return self._panes[ServingPane]  # type: ignore[return-value]

    @property
    def latency(self) -> LatencyTable:
        return self._panes[LatencyTable]  # type: ignore[return-value]

    @property
    def gpus(self) -> GpuPane:
        return self._panes[GpuPane]  # type: ignore[return-value]

    @property
    def spec(self) -> SpecPane:
        return self._panes[SpecPane]  # type: ignore[return-value]

    @property
    def checklist(self) -> Checklist:
        return self._panes[Checklist]  # type: ignore[return-value]

    @property
    def diff(self) -> DraftDiffPane:
        return self._panes[DraftDiffPane]  # type: ignore[return-value]

    @property
    def engine(self) -> EngineTree:
        return self._panes[EngineTree]  # type: ignore[return-value]

    @property
    def log_pane(self) -> LogPane:
        return self._panes[LogPane]  # type: ignore[return-value]
