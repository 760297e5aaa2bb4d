"""The fleet from Prometheus: one row per server, sortable (`s`/`S`), filterable (`/`), Enter
opens it; and the Prometheus-only view of one server (`PromServerScreen`).

A figure Prometheus does not have is shown as its reason (`absent`, `idle`, `no dcgm`,
`error`), never as a zero or a blank; a refresh that failed keeps the last table and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import ColumnKey

from vllm_console.console.output.display import safe_text
from vllm_console.console.sources.fleet_query import (
    ABSENT,
    IDLE,
    NO_DCGM,
    NO_REQUESTS,
    PER_SERVER,
    FleetReport,
    FleetServer,
)
from vllm_console.widgets.status import STATUS_CLASSES, status_style


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    cell: Callable[[FleetServer], str]
    sort: Callable[[FleetServer], float | str | None]


def _reason(server: FleetServer, figure: str) -> str:
    why = server.missing.get(figure, ABSENT)
    if why == PER_SERVER:  # an engine's row: the server's row above it has the figure
        return ""
    if why in (IDLE, NO_REQUESTS):
        return "idle"
    if why == NO_DCGM:
        return "no dcgm"
    return "error" if why.startswith("error") else why


def _num(figure: str, fmt: str, suffix: str = "") -> Callable[[FleetServer], str]:
    def cell(server: FleetServer) -> str:
        value = getattr(server, figure)
        return _reason(server, figure) if value is None else f"{value:{fmt}}{suffix}"
    return cell


def _health(server: FleetServer) -> str:
    if server.parent is not None:
        return ""
    return {True: "up", False: "DOWN", None: "absent"}[server.up]


def _flag(server: FleetServer) -> str:
    flags = []
    if server.low_acceptance and server.expected_acceptance is not None:
        flags.append(f"LOW (expect ~{server.expected_acceptance.high:g})")
    if server.stalled_engines:
        flags.append(f"ENGINE {','.join(server.stalled_engines)} STUCK")
    elif server.imbalanced:
        flags.append("DP IMBALANCE")
    if server.slow:
        flags.append("DP SLOW")
    return " ".join(flags)


def _gpu_mem(server: FleetServer) -> str:
    used, total = server.gpu_mem_used_mib, server.gpu_mem_total_mib
    if used is None:
        return _reason(server, "gpu_mem_used_mib")
    return f"{used / 1024:.0f}/{total / 1024:.0f} GiB" if total else f"{used / 1024:.0f} GiB"


def _engines(server: FleetServer) -> str:
    values = server.per_engine_acceptance
    if len(values) < 2:
        return ""
    return " ".join("?" if v is None else f"{v:.2f}" for _, v in sorted(values.items()))


COLUMNS = (
    Column("server", "server", lambda s: s.key, lambda s: s.key),
    Column("host", "hosts file", lambda s: s.host or "", lambda s: s.host or ""),
    Column("up", "health", _health, lambda s: {True: 1, False: 0, None: None}[s.up]),
    Column("model", "model", lambda s: "" if s.parent else s.model or _reason(s, "model"),
           lambda s: s.model),
    Column("accept", "accept len", _num("mean_acceptance_length", ".2f"),
           lambda s: s.mean_acceptance_length),
    Column("engines", "per engine", _engines, lambda s: len(s.per_engine_acceptance)),
    Column("draft", "draft acc", _num("draft_acceptance_rate_pct", ".1f", "%"),
           lambda s: s.draft_acceptance_rate_pct),
    Column("gen", "gen tok/s", _num("generation_tps", ".1f"), lambda s: s.generation_tps),
    Column("running", "run", _num("running", ".0f"), lambda s: s.running),
    Column("waiting", "wait", _num("waiting", ".0f"), lambda s: s.waiting),
    Column("kv", "KV", _num("kv_cache_usage_pct", ".0f", "%"), lambda s: s.kv_cache_usage_pct),
    Column("gpu", "GPU util", _num("gpu_util_pct", ".0f", "%"), lambda s: s.gpu_util_pct),
    Column("mem", "GPU mem", _gpu_mem, lambda s: s.gpu_mem_used_mib),
    Column("flag", "flag", _flag, lambda s: int(bool(s.low_acceptance)) + 2 * len(
        s.stalled_engines) + int(bool(s.imbalanced))),
    Column("ttft", "TTFT p99", _num("ttft_p99_s", ".2f", "s"), lambda s: s.ttft_p99_s),
    Column("engine", "engine", lambda s: s.engine or "?",
           lambda s: {"stalled": 0, "ok": 1, "idle": 2}.get(s.engine or "")),
)


ENGINE_FIGURES = ("accept", "gen", "running", "waiting", "engine", "flag")
"""The columns an engine's row has of its own (the rest are the server's)."""


def sort_rows(servers: tuple[FleetServer, ...], column: Column, reverse: bool
              ) -> list[FleetServer]:
    """By the column's value, unknown values last whichever the direction."""
    known = [s for s in servers if column.sort(s) is not None]
    unknown = [s for s in servers if column.sort(s) is None]
    known.sort(key=lambda s: (column.sort(s), s.key), reverse=reverse)  # type: ignore[arg-type, return-value]
    return known + unknown


def matches(server: FleetServer, words: str) -> bool:
    """Every word of the filter appears in one of the row's cells (case-insensitive)."""
    text = " ".join(c.cell(server) for c in COLUMNS).lower()
    return all(w in text for w in words.lower().split())


class PromFleetScreen(Screen[None]):
    """The fleet table; the app hands it each refresh (`show`). `e` adds one row per
    data-parallel engine under each server that has two or more."""

    BINDINGS = [
        Binding("enter", "open", "Open", id="promfleet.open"),
        Binding("s", "sort", "Sort", id="promfleet.sort"),
        Binding("S", "sort(True)", "Reverse", id="promfleet.reverse"),
        Binding("slash", "filter", "Filter", id="promfleet.filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="promfleet.clear"),
        Binding("r", "refresh", "Refresh", id="promfleet.refresh"),
        Binding("e", "engines", "Engines", id="promfleet.engines"),
    ]
    COMPONENT_CLASSES = STATUS_CLASSES

    class ServerChosen(Message):
        def __init__(self, server: FleetServer) -> None:
            super().__init__()
            self.server = server

    class RefreshWanted(Message):
        pass

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source
        self.report: FleetReport | None = None
        self.sort_index = 0
        self.reverse = False
        self.filter = ""
        self.per_engine = False
        self.rows: list[FleetServer] = []
        """The rows shown, in order: servers, each followed by its engines' rows (`e`)."""
        self._shown: dict[str, tuple[str, ...]] = {}
        self._shown_order: list[str] = []
        self._mounted = False
        self._early: FleetReport | None = None
        """A refresh that came before the screen was put together: shown on mount."""

    def compose(self) -> ComposeResult:
        yield Static(Text(f" vllm-console · fleet from {self.source} · waiting for "
                          "Prometheus…"), id="promfleet-title")  # Text: a URL is no markup
        yield Static("", id="promfleet-status")
        yield DataTable(id="promfleet", cursor_type="row", zebra_stripes=True)
        yield Input(placeholder="filter: words in any cell (Enter: apply, Esc: clear)",
                    id="promfleet-filter")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column.title, key=column.key)
        self.query_one(Input).display = False
        table.focus()
        self.app.theme_changed_signal.subscribe(self, self._recolour)
        self._mounted = True
        if self._early is not None:
            early, self._early = self._early, None
            self.show(early)

    def show(self, report: FleetReport) -> None:
        """A refresh: keep the last good table when this one failed, and say so."""
        if not self._mounted:
            self._early = report
            return
        status = self.query_one("#promfleet-status", Static)
        if report.error:
            error = safe_text(report.error, 500)  # Prometheus's words: inert
            status.update(Text(f" {error} (the table is from the last good refresh)"
                               if self.report else f" {error}"))
            status.set_class(False, "status--warn").set_class(True, "status--fail")
            self._title(report)
            return
        self.report = report
        errors = safe_text("; ".join(f"{k}: {e}" for k, e in sorted(
            report.query_errors.items())), 1000)
        status.update(Text(f" query errors: {errors}" if errors else ""))
        status.set_class(False, "status--fail").set_class(True, "status--warn")
        self._title(report)
        self._render_rows()

    def _title(self, report: FleetReport) -> None:
        shown = self.report
        servers = sum(1 for s in self.rows if s.parent is None)
        count = f"{servers}/{len(shown.servers)} servers" if shown else "no table"
        column = COLUMNS[self.sort_index]
        clock = time.strftime("%H:%M:%S", time.localtime(report.at))
        self.query_one("#promfleet-title", Static).update(Text(
            f" vllm-console · fleet from {self.source} · {count} · {clock} "
            f"({report.took_s * 1000:.0f} ms) · sort: {column.title}"
            f"{' ↓' if self.reverse else ''}" + (f" · filter: {self.filter}" if self.filter
                                                  else "")
            + (" · per engine" if self.per_engine else "") + " · enter: open"))

    def _render_rows(self) -> None:
        """Bring the table to the report, the filter and the sort with the least work: rows
        added or removed, cells whose text changed, then one reorder. (Clearing and adding
        1,000 rows took ~0.7 s on the app's loop, at every refresh of a live sort.)"""
        report = self.report
        if report is None:
            return
        servers = [s for s in report.servers if matches(s, self.filter)] if self.filter \
            else list(report.servers)
        ordered = sort_rows(tuple(servers), COLUMNS[self.sort_index], self.reverse)
        self.rows = [row for s in ordered
                     for row in ((s, *s.engine_rows()) if self.per_engine else (s,))]
        cells = {s.key: tuple(c.cell(s) for c in COLUMNS) for s in self.rows}
        table = self.query_one(DataTable)
        at = self._shown_order[table.cursor_row] if 0 <= table.cursor_row < len(
            self._shown_order) else None
        for key in [k for k in self._shown if k not in cells]:
            table.remove_row(key)
            del self._shown[key]
        for key, texts in cells.items():
            old = self._shown.get(key)
            if old is None:
                table.add_row(*[self._styled(c.key, t) for c, t in zip(COLUMNS, texts,
                                                                         strict=True)], key=key)
                continue
            for column, new_text, old_text in zip(COLUMNS, texts, old, strict=True):
                if new_text != old_text:
                    # Widen only when it must: a width update per cell floods the table.
                    wider = len(new_text) > table.columns[ColumnKey(column.key)].content_width
                    table.update_cell(key, column.key, self._styled(column.key, new_text),
                                      update_width=wider)
        self._shown = cells
        order = [s.key for s in self.rows]
        if order != [row.key.value for row in table.ordered_rows]:
            rank = {key: i for i, key in enumerate(order)}
            table.sort("server", key=lambda cell: rank[cell.plain])
        self._shown_order = order
        if at is not None and at in cells:
            table.move_cursor(row=order.index(at))  # the same server stays under the cursor
        self._title(report)

    def _styled(self, column: str, text: str) -> Text:
        text = safe_text(text, 200)  # label values are the scraped servers' words: inert
        if text in ("DOWN", "error", "stalled") or text.startswith(("LOW", "ENGINE", "DP ")):
            return Text(text, style=status_style(self, "fail") + Style(bold=True))
        if text in ("absent", "idle", "no dcgm", ""):
            return Text(text, style=status_style(self, "unknown"))
        return Text(text, style="bold" if column == "server" else "")

    def _recolour(self, _theme: object) -> None:
        """A new theme (the stylesheet has been refreshed by now): every shown cell again."""
        table = self.query_one(DataTable)
        for key, texts in self._shown.items():
            for column, text in zip(COLUMNS, texts, strict=True):
                table.update_cell(key, column.key, self._styled(column.key, text))

    def action_sort(self, reverse: bool = False) -> None:
        if reverse:
            self.reverse = not self.reverse
        else:
            self.sort_index = (self.sort_index + 1) % len(COLUMNS)
        self._render_rows()

    def action_filter(self) -> None:
        box = self.query_one(Input)
        box.display = True
        box.value = self.filter
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.filter = event.value.strip()
        event.input.display = False
        self.query_one(DataTable).focus()
        self._render_rows()

    def action_clear_filter(self) -> None:
        box = self.query_one(Input)
        box.display = False
        self.filter = ""
        self.query_one(DataTable).focus()
        self._render_rows()

    def action_refresh(self) -> None:
        self.post_message(self.RefreshWanted())

    def action_engines(self) -> None:
        """One row per data-parallel engine under its server, or back to one per server."""
        self.per_engine = not self.per_engine
        self._render_rows()

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if self.rows and 0 <= table.cursor_row < len(self.rows):
            row = self.rows[table.cursor_row]
            if row.parent is not None:  # an engine's row opens its server
                row = next(s for s in self.rows if s.key == row.parent)
            self.post_message(self.ServerChosen(row))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()


def describe(server: FleetServer) -> list[str]:
    """The Prometheus-only view of one server, line by line: every figure with its reason."""
    lines = [f"server {server.key}" + (f"  (hosts file: {server.host})" if server.host else ""),
             f"job {server.job or '?'} · health {_health(server)} · model "
             f"{server.model or _reason(server, 'model')}", ""]
    for column in COLUMNS[4:]:
        text = column.cell(server)
        if text:
            lines.append(f"  {column.title:<12} {text}")
    for engine in server.engine_rows():
        figures = " · ".join(f"{c.title} {c.cell(engine)}" for c in COLUMNS
                             if c.key in ENGINE_FIGURES and c.cell(engine))
        lines.append(f"  engine {engine.key.rsplit(' · e', 1)[-1]:<5} {figures}")
    for figure, why in sorted(server.missing.items()):
        lines.append(f"  missing {figure}: {why}")
    lines += ["", "Seen through Prometheus only. For the live console add this server to the "
              "hosts file: `url = \"http://HOST:PORT\"` (no SSH) or `ssh = \"user@host\"`."]
    return lines


def _view(server: FleetServer) -> Text:
    """Plain text (no markup), each line's controls made inert: label values are data."""
    return Text("\n".join(safe_text(line, 500) for line in describe(server)))


class PromServerScreen(Screen[None]):
    """One server as Prometheus sees it (no URL, no SSH); refreshed with the table."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="promserver.back")]

    def __init__(self, server: FleetServer) -> None:
        super().__init__()
        self.server = server

    def compose(self) -> ComposeResult:
        yield Static(_view(self.server), id="promserver")
        yield Footer()

    def show(self, report: FleetReport) -> None:
        for server in report.servers:
            if server.key == self.server.key:
                self.server = server
                # Not put together yet (a refresh right after Enter): compose draws it.
                for static in self.query("#promserver").results(Static):
                    static.update(_view(server))
