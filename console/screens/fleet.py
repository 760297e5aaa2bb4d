"""Several hosts: one row each (state, GPU utilisation, acceptance length, broken link);
Enter opens a host. One host's trouble only ever changes its own row."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

COLUMNS = ("host", "link", "GPU util", "acceptance length", "broken link")


@dataclass(frozen=True)
class FleetRow:
    """One host as the fleet table shows it."""

    name: str
    state: str
    gpu_util: float | None
    acceptance: float | None
    broken_link: str | None
    checked: bool


class FleetScreen(Screen[None]):
    """The fleet table."""

    BINDINGS = [Binding("enter", "open", "Open host", id="fleet.open")]

    class HostChosen(Message):
        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def __init__(self, rows: list[FleetRow]) -> None:
        super().__init__()
        self._rows = rows
        self._shown: dict[str, FleetRow] = {row.name: row for row in rows}
        self._pending: dict[str, FleetRow] = {}

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

    def _cells(self, row: FleetRow) -> list[Text]:
        v = self.app.theme_variables
        ok, fail, unknown = v.get("status-ok", ""), v.get("status-fail", ""), \
            v.get("status-unknown", "")
        state_colour = ok if row.state == "connected" else fail
        broken = ("—" if not row.checked else "all pass") if row.broken_link is None \
            else row.broken_link
        return [Text(row.name, style="bold"), Text(row.state, style=state_colour),
                Text("?" if row.gpu_util is None else f"{row.gpu_util:.0f}%"),
                Text("—" if row.acceptance is None else f"{row.acceptance:.2f}"),
                Text(broken, style=fail if row.broken_link else (ok if row.checked
                                                                 else unknown))]

    def update_row(self, row: FleetRow) -> None:
        """Note a host's new row; rows are applied together twice a second, and only the
        cells whose text changed: with 32 hosts, updating on every event re-rendered the whole
        table many times a second and made keys lag (benchmarks/findings.md)."""
        if self._shown.get(row.name) != row:
            self._pending[row.name] = row

    def _apply_pending(self) -> None:
        if not self._pending or not self.is_mounted:
            return
        table = self.query_one(DataTable)
        pending, self._pending = self._pending, {}
        for name, row in pending.items():
            old = self._shown.get(name)
            old_cells = self._cells(old) if old is not None else [None] * len(COLUMNS)
            for column, cell, before in zip(COLUMNS, self._cells(row), old_cells, strict=True):
                if before is None or cell.plain != before.plain or cell.style != before.style:
                    table.update_cell(name, column, cell)
            self._shown[name] = row

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
            self.post_message(self.HostChosen(str(key.value)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.HostChosen(str(event.row_key.value)))
