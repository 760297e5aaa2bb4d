"""The `fleet` command's TUI: the Prometheus fleet table, refreshed every 5 s, and what Enter
on a row opens (the full console over SSH, the URL-only console, or the Prometheus-only view).

The console for one server is its own `ConsoleApp`: the fleet app exits with the chosen
server, the console runs, and quitting it comes back to the table (sort and filter kept): that
loop is the command's (`console/cli/commands/fleet.py`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from textual import on, work
from textual.binding import Binding
from textual.message import Message

from vllm_console.console.settings import FleetSettings, HostsFile
from vllm_console.console.sources.fleet_hosts import (
    OpenKind,
    OpenTarget,
    hosts_by_label,
    open_target,
)
from vllm_console.console.sources.fleet_query import FleetReport, query_fleet
from vllm_console.console.sources.prometheus import Prometheus
from vllm_console.console.tui.driver import QuietApp
from vllm_console.console.tui.screens.prom_fleet import PromFleetScreen, PromServerScreen
from vllm_console.themes import DEFAULT_THEME, THEMES

REFRESH_S = 5.0


class FleetRefreshed(Message):
    def __init__(self, report: FleetReport) -> None:
        super().__init__()
        self.report = report


@dataclass
class TableState:
    """What survives a trip into one server's console and back."""

    sort_index: int = 0
    reverse: bool = False
    filter: str = ""
    per_engine: bool = False
    notice: str = ""
    """Why the last Enter opened nothing (shown once the table is back)."""


class FleetApp(QuietApp[OpenTarget | None]):
    """The Prometheus fleet table."""

    TITLE = "vllm-console fleet"
    BINDINGS = [Binding("q", "quit", "Quit", id="fleet.quit"),
                Binding("question_mark", "help", "Help", id="fleet.help")]

    def __init__(self, prom: Prometheus, fleet: FleetSettings, selector: str, hosts: HostsFile,
                 *, state: TableState | None = None, theme: str | None = None,
                 refresh_s: float = REFRESH_S) -> None:
        super().__init__()
        self.prom, self.fleet, self.selector, self.hosts = prom, fleet, selector, hosts
        self.state = state or TableState()
        self.refresh_s = refresh_s
        self._wanted_theme = theme
        self.table = PromFleetScreen(prom.url)
        self.refreshes = 0

    def on_mount(self) -> None:
        for theme in THEMES.values():
            self.register_theme(theme)
        wanted = self._wanted_theme or DEFAULT_THEME
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME
        table = self.table
        table.sort_index, table.reverse, table.filter = (self.state.sort_index,
                                                         self.state.reverse, self.state.filter)
        table.per_engine = self.state.per_engine
        self.push_screen(table)
        if self.state.notice:
            self.notify(self.state.notice, severity="error", timeout=10)
            self.state.notice = ""
        self._poll()

    @work(exclusive=True, group="fleet-poll", exit_on_error=False)
    async def _poll(self) -> None:
        while True:
            # In a thread with its own loop: for 1,000 servers decoding and assembling the
            # answers takes ~0.4 s of CPU, which on the app's loop stalled keys for as long.
            report = await asyncio.to_thread(self._query)
            report = report.with_hosts(hosts_by_label(self.hosts,
                                                      [s.key for s in report.servers]))
            self.post_message(FleetRefreshed(report))
            await asyncio.sleep(self.refresh_s)

    def _query(self) -> FleetReport:
        """One query, in the thread that runs it: its coroutine is made there, so a refresh
        cancelled before a thread took it leaves none behind, never awaited."""
        return asyncio.run(query_fleet(self.prom, selector=self.selector,
                                       host_label=self.fleet.host_label,
                                       profile=self.fleet.profile))

    @on(FleetRefreshed)
    def _refreshed(self, message: FleetRefreshed) -> None:
        self.refreshes += 1
        self.table.show(message.report)
        top = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(top, PromServerScreen):
            top.show(message.report)

    def action_help(self) -> None:
        from vllm_console.console.tui.screens.help import HelpScreen

        keys = [b for b in PromFleetScreen.BINDINGS if isinstance(b, Binding)]
        self.push_screen(HelpScreen([("Fleet from Prometheus", keys),
                                     ("Anywhere", [b for b in self.BINDINGS
                                                   if isinstance(b, Binding)])]))

    @on(PromFleetScreen.RefreshWanted)
    def _refresh_now(self) -> None:
        self._poll()

    @on(PromFleetScreen.ServerChosen)
    def _chosen(self, message: PromFleetScreen.ServerChosen) -> None:
        server = message.server
        target = open_target(server.key, server.host, self.hosts)
        if target.kind is OpenKind.PROMETHEUS:
            self.push_screen(PromServerScreen(server))
            return
        self.state = TableState(self.table.sort_index, self.table.reverse, self.table.filter,
                                self.table.per_engine)
        self.exit(target)
