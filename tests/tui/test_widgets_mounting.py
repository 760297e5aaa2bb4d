"""Panes mounted bare in an app: data that reaches a pane while its children mount or unmount
(a busy machine, a tab mounted lazily, the console closing) is shown once they are there, never
lost and never an error; and what a pane says, line by line."""

from __future__ import annotations

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.message_pump import NoActiveAppError
from textual.widgets import Log, Static

from vllm_console.checks.draft_diff import DraftDiff
from vllm_console.widgets.draft_diff import DraftDiffPane
from vllm_console.widgets.log_lines import LogLines
from vllm_console.widgets.log_pane import LogPane, display_safe


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


def test_a_log_measured_off_the_dom_is_no_error() -> None:
    # `q` with a batch in flight: stock Textual measured the lines in a thread that then looked
    # for the app through the log's parents, and raised NoActiveAppError once the log was out
    # of the DOM, ending the console with a traceback. The pane's log measures on the loop.
    detached = LogLines(100, {})
    with pytest.raises(NoActiveAppError):
        Log._update_size.__wrapped__(detached, 0, ["a line"])  # type: ignore[attr-defined]
    detached._update_size(0, ["a line", "wide 日本語"])
    assert detached._width == cell_len("wide 日本語")  # CJK: two cells each
    detached._update_size(0, ["x" * 30])
    assert detached._width == 30
    detached._update_size(0, ["a\tb" * 10])  # a tab is as wide as it expands
    assert detached._width == len(("a\tb" * 10).expandtabs())


def test_lines_are_made_inert_once_per_batch() -> None:
    plain = ["INFO 05-14 10:00:00 [x.py:1] ok", "WARNING 05-14 10:00:01 [x.py:2] hm"]
    assert display_safe(plain) == plain
    hostile = display_safe(["ok", "\x1b[2Jcleared\x07", "\u202eevil"])
    assert hostile[0] == "ok"
    assert "\x1b" not in hostile[1]
    assert "\\x1b" in hostile[1]
    assert "\u202e" not in hostile[2]
    assert display_safe(["y" * 5000])[0].endswith("[+3000 chars]")


async def test_a_configured_drafter_with_no_drafts_yet_reads_on_two_lines() -> None:
    from vllm_console.console.parsers.engine import SpeculativeSettings
    from vllm_console.console.telemetry.spec_decode import SpecDecodeState, SpecDecodeStatus
    from vllm_console.widgets.spec_pane import SpecPane, SpecView

    app = Bare()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = SpecPane()
        await app.query_one("#box").mount(pane)
        pane.view = SpecView(SpecDecodeState(SpecDecodeStatus.NO_EVIDENCE, SpeculativeSettings(
            "dflash", "/models/Qwen3.6-27B-DFlash/", 15)), 6.4)
        await pilot.pause()
        text = pane.render()
        assert str(text).splitlines() == [
            "dflash · 15 speculative tokens · Qwen3.6-27B-DFlash",
            "configured; no drafts seen yet (idle server, or still starting)"]
