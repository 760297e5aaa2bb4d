"""Several hosts: one row each (link, serve state, the engine's state, TTFT p99 over the recent
window, requests running/waiting, GPU utilisation, acceptance length, broken link, root cause,
age of the last check); Enter opens a host; `e` adds one row per data-parallel engine under
each host that has two or more, `p` one row per server (`gpu1 · :8001`) under each host that
runs several. One host's trouble only ever changes its own rows, and a cell
that grows widens its column (never `runtime-act`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from vllm_console.console.hostclient.discovery import ServerRow
from vllm_console.console.telemetry.serving import EngineFigures, EngineState
from vllm_console.console.transport.host import link_status
from vllm_console.widgets.serving_strip import ENGINE_STATUS
from vllm_console.widgets.status import STATUS_CLASSES, status_style

COLUMNS = ("host", "link", "serve", "engine", "TTFT p99", "run/wait", "GPU util",
           "acceptance length", "broken link", "root cause", "last check")
AGE_COLUMN = "last check"


@dataclass(frozen=True)
class FleetRow:
    """One host as the fleet table shows it."""

    name: str
    state: str
    gpu_util: float | None
    acceptance: float | None
    broken_link: str | None
    checked: bool
    serve_state: str = "unknown"
    """`status --json`'s serve.state: starting, ready, failed, exited, down, unknown."""
    root_cause: str | None = None
    checked_at: float | None = None
    """When the last chain run finished (epoch s); its age is shown, ticking."""
    acceptance_low: bool | None = None
    """The acceptance is below what the host's profile expects (`Acceptance.is_low`)."""
    engine: str = "unknown"
    """`status --json`'s serve.engine: ok, idle, stalled, dead, unknown."""
    ttft_p99: float | None = None
    """Time to first token, p99 over the recent window (seconds)."""
    running: int | None = None
    waiting: int | None = None
    engines: tuple[EngineFigures, ...] = ()
    """One per data-parallel engine when the server has two or more (`serve.engines`)."""
    servers: tuple[ServerRow, ...] = ()
    """Every vLLM server of the host when it runs two or more (`status --json`'s
    `servers`)."""


def server_key(host: str, server: ServerRow) -> str:
    """A server's row: `gpu1 · :8001` (unique: host names are, and one port one server)."""
    return f"{host} · {server.label}"


def engine_key(host: str, engine: EngineFigures) -> str:
    """An engine's row: `gpu-a · e1` (unique: host names are)."""
    return f"{host} · e{engine.name}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _load(running: int | None, waiting: int | None) -> str:
    if running is None and waiting is None:
        return "—"
    return f"{'?' if running is None else running}/{'?' if waiting is None else waiting}"


def age(since: float | None, now: float | None = None) -> str:
    """`12s ago`, `5m ago`, `3h ago`; `never` before the first check."""
    if since is None:
        return "never"
    seconds = max(0, int((time.time() if now is None else now) - since))
    if seconds < 60:
        return f"{seconds}s ago"
    return f"{seconds // 60}m ago" if seconds < 3600 else f"{seconds // 3600}h ago"


class FleetScreen(Screen[None]):
    """The fleet table."""

    BINDINGS = [Binding("enter", "open", "Open host", id="fleet.open"),
                Binding("e", "engines", "Engines", id="fleet.engines"),
                Binding("p", "servers", "Servers", tooltip="one row per server of a host",
                        id="fleet.servers")]
    COMPONENT_CLASSES = STATUS_CLASSES

    class HostChosen(Message):
        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def __init__(self, rows: list[FleetRow]) -> None:
        super().__init__()
        self._rows = rows
        self._shown: dict[str, FleetRow] = {row.name: row for row in rows}
        self._pending: dict[str, FleetRow] = {}
        self._ages: dict[str, str] = {}
        self.per_engine = False
        self.per_server = False
        self._engine_rows: dict[str, list[Text]] = {}
        """The rows shown under the hosts (`engine_key`, `server_key`), their cells."""

    def compose(self) -> ComposeResult:
        yield Static(" vllm-console · hosts (enter: open · h: back here from a host)",
                     id="fleet-title")
        yield DataTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        for row in self._rows:
            table.add_row(*self._cells(row), key=row.name)
        table.focus()
        self.set_interval(0.5, self._apply_pending)
        self.app.theme_changed_signal.subscribe(self, self._recolour)

    def _cells(self, row: FleetRow) -> list[Text]:
        ok, fail, unknown = (status_style(self, "ok"), status_style(self, "fail"),
                             status_style(self, "unknown"))
        state_colour = status_style(self, link_status(row.state))
        broken = ("—" if not row.checked else "all pass") if row.broken_link is None \
            else row.broken_link
        serve_colour = {"ready": ok, "failed": fail, "exited": fail, "down": fail,
                        "not-answering": fail}.get(
            row.serve_state, unknown)
        engine_colour = status_style(self, ENGINE_STATUS.get(row.engine, "unknown"))
        imbalance = " · DP imbalance" if any(e.slow for e in row.engines) else ""
        return [Text(row.name, style="bold"), Text(row.state, style=state_colour),
                Text(row.serve_state, style=serve_colour),
                Text(row.engine + imbalance, style=engine_colour), Text(_seconds(row.ttft_p99)),
                Text(_load(row.running, row.waiting)),
                Text("?" if row.gpu_util is None else f"{row.gpu_util:.0f}%"),
                Text("—" if row.acceptance is None else f"{row.acceptance:.2f}",
                     style=fail if row.acceptance_low else ""),
                Text(broken, style=fail if row.broken_link else (ok if row.checked
                                                                 else unknown)),
                Text(row.root_cause or "—", style=fail if row.root_cause else unknown),
                Text(age(row.checked_at), style=unknown if row.checked_at is None else "")]

    def _engine_cells(self, engine: EngineFigures, host: str) -> list[Text]:
        """An engine's own figures; what only the host has (link, GPUs, checks) is blank."""
        state = "slow" if engine.slow and engine.progress is EngineState.OK else \
            engine.progress.value
        colour = status_style(self, "warn" if state == "slow" else
                              ENGINE_STATUS.get(state, "unknown"))
        return [Text(engine_key(host, engine)), Text(""), Text(""), Text(state, style=colour),
                Text(_seconds(engine.ttft_p99_s)), Text(_load(engine.running, engine.waiting)),
                *[Text("") for _ in COLUMNS[6:]]]

    def _server_cells(self, server: ServerRow, host: str) -> list[Text]:
        """A server's own row: its state at the last discovery, and which one the host's
        row (and its screen) shows; the rest is the shown server's, on the host's row."""
        colour = status_style(self, {"ready": "ok", "not-answering": "fail"}.get(
            server.state, "unknown"))
        where = f" · {server.container}" if server.container else ""
        return [Text(server_key(host, server)), Text(""),
                Text(server.state + (" · shown" if server.chosen else "") + where,
                     style=colour), *[Text("") for _ in COLUMNS[3:]]]

    def _sub_rows(self, name: str, row: FleetRow) -> list[tuple[str, list[Text]]]:
        """The rows asked for under a host: its servers (`p`), its engines (`e`)."""
        out = []
        if self.per_server:
            out += [(server_key(name, s), self._server_cells(s, name)) for s in row.servers]
        if self.per_engine:
            out += [(engine_key(name, e), self._engine_cells(e, name)) for e in row.engines]
        return out

    def action_servers(self) -> None:
        """One row per server under a host that runs several, or back to one row per host."""
        self.per_server = not self.per_server
        self._sync_engines(self.query_one(DataTable))

    def _recolour(self, _theme: object) -> None:
        """A new theme (the stylesheet has been refreshed by now): every shown cell again."""
        table = self.query_one(DataTable)
        for name, row in self._shown.items():
            for column, cell in zip(COLUMNS, self._cells(row), strict=True):
                table.update_cell(name, column, cell)
        for name, row in self._shown.items():
            for key, cells in self._sub_rows(name, row):
                if key in self._engine_rows:
                    self._engine_rows[key] = cells
                    for column, cell in zip(COLUMNS, cells, strict=True):
                        table.update_cell(key, column, cell)

    def action_engines(self) -> None:
        """One row per data-parallel engine under its host, or back to one row per host."""
        self.per_engine = not self.per_engine
        self._sync_engines(self.query_one(DataTable))

    def _sync_engines(self, table: DataTable[Text]) -> None:
        """The engine rows to the hosts' newest rows: added, updated, removed, then every row
        back under its host."""
        wanted: dict[str, list[Text]] = {}
        for name, row in self._shown.items():
            wanted.update(self._sub_rows(name, row))
        moved = False
        for key in [k for k in self._engine_rows if k not in wanted]:
            table.remove_row(key)
            del self._engine_rows[key]
            moved = True
        for key, cells in wanted.items():
            old = self._engine_rows.get(key)
            if old is None:
                table.add_row(*cells, key=key)
                moved = True
            else:
                for column, cell, before in zip(COLUMNS, cells, old, strict=True):
                    if cell.plain != before.plain or cell.style != before.style:
                        table.update_cell(key, column, cell, update_width=True)
            self._engine_rows[key] = cells
        if moved:
            order = [key for name, row in self._shown.items()
                     for key in (name, *(server_key(name, s) for s in row.servers),
                                 *(engine_key(name, e) for e in row.engines))
                     if key == name or key in wanted]
            rank = {key: i for i, key in enumerate(order)}
            table.sort("host", key=lambda cell: rank.get(cell.plain, len(rank)))

    def update_row(self, row: FleetRow) -> None:
        """Note a host's new row; rows are applied together twice a second, and only the
        cells whose text changed: with 32 hosts, updating on every event re-rendered the whole
        table many times a second and made keys lag (benchmarks/findings.md)."""
        if self._shown.get(row.name) != row:
            self._pending[row.name] = row

    def _apply_pending(self) -> None:
        if not self.is_mounted:
            return
        table = self.query_one(DataTable)
        pending, self._pending = self._pending, {}
        for name, row in pending.items():
            old = self._shown.get(name)
            old_cells = self._cells(old) if old is not None else [None] * len(COLUMNS)
            for column, cell, before in zip(COLUMNS, self._cells(row), old_cells, strict=True):
                if before is None or cell.plain != before.plain or cell.style != before.style:
                    # update_width: a cell keeps its column's first width otherwise, which
                    # cut `runtime-activation` to `runtime-act`.
                    table.update_cell(name, column, cell, update_width=True)
            self._shown[name] = row
            self._ages[name] = age(row.checked_at)
        if pending and (self.per_engine or self.per_server or self._engine_rows):
            self._sync_engines(table)
        self._tick_ages(table, skip=pending)

    def _tick_ages(self, table: DataTable[Text], skip: dict[str, FleetRow]) -> None:
        """The last check's age moves on with no event: redraw the cells whose text changed."""
        for name, row in self._shown.items():
            if row.checked_at is None or name in skip:
                continue
            text = age(row.checked_at)
            if self._ages.get(name) != text:
                self._ages[name] = text
                table.update_cell(name, AGE_COLUMN, Text(text), update_width=True)

    def _host_of(self, key: str) -> str:
        """The host of a row: itself, or an engine row's host."""
        if key in self._shown:
            return key
        return next((name for name, row in self._shown.items()
                     if any(engine_key(name, e) == key for e in row.engines)
                     or any(server_key(name, s) == key for s in row.servers)), key)

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
            self.post_message(self.HostChosen(self._host_of(str(key.value))))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.HostChosen(self._host_of(str(event.row_key.value))))
