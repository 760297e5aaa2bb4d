"""A link's evidence: every probe's command, exit status and excerpt, so a person can trust
the verdict or run the command again."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from checks.models import LinkResult
from console.display import safe_text


def evidence_text(link: LinkResult, variables: dict[str, str]) -> Text:
    colour = variables.get(f"status-{'ok' if link.status == 'pass' else 'fail'}", "")
    text = Text()
    text.append(f"{link.title}  ", style="bold")
    text.append(link.status.value.upper(), style=f"bold {colour}")
    text.append(f"\n{safe_text(link.summary)}\n")
    if link.hint:
        text.append(f"→ {safe_text(link.hint)}\n", style="italic")
    if not link.evidence:
        text.append("\nno evidence recorded\n", style="italic")
    for n, ev in enumerate(link.evidence, 1):
        text.append(f"\n{n}. {ev.probe}", style="bold")
        if ev.exit is not None:
            ok = variables.get("status-ok" if ev.exit == 0 else "status-fail", "")
            text.append(f"   exit {ev.exit}", style=ok)
        text.append("\n")
        if ev.command:
            text.append("   $ ", style="dim")
            text.append(safe_text(ev.command, 4000) + "\n", style="bold")
        for line in ev.excerpt.splitlines() or [""]:
            text.append(f"   │ {safe_text(line)}\n")
    return text


class EvidenceScreen(ModalScreen[None]):
    """Esc goes back."""

    BINDINGS = [Binding("escape,q", "dismiss", "Back", id="evidence.close")]

    def __init__(self, link: LinkResult) -> None:
        super().__init__()
        self.link = link

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="evidence-box"):
            yield Static(f"Evidence · {self.link.id}", id="evidence-title")
            yield Static(evidence_text(self.link, self.app.theme_variables), id="evidence-body")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
