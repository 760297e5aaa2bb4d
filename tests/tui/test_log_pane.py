"""The log pane as a person uses it (Pilot, keys pressed): search like lnav, copying a line,
styling and the engine-start jump from what the parsers found."""

from __future__ import annotations

from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip

from vllm_console.console.parsers.classifier import LineKind, classify_text
from vllm_console.console.telemetry.run_log import RunLog
from vllm_console.widgets.log_pane import LogPane

SIZE = (100, 24)


class PaneApp(App[None]):
    def compose(self) -> ComposeResult:
        yield LogPane(id="log-pane")


def info(i: int, text: str = "ordinary line") -> str:
    return f"INFO 05-14 10:00:{i % 60:02d} [x.py:{i}] {text} {i}"


def engine_v1(version: str) -> str:
    return (f"(EngineCore_DP0 pid=7) INFO 05-14 10:00:00 [core.py:93] Initializing a V1 LLM "
            f"engine (v{version}) with config: model='m', speculative_config=None")


OLD_ENGINE = ("INFO 05-14 09:00:00 [llm_engine.py:237] Initializing an LLM engine (v0.6.3) "
              "with config: model='m', speculative_config=None")
ACCESS_DECOY = ('INFO:     127.0.0.1:5 - "GET /?q=Initializing a V1 LLM engine (v9) with config: '
                'HTTP/1.1" 404 Not Found')


def text_of(strip: Strip) -> str:
    return "".join(segment.text for segment in strip)


def row(pane: LogPane, y: int) -> Strip:
    """Row `y` of the pane's log (0: its top row) as rendered from what the log holds."""
    return pane.log_widget.render_line(y)


def rows(pane: LogPane) -> list[str]:
    return [text_of(row(pane, y)) for y in range(pane.log_widget.size.height)]


def span_styles(strip: Strip, needle: str) -> set[Style]:
    """The styles of the segments that spell `needle` on a rendered row."""
    return {s.style for s in strip if s.text and s.text in needle and s.style is not None}


async def pane_with(pilot: Pilot[None], lines: list[str]) -> LogPane:
    pane = pilot.app.query_one(LogPane)
    pane.add_lines(lines)
    await pilot.pause()
    return pane


async def search(pilot: Pilot[None], query: str) -> None:
    await pilot.press("slash", *query, "enter")
    await pilot.pause()


def status(pane: LogPane) -> str:
    return str(pane.query_one("#log-status").render())


# -- search like lnav ---------------------------------------------------------------------------
async def test_the_first_search_goes_to_the_newest_match_above_the_bottom() -> None:
    # 300 lines, following (the view shows the newest ~20); matches at lines 11, 151, 201,
    # none in view. lnav goes to the newest match above where you are; the pane went to the
    # oldest line in the buffer (line 11), far from anything on screen.
    lines = [info(i, "needle here" if i in (10, 150, 200) else "ordinary") for i in range(300)]
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, lines)
        await search(pilot, "needle")
        assert pane.visible_lines()[pane._match_y].endswith(" 200")
        assert "3/3" in status(pane)
        await pilot.press("N")  # previous: older
        assert pane.visible_lines()[pane._match_y].endswith(" 150")
        assert "2/3" in status(pane)
        await pilot.press("n", "n")  # next: newer, then around to the oldest
        assert pane.visible_lines()[pane._match_y].endswith(" 10")
        assert "1/3" in status(pane)


async def test_the_current_match_stands_out_and_line_numbers_show_while_searching() -> None:
    lines = [info(i, "needle" if i in (5, 7) else "plain") for i in range(10)]
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, lines)
        assert not text_of(row(pane, 7)).lstrip().startswith("8 "), "no numbers before"
        await search(pilot, "needle")
        assert pane.visible_lines()[pane._match_y].endswith(" 7")  # the newest above bottom
        current, other = row(pane, 7), row(pane, 5)
        assert text_of(current).lstrip().startswith("8 "), text_of(current)
        assert text_of(other).lstrip().startswith("6 "), text_of(other)
        current_styles, other_styles = span_styles(current, "needle"), span_styles(other,
                                                                                   "needle")
        assert current_styles
        assert other_styles
        assert current_styles != other_styles, "the current match looks like any other"
        await pilot.press("escape")
        await pilot.pause()
        assert text_of(row(pane, 7)).startswith("INFO"), "numbers go with the search"


async def test_the_match_count_follows_new_lines() -> None:
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, [info(i, "needle") for i in range(3)])
        await search(pilot, "needle")
        assert "3/3" in status(pane)
        pane.add_lines([info(i, "needle") for i in range(3, 5)] + [info(9)])
        await pilot.pause()
        assert "3/5" in status(pane)


async def test_an_empty_filtered_pane_says_why() -> None:
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, [info(i) for i in range(5)])
        pane.log_widget.focus()
        await pilot.press("l", "l")  # all -> info -> warning
        await pilot.pause()
        assert pane.level == "warning"
        assert "no lines at level warning" in rows(pane)[0]
        await pilot.press("l", "l")  # back to all
        await pilot.pause()
        assert rows(pane)[0].startswith("INFO")


async def test_an_empty_regex_filter_says_why() -> None:
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, [info(i) for i in range(5)])
        pane.set_filter("nothing-like-this")
        await pilot.pause()
        assert "no lines match /nothing-like-this/" in rows(pane)[0]


# -- copying ------------------------------------------------------------------------------------
async def test_y_copies_the_current_match_else_the_newest_line_in_view() -> None:
    lines = [info(i, "needle" if i == 3 else "plain") for i in range(8)]
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, lines)
        pane.log_widget.focus()
        await pilot.press("y")
        assert pilot.app.clipboard == lines[-1]
        await search(pilot, "needle")
        await pilot.press("y")
        assert pilot.app.clipboard == lines[3]


# -- what the parsers found ---------------------------------------------------------------------
async def test_lines_are_styled_from_what_the_parsers_found() -> None:
    # A WARNING line without a process tag (vLLM's own format) was never styled: the pane looked
    # for " WARNING ". An access-log line whose request spells "SpecDecoding metrics" is a
    # client's text, not a metrics line: the pane coloured it as one.
    warning = "WARNING 05-14 10:00:01 [x.py:2] falling back to something slower"
    access = ('INFO:     127.0.0.1:5 - "GET /SpecDecoding%20metrics: HTTP/1.1" 404 Not Found')
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, [info(0), warning, access])
        warn = Style.parse(pane.log_widget.looks["warn"]).color
        spec = Style.parse(pane.log_widget.looks["spec"]).color
        colours = [{s.style.color for s in row(pane, y) if s.style} for y in range(3)]
        assert warn in colours[1]
        assert warn not in colours[0]
        assert spec not in colours[0]
        assert spec not in colours[2]


async def test_e_visits_every_engine_start_the_parsers_count() -> None:
    lines = [engine_v1("0.10.0"), info(1), OLD_ENGINE, info(2), engine_v1("0.11.0"), info(3),
             ACCESS_DECOY, info(4)]
    notable, _ = RunLog().feed_texts(lines)
    starts = [i for i, event in notable if event.kind is LineKind.ENGINE_START]
    assert starts == [0, 2, 4]
    assert classify_text(OLD_ENGINE).kind is LineKind.ENGINE_START
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, lines)
        pane.log_widget.focus()
        visited = []
        for _ in range(4):
            await pilot.press("e")
            visited.append(pane._match_y)
        assert visited == [4, 2, 0, 4], "newest first, then older, then around"


# -- a pane that cannot be seen ------------------------------------------------------------------
async def test_lines_that_arrive_while_another_screen_is_shown_appear_once_in_order() -> None:
    from textual.screen import Screen

    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, [info(i) for i in range(3)])
        shown = len(pane.log_widget.lines)
        await pilot.app.push_screen(Screen())
        await pilot.pause()
        for start in range(3, 30, 9):  # three batches while the host screen is away
            pane.add_lines([info(i) for i in range(start, start + 9)])
        assert len(pane.log_widget.lines) == shown, "an unseen pane renders nothing"
        assert pane.entry_count == 30
        pilot.app.pop_screen()
        await pilot.pause()
        assert list(pane.log_widget.lines) == [info(i) for i in range(30)]
        assert pane.log_widget.numbers == list(range(1, 31))


async def test_a_batch_bigger_than_the_pane_keeps_the_newest_lines_numbered() -> None:
    async with PaneApp().run_test(size=SIZE) as pilot:
        small = LogPane(max_lines=50, id="small")
        await pilot.app.mount(small)
        for start in range(0, 120, 40):
            small.add_lines([info(i) for i in range(start, start + 40)])
        lines = small.visible_lines()
        assert lines == [info(i) for i in range(70, 120)]
        assert small.log_widget.numbers == list(range(71, 121))


async def test_a_batch_bigger_than_the_pane_shows_what_every_line_shown_would() -> None:
    # `add_batch` makes display-safe only the lines the pane keeps: the same lines, numbers,
    # redaction and styles as showing every line of the batch and dropping the oldest.
    from vllm_console.console.hostclient.follower import (
        FollowNotice,
        LogBatch,
        LogEntry,
        NoticeKind,
    )

    warning = "WARNING 05-14 10:00:01 [x.py:2] slow {}"
    texts = [warning.format(i) if i % 17 == 0 else
             f"'api_key': 'sk-{i}' \x1b[2J \u202e{i}" if i % 13 == 0 else info(i)
             for i in range(130)]
    batch = LogBatch.of((LogEntry(i, t) for i, t in enumerate(texts)),
                        notices=(FollowNotice(NoticeKind.CAUGHT_UP),))
    notable, _ = RunLog().feed_texts(texts)
    async with PaneApp().run_test(size=SIZE) as pilot:
        fast, every = LogPane(max_lines=50, id="fast"), LogPane(max_lines=50, id="every")
        await pilot.app.mount(fast, every)
        for pane in (fast, every):
            pane.add_lines([info(i) for i in range(5)])  # numbered 1-5
        fast.add_batch(batch, notable)
        every.add_lines(batch.display_lines(), [(i + 1, event) for i, event in notable])
        assert fast.visible_lines() == every.visible_lines()
        assert fast.visible_lines()[-1] == batch.entries[-1].display()
        assert "sk-117" not in "".join(fast.visible_lines())
        assert fast.log_widget.numbers == every.log_widget.numbers == list(range(87, 137))
        assert fast._kinds == every._kinds
        assert LineKind.WARNING in fast._kinds.values()


async def test_a_full_following_pane_shows_the_newest_lines() -> None:
    # Once the pane holds max_lines, a batch drops as many old lines as it adds: the view is
    # already at the end, so it does not scroll, yet every row shows another line.
    async with PaneApp().run_test(size=SIZE) as pilot:
        small = LogPane(max_lines=30, id="small")
        await pilot.app.query_one("#log-pane").remove()
        await pilot.app.mount(small)
        small.add_lines([info(i) for i in range(30)])
        await pilot.pause(0.2)
        small.add_lines([info(i) for i in range(30, 35)])
        await pilot.pause(0.2)
        log = small.log_widget
        on_screen = log.render_lines(Region(0, 0, log.size.width, log.size.height))
        shown = [text_of(strip) for strip in on_screen if text_of(strip).strip()]
        assert shown[-1].rstrip().endswith(" 34"), shown[-3:]


async def test_a_following_pane_scrolled_up_by_hand_stays_where_it_was() -> None:
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, [info(i) for i in range(100)])
        log = pane.log_widget
        log.focus()
        await pilot.press("home")
        await pilot.pause()
        top = log.scroll_offset.y
        pane.add_lines([info(i) for i in range(100, 110)])
        await pilot.pause(0.2)
        assert log.scroll_offset.y == top, "new lines pulled the view back to the bottom"


async def test_lines_given_before_the_pane_is_mounted_are_on_screen_without_more_lines() -> None:
    # The app hands a new host screen the lines followed so far while it is being composed;
    # a quiet log sends nothing after that, so they must show by themselves.
    async with PaneApp().run_test(size=SIZE) as pilot:
        late = LogPane(id="late")
        late.add_lines([info(i) for i in range(5)])
        await pilot.app.mount(late)
        await pilot.pause(0.2)
        assert list(late.log_widget.lines) == [info(i) for i in range(5)]


async def test_line_numbers_are_the_logs_own_under_a_filter() -> None:
    lines = [info(i, "needle" if i % 10 == 0 else "plain") for i in range(40)]
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, lines)
        pane.set_filter("needle")
        await pilot.pause()
        await search(pilot, "needle")
        assert "4/4" in status(pane)
        shown = [text.strip() for text in rows(pane) if text.strip()]
        assert [text.split()[0] for text in shown] == ["1", "11", "21", "31"]


# -- the look follows the styles ----------------------------------------------------------------
class RecolouredApp(PaneApp):
    CSS = "Screen.-alt LogLines { color: #ff0000; }"


async def test_plain_lines_carry_the_logs_colour_and_follow_a_class_change_above_them() -> None:
    # `Text.render` drops a text's own style when the text has no spans: plain lines came out
    # with no colour at all, so a stale host screen's `text-opacity` had nothing to fade. And a
    # cached strip must not keep the old look once a class on an ancestor changes the style.
    async with RecolouredApp().run_test(size=SIZE) as pilot:
        pane = await pane_with(pilot, [info(0), info(1)])
        before = pane.log_widget.rich_style.color
        assert before is not None
        assert {s.style.color for s in row(pane, 0) if s.text.strip() and s.style} == {before}
        pilot.app.screen.add_class("-alt")
        await pilot.pause()
        red = pane.log_widget.rich_style.color
        assert red is not None
        assert red != before
        assert {s.style.color for s in row(pane, 0) if s.text.strip() and s.style} == {red}
        pilot.app.screen.remove_class("-alt")
        await pilot.pause()
        assert {s.style.color for s in row(pane, 0) if s.text.strip() and s.style} == {before}
