"""A scroll bar that repaints only when what it shows changes.

A following log grows by a batch at a time: every batch changes the bar's virtual size and
position, and Textual repaints the bar for each change. Once the log holds more than a few
screens, the thumb does not move by even an eighth of a cell, so those repaints drew the same
bar again: about half of the rows a one-line frame rendered (docs/benchmarks.md, issue 18).
"""

from __future__ import annotations

from math import ceil
from typing import Self

from rich.console import RenderableType
from rich.segment import Segment
from textual.geometry import Region
from textual.scrollbar import ScrollBar


class QuietScrollBar(ScrollBar):
    """Checks, once the changes of a batch are in, whether the bar it would draw differs from
    the one it drew last; only then it repaints. A batch moves the bar twice on its way (its
    virtual size grows, then the view follows), and the thumb between the two is an eighth of
    a cell off: a check per change would repaint for a state never shown. Any other repaint
    (hover, grab, styles, layout) happens as in `ScrollBar`."""

    _moved = False
    _check_pending = False
    _drawn: tuple[object, list[Segment]] | None = None

    def _thumb(self) -> tuple[object, list[Segment]]:
        """What the bar shows: its size and where the thumb is, in eighths of a cell (the
        arguments `ScrollBar._render_bar` passes, in the renderer's default colours)."""
        width, height = self.size
        length, thickness = (height, width) if self.vertical else (width, height)
        virtual = self.window_virtual_size
        window = self.window_size if self.window_size < virtual else 0
        bar = self.renderer.render_bar(size=length, virtual_size=ceil(virtual),
                                       window_size=ceil(window), position=self.position,
                                       thickness=thickness, vertical=self.vertical)
        return (length, thickness), list(bar.segments)

    def watch_window_virtual_size(self) -> None:
        self._moved = True

    def watch_window_size(self) -> None:
        self._moved = True

    def watch_position(self) -> None:
        self._moved = True

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Self:
        moved, self._moved = self._moved, False
        if moved and self.is_mounted and not (regions or layout or recompose):
            if not self._check_pending:
                self._check_pending = True
                self.call_later(self._repaint_if_moved)
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _repaint_if_moved(self) -> None:
        self._check_pending = False
        if self._thumb() != self._drawn:
            super().refresh()

    def render(self) -> RenderableType:
        self._drawn = self._thumb()
        return super().render()
