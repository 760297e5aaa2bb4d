"""The log's scroll bar repaints only when its thumb moves on screen (a following log grows by
a line about once a second on an idle console), and what it shows is what Textual's bar shows
for the same lines (Pilot; the bar read from the rendered screen)."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from tests.tui.test_log_pane import SIZE, PaneApp, info
from vllm_console.widgets.log_pane import LogPane


def bar_column(pilot: Pilot[None]) -> list[tuple[str, Any]]:
    """The log's vertical scroll bar as drawn on the screen: each row's cell and style."""
    bar = pilot.app.query_one(LogPane).log_widget.vertical_scrollbar
    region = bar.region
    strips = pilot.app.screen._compositor.render_strips()
    cells = []
    for y in range(region.y, region.bottom):
        segments = list(strips[y].crop(region.x, region.x + 1))
        cells.append(("".join(s.text for s in segments), segments[0].style))
    return cells


async def filled(pilot: Pilot[None], lines: list[str]) -> LogPane:
    pane = pilot.app.query_one(LogPane)
    pane.add_lines(lines)
    await pilot.pause(0.2)
    return pane


async def fresh_bar(lines: list[str], scroll_home: bool = False) -> list[tuple[str, Any]]:
    """The bar of a pane handed every line at once."""
    async with PaneApp().run_test(size=SIZE) as pilot:
        await filled(pilot, lines)
        if scroll_home:
            pilot.app.query_one(LogPane).log_widget.scroll_home(animate=False)
            await pilot.pause(0.2)
        return bar_column(pilot)


async def test_a_long_log_growing_a_line_at_a_time_leaves_its_bar_alone_until_it_moves() -> None:
    lines = [info(i) for i in range(2000)]
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await filled(pilot, lines)
        bar = pane.log_widget.vertical_scrollbar
        drawn = [0]
        render = bar.render

        def counted() -> Any:
            drawn[0] += 1
            return render()

        bar.render = counted  # type: ignore[method-assign]
        for i in range(2000, 2030):
            lines.append(info(i))
            pane.add_lines([lines[-1]])
            await pilot.pause(0.12)
        assert drawn[0] <= 4, f"the bar was drawn {drawn[0]} times for 30 lines"
        assert bar_column(pilot) == await fresh_bar(lines)
        pane.log_widget.scroll_home(animate=False)
        await pilot.pause(0.2)
        assert bar_column(pilot) == await fresh_bar(lines, scroll_home=True)


async def test_a_short_log_moves_its_bar_with_every_line() -> None:
    lines = [info(i) for i in range(30)]
    async with PaneApp().run_test(size=SIZE) as pilot:
        pane = await filled(pilot, lines)
        for i in range(30, 34):
            lines.append(info(i))
            pane.add_lines([lines[-1]])
            await pilot.pause(0.15)
            assert bar_column(pilot) == await fresh_bar(lines), f"after line {i}"
