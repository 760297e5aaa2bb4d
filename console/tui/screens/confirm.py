"""A confirmation dialog for destructive actions: Cancel is the default."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Asks before acting. Dismisses with True only when the person picks the action."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="confirm.cancel"),
                Binding("y", "confirm", "Yes", show=False, id="confirm.yes")]

    def __init__(self, title: str, body: str, action_label: str) -> None:
        super().__init__()
        self._title = title
        self._body = body
        self._action_label = action_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(self._title, id="confirm-title")
            # The body scrolls within the dialog: on a small terminal (80x24) a long plan (a
            # traced restart's environment) pushed the question and the buttons off screen.
            with VerticalScroll(id="confirm-scroll"):
                yield Static(self._body, id="confirm-body", markup=False)
            yield from self.compose_more()
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield from self.more_buttons()
                yield Button(self._action_label, id="confirm", variant="error")

    def compose_more(self) -> ComposeResult:
        """What a dialog adds below the body (the restart dialog's edit fields)."""
        yield from ()

    def more_buttons(self) -> ComposeResult:
        """Buttons a dialog adds between Cancel and the action."""
        yield from ()

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_confirm(self) -> None:
        self.dismiss(True)
