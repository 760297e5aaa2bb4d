"""The footer: the keys that work here, as one line of text.

On a narrow terminal the line would be cut at its end, where the console's own keys are:
instead the other keys give way, from the last, so that `q Quit`, `? Help` and the command
palette always show (a new user's first questions: how to leave, what the keys are).

Textual's `Footer` recomposes on every bindings change (a focus move is one): every `FooterKey`
unmounted, mounted and restyled, 100-150 ms of CPU per `tab` while a log streams
(docs/benchmarks.md). This one updates a single line of text, and only when what it shows
changed. A key is still clickable (it presses the key).
"""

from __future__ import annotations

from textual.app import RenderResult
from textual.content import Content
from textual.markup import escape
from textual.screen import Screen
from textual.widget import Widget

ALWAYS_SHOWN = ("app.quit", "app.help")
"""Binding ids kept on the line at any width."""


class KeyFooter(Widget):
    """The shown bindings of the focused widget and its screen, then the command palette."""

    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-description-foreground;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[tuple[str, bool]] = []  # (markup, always shown)

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        parts = self._keys(screen)
        if parts != self._parts:
            self._parts = parts
            self.refresh()

    def _keys(self, screen: Screen[object]) -> list[tuple[str, bool]]:
        app = self.app
        parts: list[tuple[str, bool]] = []
        actions: set[str] = set()
        palette = None
        for _node, binding, enabled, _tooltip in screen.active_bindings.values():
            if binding.key == app.COMMAND_PALETTE_BINDING and app.ENABLE_COMMAND_PALETTE:
                palette = binding
            if not binding.show or binding.action in actions:
                continue
            actions.add(binding.action)
            parts.append((self._key(binding.key, app.get_key_display(binding),
                                    binding.description, enabled),
                          binding.id in ALWAYS_SHOWN))
        if palette is not None:
            parts.append((self._key(palette.key, app.get_key_display(palette),
                                    palette.description, True), True))
        return parts

    @staticmethod
    def _key(key: str, display: str, description: str, enabled: bool) -> str:
        style = "$footer-key-foreground bold" if enabled else "dim"
        text = f"[{style}]{escape(display)}[/] {escape(description)}"
        return f"[@click=app.simulate_key({key!r})] {text}[/]"

    def fitted(self, width: int) -> Content:
        """The line in `width` cells: the keys that are not always shown give way from the
        last until it fits."""
        parts = [(Content.from_markup(markup), keep) for markup, keep in self._parts]
        used = sum(p.cell_length for p, _ in parts) + max(0, len(parts) - 1)
        for index in range(len(parts) - 1, -1, -1):
            if used <= width:
                break
            part, keep = parts[index]
            if not keep:
                used -= part.cell_length + 1
                del parts[index]
        return Content(" ").join(p for p, _ in parts)

    def render(self) -> RenderResult:
        return self.fitted(self.size.width or 10_000)
