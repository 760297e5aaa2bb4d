"""The server switcher (`p`, and the command palette): the host's servers with port, model,
state, where each runs and the GPUs it holds; choosing one moves every pane to it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from vllm_console.console.telemetry.servers_view import SwitcherRow


class ServerSwitcher(ModalScreen[int | None]):
    """Dismisses with the chosen server's port (None: cancelled, or the one shown)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="servers.cancel")]
    DEFAULT_CSS = """
    ServerSwitcher { align: center middle; }
    #servers-box { width: auto; max-width: 100%; height: auto; border: round $accent;
                   background: $surface; padding: 0 1; }
    #servers-list { height: auto; max-height: 20; }
    """

    def __init__(self, host: str, rows: list[SwitcherRow]) -> None:
        super().__init__()
        self._host = host
        self._rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="servers-box"):
            yield Static(f"Servers on {self._host} (enter: work on it, esc: cancel)",
                         markup=False)
            yield OptionList(*(Option(row.text, id=str(n), disabled=row.port is None)
                               for n, row in enumerate(self._rows)), id="servers-list")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = next((n for n, r in enumerate(self._rows) if r.chosen), 0)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        row = self._rows[int(event.option.id or 0)]
        self.dismiss(None if row.chosen else row.port)

    def action_cancel(self) -> None:
        self.dismiss(None)
