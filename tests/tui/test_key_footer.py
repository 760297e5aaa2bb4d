"""The footer line: the keys of the focused pane and the screen, kept current as focus moves,
and a key clicked there is pressed (Pilot, on the recorded incident)."""

from __future__ import annotations

from tests.snapshot_support import replay_app
from vllm_console.widgets.key_footer import KeyFooter

SIZE = (160, 50)


async def test_the_footer_follows_focus_and_a_clicked_key_is_pressed() -> None:
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        screen = app.screen_for("gpu1")
        footer = screen.query_one(KeyFooter)
        text = str(footer.render())
        for shown in ("/ Search", "q Quit", "palette"):
            assert shown in text
        screen.checklist.focus()
        await pilot.pause()
        text = str(footer.render())
        assert "Follow" not in text  # the log pane's own keys went with its focus
        for shown in ("Evidence", "q Quit", "/ Search"):  # `/` searches from any pane
            assert shown in text
        screen.log_pane.log_widget.focus()
        await pilot.pause()
        text = str(footer.render())
        assert screen.log_pane.follow is True
        await pilot.click(KeyFooter, offset=(text.index("F Follow") + 1, 0))
        await pilot.pause()
        assert screen.log_pane.follow is False
