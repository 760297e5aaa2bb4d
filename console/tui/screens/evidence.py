"""A link's evidence: every probe's command, exit status and excerpt, so a person can trust
the verdict or run the command again (`y` copies the commands, by OSC 52)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from vllm_console.console.output.display import safe_text
from vllm_console.widgets.checklist import STATUS_COLOUR
from vllm_console.widgets.status import STATUS_CLASSES, status_style

if TYPE_CHECKING:
    from vllm_console.checks.models import LinkResult


def evidence_text(link: LinkResult, style_of: Callable[[str], Style]) -> Text:
    """`style_of("fail")`: the status style (the screen's component classes)."""
    bold = Style(bold=True)
    text = Text()
    text.append(f"{link.title}  ", style="bold")
    text.append(link.status.value.upper(), style=style_of(STATUS_COLOUR[link.status]) + bold)
    text.append(f"\n{safe_text(link.summary)}\n")
    if link.hint:
        text.append(f"→ {safe_text(link.hint)}\n", style="italic")
    if not link.evidence:
        text.append("\nno evidence recorded\n", style="italic")
    for n, ev in enumerate(link.evidence, 1):
        text.append(f"\n{n}. {ev.probe}", style="bold")
        if ev.exit is not None:
            text.append(f"   exit {ev.exit}", style=style_of("ok" if ev.exit == 0 else "fail"))
        text.append("\n")
        if ev.command:
            text.append("   $ ", style="dim")
            text.append(safe_text(ev.command, 4000) + "\n", style="bold")
        for line in ev.excerpt.splitlines() or [""]:
            text.append(f"   │ {safe_text(line)}\n")
    return text


def commands(link: LinkResult) -> str:
    """The commands of the link's probes, one a line, as a person would paste them."""
    return "\n".join(ev.command for ev in link.evidence if ev.command)


class EvidenceScreen(ModalScreen[None]):
    """Esc goes back; `y` copies the probes' commands to the clipboard."""

    COMPONENT_CLASSES = STATUS_CLASSES
    BINDINGS = [Binding("escape,q", "dismiss", "Back", id="evidence.close"),
                Binding("y", "copy_command", "Copy command", id="evidence.copy")]

    def __init__(self, link: LinkResult) -> None:
        super().__init__()
        self.link = link

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="evidence-box"):
            yield Static(f"Evidence · {self.link.id}", id="evidence-title")
            yield Static(evidence_text(self.link, lambda s: status_style(self, s)),
                         id="evidence-body")
        yield Footer()

    def action_copy_command(self) -> None:
        text = commands(self.link)
        if not text:
            self.notify("this link's probes ran no command to copy", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        count = text.count("\n") + 1
        self.notify(f"copied {count} command{'s' if count > 1 else ''} (OSC 52)", timeout=3)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
