"""Repaint the rows of a pane that changed, not the pane.

On an idle console the GPU pane takes a sample a second and the spec pane an update every few:
mostly a figure or two moves (power, a sparkline's newest block). A plain `refresh()` re-renders
every row of the pane through Textual's styles and writes them all to the terminal, border
included; here the new content is rendered once, compared row by row with what is on screen,
and only the rows that differ are marked dirty (issue 18: idle <= 1% of a core).

Textual 8.2.8's private render caches are used (`_render_cache`, `_dirty_regions`,
`_layout_cache`: the version is pinned in pyproject.toml); anything unusual (not mounted, a
size change, a repaint already pending) falls back to a whole refresh.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.geometry import Region
from textual.visual import Visual
from textual.widget import Widget, _RenderCache


def changed_rows(old: Sequence[object], new: Sequence[object]) -> list[tuple[int, int]]:
    """Runs of rows (start, count) where `old` and `new` differ, a missing row counting as
    different."""
    runs: list[tuple[int, int]] = []
    for y in range(max(len(old), len(new))):
        if y < len(old) and y < len(new) and old[y] == new[y]:
            continue
        if runs and runs[-1][0] + runs[-1][1] == y:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((y, 1))
    return runs


def refresh_rows(widget: Widget) -> None:
    """Render `widget`'s content now and repaint only the rows that changed."""
    width, height = widget.size
    cache = widget._render_cache
    if not widget.is_mounted or widget._dirty_regions or cache.size != widget.size \
            or not width or not height:
        widget.refresh()
        return
    # `_render` keeps its visual until the next refresh: without a repaint (nothing changed
    # last time) it would hand back the old content for good.
    widget._layout_cache.pop("_render.visual", None)
    strips = Visual.to_strips(widget, widget._render(), width, height, widget.visual_style)
    runs = changed_rows(cache.lines, strips)
    if not runs:
        return
    widget._render_cache = _RenderCache(widget.size, strips)
    widget.refresh(*(Region(0, y, width, count) for y, count in runs))
    widget._dirty_regions.clear()  # rendered above: the frame reuses these strips
