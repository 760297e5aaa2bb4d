"""`?`: every key of the console, generated from the live bindings so it never goes stale."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

INTRO = ("vllm-console: GPUs, live serve log, engine config, draft config diff and the "
         "verification chain (code present -> fields extracted -> runtime activation -> config "
         "correct) for one or more vLLM hosts. Data flows from the host; actions ask before "
         "they change anything.\n")
"""One paragraph: the help box wraps it to its width."""


def key_table(sections: list[tuple[str, list[Binding]]],
              display: Callable[[Binding], str] = lambda b: b.key_display or b.key) -> str:
    lines: list[str] = []
    for title, bindings in sections:
        lines.append(f"\n{title}")
        seen: set[str] = set()
        for b in bindings:
            if b.key in seen or not b.description:
                continue
            seen.add(b.key)
            lines.append(f"  {display(b):<14} {b.description}"
                         + (f" · {b.tooltip}" if b.tooltip else ""))
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    """Lists every key; Esc, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    def __init__(self, sections: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self._sections = sections

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static("Keys", id="help-title")
            with VerticalScroll(id="help-scroll"):
                yield Static(INTRO + key_table(self._sections, self.app.get_key_display),
                             id="help-body", markup=False)
            # Outside the scroll: the way out and the palette stay in sight at any size.
            yield Static("Esc closes · ↑/↓ scroll · ctrl+p opens the command palette with "
                         "every action", id="help-footer")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
