"""Data that reaches a pane between its own mount and its children's (a busy machine, a tab
mounted lazily) is shown once the children are there, never lost and never an error."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from console.draft_diff import DraftDiff
from widgets.draft_diff import DraftDiffPane
from widgets.log_pane import LogPane


class Bare(App[None]):
    def compose(self) -> ComposeResult:
        yield Vertical(id="box")


async def test_a_diff_and_log_lines_set_before_the_children_mount_are_shown() -> None:
    app = Bare()
    async with app.run_test(size=(100, 30)) as pilot:
        diff = DraftDiffPane(id="diff")
        pane = LogPane(id="log-pane")
        app.query_one("#box").mount(diff, pane)  # not awaited: nothing is mounted yet
        diff.diff = DraftDiff(path="/models/draft/config.json", error="no such file")
        pane.add_lines(["INFO 05-14 10:00:00 [x.py:1] first line"])
        pane.follow = False
        await pilot.pause()
        body = str(diff.query_one("#diff-body", Static).render())
        assert "cannot compare: no such file" in body
        assert pane.visible_lines() == ["INFO 05-14 10:00:00 [x.py:1] first line"]
        status = str(pane.query_one("#log-status", Static).render())
        assert "paused" in status
