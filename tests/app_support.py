"""Running the real app on a real simulated host (LocalHost) for Pilot tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from rich.color import Color
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widget import Widget

from vllm_console.console.cli.commands.demo import demo_config, free_port
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.sim import SimTree, materialise, start_background, stop
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.themes import THEMES, stylesheet_path


def make_tree(root: Path, scenario: str = "incident") -> SimTree:
    return materialise(scenario, root, port=free_port(), gpus=2, startup_s=0.5,
                       metrics_interval_s=0.3, color=True)


class WidgetApp(App[None]):
    """One widget alone, under the console's stylesheet and dark theme: for a widget's own
    tests (its colours come from the stylesheet's component classes)."""

    CSS_PATH = stylesheet_path()

    def __init__(self, widget: Widget) -> None:
        super().__init__()
        for theme in THEMES.values():
            self.register_theme(theme)
        self.theme = "vllm-dark"
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def theme_colour(name: str, theme: str = "vllm-dark") -> Color:
    """A status colour of a theme (`status-ok`, ...; the dark one unless named), as rich
    parses it."""
    return Color.parse(THEMES[theme].variables[name])


def colour_of(text: Text, word: str) -> Color | None:
    """The foreground colour of the innermost span that styles `word` in `text`."""
    start = text.plain.index(word)
    colours = [span.style.color for span in text.spans
               if span.start <= start < span.end and isinstance(span.style, Style)
               and span.style.color is not None]
    return colours[-1] if colours else None


class SimApp:
    """A started simulated host and a console app on it; `close()` stops the host."""

    def __init__(self, root: Path, scenario: str = "incident", *, readonly: bool = False,
                 export_dir: Path | None = None) -> None:
        self.tree = make_tree(root, scenario)
        start_background(self.tree)
        self.session = HostSession(demo_config(self.tree, readonly=readonly),
                                   LocalHost("demo"), scenario=scenario)
        self.app = ConsoleApp([self.session], export_dir=export_dir)

    def close(self) -> None:
        stop(self.tree, timeout=5)


def screen_text(app: ConsoleApp) -> str:
    """What the terminal shows now, as text (one line per row)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def wait_until(pilot, predicate: Callable[[], object], timeout: float = 20.0,  # type: ignore[no-untyped-def]
                     what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")


async def settle(seconds: float) -> None:
    await asyncio.sleep(seconds)
