"""The restart dialog: the plan, and the relaunch's environment and command line to edit.

A hint may say to relaunch with a variable set (`VLLM_USE_V2_MODEL_RUNNER=1`): `e` opens two
fields, the environment changes (`NAME=value`, `-NAME` to unset) and the whole command line,
and the plan above them shows the relaunch as a diff against the last run as they are typed.
What is relaunched is recorded on the host and carried by the new process, so later restarts
start from it. Cancel stays the default; `y` (or the Restart button) confirms, never while an
edit does not parse.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Button, Input, Static

from vllm_console.console.restart import RestartPlan
from vllm_console.console.restart.edit import edit_refused
from vllm_console.console.restart.model import shown_argv
from vllm_console.console.session.host_session import ActionError
from vllm_console.console.tui.screens.confirm import ConfirmScreen

Editor = Callable[..., RestartPlan]
"""`HostSession.edit_plan(plan, env=..., argv=...)`: the plan with the changes, or
ActionError saying what is wrong with them."""


class RestartScreen(ConfirmScreen):
    """Asks before a restart, with the launch open to edits. `plan` is what to carry out once
    it dismisses with True."""

    BINDINGS = [Binding("e", "edit", "Edit env/args", id="restart.edit")]
    AUTO_FOCUS = "#cancel"  # never a field: `y` typed at once must still mean yes

    DEFAULT_CSS = """
    RestartScreen #restart-edit { height: auto; display: none; padding-bottom: 1; }
    RestartScreen.editing #restart-edit { display: block; }
    RestartScreen #restart-error { color: $error; height: auto; }
    """

    def __init__(self, title: str, plan: RestartPlan, editor: Editor) -> None:
        super().__init__(title, plan.describe(), "Restart")
        self.planned = plan
        """The plan as made from the last run; edits always apply to it."""
        self.plan = plan
        """The plan to carry out: `planned` with the edits that parse."""
        self.error = ""
        self._editor = editor
        # The field holds the server's command line to edit, whatever restarts it (a
        # container's plan is described as `docker restart NAME`, never a command to edit).
        self._argv_shown = shown_argv(plan.argv) if plan.argv else plan.command

    def compose_more(self) -> ComposeResult:
        with Vertical(id="restart-edit"):
            yield Static("environment changes (NAME=value, -NAME to unset):")
            yield Input(placeholder="e.g. VLLM_USE_V2_MODEL_RUNNER=1", id="restart-env",
                        disabled=True)
            yield Static("command line:")
            yield Input(self._argv_shown, id="restart-argv", disabled=True)
            yield Static("", id="restart-error", markup=False)

    def more_buttons(self) -> ComposeResult:
        if not edit_refused(self.planned):
            yield Button("Edit env/args (e)", id="edit")

    def action_edit(self) -> None:
        refused = edit_refused(self.planned)
        if refused:
            self._show_error(refused)
            return
        self.add_class("editing")
        for field in self.query(Input):
            field.disabled = False
        self.query_one("#restart-env", Input).focus()

    @on(Input.Changed)
    def _edited(self) -> None:
        env = self.query_one("#restart-env", Input).value
        argv = self.query_one("#restart-argv", Input).value
        if argv.strip() == self._argv_shown:
            argv = ""
        try:
            self.plan = self._editor(self.planned, env=env, argv=argv)
        except ActionError as exc:
            self._show_error(str(exc))
            return
        self._show_error("")
        self.query_one("#confirm-body", Static).update(self.plan.describe())

    def _show_error(self, text: str) -> None:
        self.error = text
        self.query_one("#restart-error", Static).update(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.prevent_default()  # ConfirmScreen's handler would dismiss on any button
        if event.button.id == "edit":
            self.action_edit()
        elif event.button.id == "confirm":
            self.action_confirm()
        else:
            self.dismiss(False)

    def action_confirm(self) -> None:
        if self.error:
            self.notify(f"not restarting: {self.error}", severity="warning")
            return
        self.dismiss(True)
