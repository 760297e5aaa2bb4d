"""Status colours as component classes: a render path asks for `status--fail`, the stylesheet
(themes/console.tcss) says which colour that is, from the theme's `$status-*` variables."""

from __future__ import annotations

from rich.style import Style
from textual.widget import Widget

_PLAIN = Style()
STATUS_CLASSES = {"status--ok", "status--warn", "status--fail", "status--unknown",
                  "status--accent"}
"""Declared in each rendering widget's COMPONENT_CLASSES. `accent`: the theme's primary colour
(the header's name badge, memory bars)."""


def status_style(widget: Widget, status: str) -> Style:
    """The rich style of `status--<status>` (ok, warn, fail, unknown, accent) on `widget`;
    plain once the widget is removed (Textual drops its component styles then, while results
    can still arrive at exit)."""
    return widget.get_component_rich_style(f"status--{status}", partial=True, default=_PLAIN)
