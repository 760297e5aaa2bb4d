"""What a host screen shows for a URL-only server: the panes that need the host say so once,
with the way to add SSH; the header says what this view is (URL, engine version, model)."""

from __future__ import annotations

from console.draft_diff import DraftDiff
from console.screens.host import HostScreen
from console.sources.url import UrlSession
from widgets.checklist import ChecklistState
from widgets.engine_tree import EngineView
from widgets.gpu_pane import GpuView


def show_url_only(screen: HostScreen, session: UrlSession) -> None:
    """Fill the host-only panes with their "needs SSH" line (once, when the screen is shown)."""
    screen.gpus.view = GpuView(error=session.needs_ssh("GPU telemetry"))
    screen.checklist.state = ChecklistState(error=session.needs_ssh("the verification chain"))
    screen.diff.diff = DraftDiff(error=session.needs_ssh("the draft config diff"))
    screen.engine.view = EngineView(note=session.needs_ssh("the engine config (from the log)"))
    screen.log_pane.add_lines([session.needs_ssh("the serve log"),
                               session.needs_ssh("restart")])
    screen.header.activity = session.url_telemetry.summary()
