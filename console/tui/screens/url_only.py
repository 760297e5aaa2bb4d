"""What a host screen shows for a URL-only server: the panes that need the host say so once,
with the way to add SSH; the header says what this view is (URL, engine version, model: the
screen's `serve_summary`)."""

from __future__ import annotations

from checks.draft_diff import DraftDiff
from console.sources.url import UrlSession
from console.tui.screens.host import HostScreen
from widgets.checklist import ChecklistState


def show_url_only(screen: HostScreen, session: UrlSession) -> None:
    """Give the host-only panes their "needs SSH" line (once, as the screen is made)."""
    screen.show_checks(ChecklistState(error=session.needs_ssh("the verification chain")))
    screen.show_diff(DraftDiff(error=session.needs_ssh("the draft config diff")))
    screen.show_unavailable(
        gpu=session.needs_ssh("GPU telemetry"),
        engine=session.needs_ssh("the engine config (from the log)"),
        log=(session.needs_ssh("the serve log"), session.needs_ssh("restart")))
