"""The log pane's lines: Textual's `Log`, with a frame that costs what changed.

Why not the stock `Log` as it is (measured, docs/benchmarks.md):

- Each `write_lines` set `virtual_size`, a reactive with `layout=True`: every batch of a
  streaming log re-laid-out and repainted the whole screen (header, footer, every pane). Here
  the size changes without a layout; a layout happens only when a scrollbar appears or goes.
- Stock `Log` caches rendered lines only while text is selected: every frame re-built and
  re-highlighted every visible line. Here a line's strip is cached by its number until its
  look changes (theme, search), so a frame renders only the lines that are new on screen.
- It measured line widths in a thread worker per batch, which raised `NoActiveAppError` once
  the log had left the DOM (`q` with a batch in flight); here on the loop, once per batch.

It also numbers its lines (the pane's entry numbers, kept across filters), shows them in a
gutter while searching, marks the current match, and says why it is empty when a filter hides
everything. Styles come from the parsers' classification (`kinds`), not from substrings.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Log

from vllm_console.console.parsers.classifier import LineKind
from vllm_console.widgets.quiet_scrollbar import QuietScrollBar

# What a classified line looks like: a key of `LogLines.looks` (the pane fills them from the
# theme). Kinds not named here (throughput, start-up steps, ...) are plain.
KIND_STYLE = {LineKind.SPEC_DECODE: "spec", LineKind.AUX_LAYERS: "aux",
              LineKind.ERROR: "fail", LineKind.WARNING: "warn", LineKind.ENGINE_START: "start"}


class LogLines(Log):
    """Lines with numbers; `append` is the one way in while streaming."""

    def __init__(self, max_lines: int, kinds: Mapping[int, LineKind], *,
                 id: str | None = None) -> None:
        super().__init__(max_lines=max_lines, highlight=False, id=id)
        self.kinds = kinds  # the pane's: line number -> what the parsers found
        self.numbers: list[int] = []  # parallel to `_lines`, ascending
        self.looks = {"spec": "bold cyan", "aux": "bold magenta", "warn": "yellow",
                       "fail": "bold red", "start": "bold", "search": "reverse",
                       "current": "bold reverse yellow", "gutter": "dim"}
        self.search: Callable[[str], list[tuple[int, int]]] | None = None
        self.current = -1  # the line number of the current match, -1: none
        self.numbered = False  # line numbers shown (while searching)
        self.placeholder = ""  # shown when there is no line (why the pane is empty)
        self._strips: LRUCache[int, Strip] = LRUCache(4096)
        self._frame_style: Style | None = None  # while a frame renders (`render_lines`)

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """Textual's, but a `QuietScrollBar`: a growing log moves its thumb far less often
        than every batch."""
        if self._vertical_scrollbar is None:
            bar = QuietScrollBar(vertical=True, name="vertical",
                                 thickness=self.scrollbar_size_vertical)
            bar.display = False
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar

    # -- content ---------------------------------------------------------------------------------
    @property
    def line_count(self) -> int:
        return len(self._lines)

    def append(self, lines: Sequence[str], numbers: Sequence[int], follow: bool) -> None:
        """Add display-safe lines (`display_safe`: no control character but a tab) at the
        bottom; scroll to them when following. Nothing is repainted unless it is on screen:
        new lines below the view change only the scrollbar."""
        if not lines:
            return
        at_end = self.is_vertical_scroll_end  # scrolled up by hand: stay there, as stock Log
        start = len(self._lines)
        self._lines.extend(lines)
        self.numbers.extend(numbers)
        self._prune_max_lines()
        dropped = start + len(lines) - len(self._lines)
        self._update_size(self._updates, list(lines))
        if follow and at_end and not self.is_vertical_scrollbar_grabbed:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            if dropped:  # full: the view stays at the end, and every row shows another line
                self.refresh()
        elif dropped:  # paused: keep the same lines in view as the oldest go
            self.scroll_to(y=max(0, self.scroll_offset.y - dropped), animate=False,
                           immediate=True)
            self.refresh()
        elif start < self.scroll_offset.y + self.size.height:
            self.refresh_lines(start, len(lines))

    def replace(self, lines: Sequence[str], numbers: Sequence[int], follow: bool) -> None:
        """All the lines anew (a filter changed)."""
        self.clear()
        self.append(lines, numbers, follow)
        self.refresh()

    def y_of(self, number: int) -> int:
        """The row in `_lines` of a line number (its place, or where it would be)."""
        return bisect_left(self.numbers, number)

    def restyle(self) -> None:
        """The look changed (theme, search, current match): render the lines anew."""
        self._strips.clear()
        self.refresh()

    def _prune_max_lines(self) -> None:
        over = len(self._lines) - (self.max_lines or sys.maxsize)
        if over > 0:
            del self._lines[:over]
            del self.numbers[:over]

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if lines:
            # The pane's lines are display-safe: ASCII ones hold no control but a tab (which
            # `_process_line` expands), so without a tab their length is their width. Checking
            # each character as `plain_ascii` did cost ~0.1 µs a line of a flood.
            joined = "".join(lines)
            if joined.isascii() and "\t" not in joined:
                width = max(map(len, lines))
            else:
                process = self._process_line
                width = max(cell_len(process(line)) for line in lines)
            self._update_maximum_width(updates, width)
        else:
            self._set_virtual_size(Size(self._width, len(self._lines)))

    def _update_maximum_width(self, updates: int, size: int) -> None:
        if updates == self._updates:
            self._width = max(size, self._width)
            self._set_virtual_size(Size(self._width, len(self._lines)))

    def _set_virtual_size(self, size: Size) -> None:
        """`virtual_size` without the screen-wide layout its reactive asks for: only the
        scrollbars depend on it, and they ask for a layout themselves when they appear. A
        scrollbar is repainted only when its own dimension changed (the horizontal one cost
        as much as the lines while a log grew)."""
        old = self.virtual_size
        if size == old:
            return
        self.set_reactive(Widget.virtual_size, size)
        self._refresh_scrollbars()
        width, height = self.container_size
        if self.show_vertical_scrollbar and size.height != old.height:
            bar = self.vertical_scrollbar
            bar.window_virtual_size = size.height
            bar.window_size = height - self.scrollbar_size_horizontal
        if self.show_horizontal_scrollbar and size.width != old.width:
            bar = self.horizontal_scrollbar
            bar.window_virtual_size = size.width
            bar.window_size = width - self.scrollbar_size_vertical
        self.scroll_x = self.validate_scroll_x(self.scroll_x)
        self.scroll_y = self.validate_scroll_y(self.scroll_y)

    def clear(self) -> LogLines:
        super().clear()
        self.numbers.clear()
        self._strips.clear()
        self._set_virtual_size(Size(0, 0))
        return self

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def selection_updated(self, selection: object) -> None:
        self._strips.clear()
        super().selection_updated(selection)  # type: ignore[arg-type]

    # -- painting --------------------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        """A frame's rows, the pane's style worked out once for all of them: `rich_style`
        walks the styles of every ancestor, and per row it was most of a row's cost."""
        self._frame_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def _render_line(self, y: int, scroll_x: int, width: int) -> Strip:
        rich_style = self._frame_style or self.rich_style
        if y >= len(self._lines):
            if y == 0 and self.placeholder:
                look = rich_style + Style(italic=True, dim=True)
                return Strip([Segment(self.placeholder, look)]).crop_extend(0, width, rich_style)
            return Strip.blank(width, rich_style)
        if not self.numbered:
            return self._render_line_strip(y, rich_style).crop_extend(
                scroll_x, scroll_x + width, rich_style).apply_offsets(scroll_x, y)
        digits = len(str(self.numbers[-1]))
        label = f"{self.numbers[y]:>{digits}} "
        gutter = Strip([Segment(label, rich_style + Style.parse(self.looks["gutter"]))])
        body = self._render_line_strip(y, rich_style).crop_extend(
            scroll_x, scroll_x + max(0, width - len(label)), rich_style)
        return Strip.join([gutter, body]).apply_offsets(scroll_x, y)

    def _render_line_strip(self, y: int, rich_style: Style) -> Strip:
        number = self.numbers[y]
        selection = self.text_selection
        if selection is None and (cached := self._strips.get(number)) is not None:
            return cached
        line = self._process_line(self._lines[y])
        text = Text(line, no_wrap=True, style=rich_style)
        look = KIND_STYLE.get(self.kinds.get(number))  # type: ignore[arg-type]
        if look is not None:
            text.stylize(self.looks[look])
        if self.search is not None:
            mark = self.looks["current" if number == self.current else "search"]
            for start, end in self.search(line):
                text.stylize(mark, start, end)
        if selection is not None and (span := selection.get_span(y - self._clear_y)):
            start, end = span
            text.stylize(self.screen.get_component_rich_style("screen--selection"), start,
                         len(text) if end == -1 else end)
        # `Text.render` drops the text's own style when it has no spans (the console adds it
        # when it renders a `Text`; we render it ourselves): a plain line would come out with
        # no colour at all, and `text-opacity` (which fades a segment's colour toward the
        # background) would have nothing to fade. A plain line is one segment in the style.
        if text.spans:
            strip = Strip(text.render(self.app.console), cell_len(line))
        else:
            strip = Strip([Segment(line, rich_style)], cell_len(line))
        if selection is None:
            self._strips[number] = strip
        return strip
