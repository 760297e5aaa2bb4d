"""Data that reaches a pane while its children mount or unmount (a busy machine, a tab mounted
lazily, the console closing) is shown once they are there, never lost and never an error."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.message_pump import NoActiveAppError
from textual.widgets import Log, Static

from console.draft_diff import DraftDiff
from widgets.draft_diff import DraftDiffPane
from widgets.log_pane import LogPane, _Log


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


def test_a_log_measured_after_it_was_detached_is_no_error() -> None:
    # `q` with a batch in flight: the log's width thread can run once the log is out of the
    # DOM. Stock Textual's thread then raised NoActiveAppError, and the console exited with it.
    detached = _Log()
    with pytest.raises(NoActiveAppError):
        Log._update_size.__wrapped__(detached, 0, ["a line"])  # type: ignore[attr-defined]
    assert _Log._update_size.__wrapped__(detached, 0, ["a line"]) is None  # type: ignore[attr-defined]
