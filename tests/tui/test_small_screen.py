"""The console at the sizes a new user's terminal has (80x24, 120x36), on the recorded
incident: the way out and the help stay in sight, the root cause's row says what to fix, a
maximised checklist tells each link's story, the header is never cut in the middle of a word,
and `/` searches from any pane without a typed word ever running as keys (Pilot)."""

from __future__ import annotations

import pytest
from textual import events

from tests.app_support import screen_text, wait_until
from tests.snapshot_support import DRAFT_DIR, replay_app
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.host import HostScreen

SMALL = [(80, 24), (120, 36)]


def host(app: ConsoleApp) -> HostScreen:
    screen = app.screen_for("gpu1")
    assert screen is not None
    return screen


def footer_line(app: ConsoleApp) -> str:
    return screen_text(app).splitlines()[-1]


@pytest.mark.parametrize("size", SMALL)
async def test_quit_and_help_stay_on_the_footer(size: tuple[int, int]) -> None:
    """Below 120x40 the footer line was cut after `R Traced restart  a Apply`: `q Quit` and
    `? Help` (a new user's first two questions) were never on it, and a maximised pane lost
    the footer altogether."""
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        for focus in ("log", "checklist"):
            if focus == "checklist":
                host(app).checklist.focus()
                await pilot.pause()
            line = footer_line(app)
            assert "q Quit" in line, line
            assert "? Help" in line, line
            assert len(line.rstrip()) <= size[0]
        await pilot.press("3")  # the checklist, maximised
        await pilot.pause()
        line = footer_line(app)
        assert "q Quit" in line, line
        assert "? Help" in line, line


@pytest.mark.parametrize("size", SMALL)
async def test_the_root_cause_row_names_the_field_and_the_file(size: tuple[int, int]) -> None:
    """The row said `config correct  fail  ROOT CAUSE` and nothing of what to fix."""
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        row = next(line for line in screen_text(app).splitlines() if "ROOT CAUSE" in line)
        assert "config correct" in row
        assert "mask_token_id +2 in " in row, row
        assert "config.json" in row.split(" in ", 1)[1], row
        assert "…" not in row.split("config.json", 1)[1], "the row is cut after the file"


async def test_the_root_cause_row_gives_the_whole_path_when_it_fits() -> None:
    app = replay_app()
    async with app.run_test(size=(250, 60)) as pilot:
        await pilot.pause(0.3)
        row = next(line for line in screen_text(app).splitlines() if "ROOT CAUSE" in line)
        assert f"mask_token_id +2 in {DRAFT_DIR}/config.json" in row, row


@pytest.mark.parametrize("size", SMALL)
async def test_a_maximised_checklist_shows_each_links_summary(size: tuple[int, int]) -> None:
    """Maximised (3, or z on it), the checklist showed the same four verdict lines as the
    compact layout, in a screen of blank rows."""
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        await pilot.press("3")
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        for summary in ("vLLM 0.1.dev16016", "native config: HF reads it",
                        "no SWA evidence in the current run", "3 field(s) differ from"):
            assert summary in text, summary
        assert "→ run `vllm-console restart" in text  # the unproven link's hint
        await pilot.press("z")  # back: the compact rows again
        await pilot.pause()
        assert "native config: HF reads it" not in " ".join(screen_text(app).split())


async def test_the_header_at_80_columns_is_never_cut_mid_word() -> None:
    """At 80 columns the header ran past the edge and the terminal cut it wherever the
    column fell (`restart: waiting for the new server on po`)."""
    app = replay_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        screen = host(app)
        screen.begin_restart()
        screen._restart_text = ("restart: waiting · the new server has not answered "
                                "/health on 127.0.0.1:8000 for 12 s")
        screen._render_header()
        await pilot.pause()
        whole = screen.header.fitted(10_000).plain.split()
        line = screen_text(app).splitlines()[0].rstrip()
        assert len(line) <= 80
        for word in line.split():
            assert word in whole or word.endswith("…") and word[:-1] in whole, (word, line)
        assert line.split()[-1].endswith("…"), "the activity says it goes on"
        for kept in ("gpu1", "connected", "restart:"):
            assert kept in line
        # The serving figures under it, one line in this layout, likewise: each word is one
        # of the whole line's (as a 200-column terminal shows it).
        strip = screen_text(app).splitlines()[1].rstrip()
        await pilot.resize_terminal(200, 24)
        await pilot.pause(0.2)
        figures = screen_text(app).splitlines()[1].split()
        assert strip.split()[0] == "engine"
        assert all(word in figures for word in strip.split()), (strip, figures)
        assert strip.count("[") == strip.count("]"), strip  # not `[<5` of `[<5 s ago]`
        assert " ".join(strip.split()) in " ".join(figures), (strip, figures)


async def test_slash_searches_the_log_from_any_pane() -> None:
    """`/` with the checklist focused did nothing, and the words typed next ran as keys: `t`
    switched (and saved) the theme, `a` offered to apply the reference."""
    app = replay_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.3)
        screen = host(app)
        theme = app.theme
        for pane in (screen.checklist, screen.spec):
            screen.set_focus(pane)
            await pilot.press("slash", "t", "a", "r", "c")
            await pilot.pause()
            assert app.focused is screen.log_pane._prompt
            assert screen.log_pane._prompt.value == "tarc"
            assert app.theme == theme
            assert len(app.screen_stack) == 2  # no dialog either
            await pilot.press("escape")
        screen.set_focus(screen.checklist)
        await pilot.press("3", "slash")  # maximised: the layout comes back with the box
        await pilot.pause()
        assert screen.maximized is None
        assert app.focused is screen.log_pane._prompt


async def test_keys_typed_right_after_slash_land_in_the_search_box() -> None:
    """A paste, a fast typist or tmux send-keys: keys queued behind `/` were routed to the
    pane that had focus before the search box opened (in a real terminal `/tpot` switched
    the theme twice)."""
    app = replay_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.3)
        screen = host(app)
        theme = app.theme
        for pane in (screen.log_pane.log_widget, screen.checklist):
            screen.log_pane.set_search("")
            screen.set_focus(pane)
            await pilot.pause()
            for key, char in (("slash", "/"), ("t", "t"), ("a", "a"), ("slash", "/"),
                              ("r", "r"), ("enter", "\r")):
                event = events.Key(key, char)
                event.set_sender(app)
                assert app._driver is not None
                app._driver.send_message(event)  # all queued before the first is handled
            await wait_until(pilot, lambda: app.focused is screen.log_pane.log_widget
                             and screen.log_pane._search_text != "", 5, "the search")
            assert app.theme == theme
            assert len(app.screen_stack) == 2
            assert screen.log_pane._search_text == "ta/r"  # `/` in the box is typed
            assert app.focused is screen.log_pane.log_widget
        # The filter prompt, opened by `f` in the log pane, the same way.
        for key, char in (("f", "f"), ("t", "t"), ("f", "f"), ("enter", "\r")):
            event = events.Key(key, char)
            event.set_sender(app)
            assert app._driver is not None
            app._driver.send_message(event)
        await wait_until(pilot, lambda: app.focused is screen.log_pane.log_widget
                         and screen.log_pane._filter_text != "", 5, "the filter")
        assert app.theme == theme
        assert screen.log_pane._filter_text == "tf"
