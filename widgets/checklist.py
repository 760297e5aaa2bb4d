"""The verification chain as a checklist: status, summary and hint per link; the broken link
and the root cause stand out. Enter opens the highlighted link's evidence."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from checks.models import LINK_IDS, ChainReport, LinkResult, Status

_ICON = {Status.PASS: "✔", Status.FAIL: "✘", Status.UNKNOWN: "?", Status.ERROR: "!"}
_VAR = {Status.PASS: "status-ok", Status.FAIL: "status-fail", Status.UNKNOWN: "status-unknown",
        Status.ERROR: "status-warn"}
TITLES = {
    "code-present": "code present",
    "fields-extracted": "fields extracted",
    "runtime-activation": "runtime activation",
    "config-correct": "config correct",
}


@dataclass(frozen=True)
class ChecklistState:
    """What the checklist shows: the last report, and whether a run is under way."""

    report: ChainReport | None = None
    running: bool = False
    error: str = ""


def _cut(text: str, width: int) -> str:
    """One line of at most `width` cells: the rest is one Enter away (the evidence view)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class Checklist(OptionList):
    """One option per link; the options are rebuilt from each new report."""

    BINDINGS = [Binding("enter", "open_evidence", "Evidence", id="checklist.evidence")]

    state: reactive[ChecklistState] = reactive(ChecklistState, always_update=True)

    class EvidenceRequested(Message):
        """The person asked to see a link's evidence."""

        def __init__(self, link: LinkResult) -> None:
            super().__init__()
            self.link = link

    def watch_state(self, state: ChecklistState) -> None:
        highlighted = self.highlighted
        self.clear_options()
        for line in self._options_for(state):
            self.add_option(line)
        if highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted
        self._update_title(state)

    def _update_title(self, state: ChecklistState) -> None:
        title = "Checklist"
        if state.report is not None:  # which profile judged (picked from the engine's method)
            title += f" · {state.report.profile}"
        if state.running:
            title += " · running…"
        elif state.report is not None:
            title += f" · {state.report.seconds:.1f} s"
        self.border_title = title
        self.border_subtitle = "c: re-run · enter: evidence"

    def _options_for(self, state: ChecklistState) -> list[Option]:
        v = self.app.theme_variables
        report = state.report
        if report is None:
            why = state.error or ("running the chain…" if state.running else
                                  "not run yet: press c")
            return [Option(Text(f"{TITLES[i]:<20} {why if n == 0 else ''}",
                                style=v.get("status-unknown", "")), id=i)
                    for n, i in enumerate(LINK_IDS)]
        options: list[Option] = []
        width = max(30, self.size.width - 6)
        for link in report.links:
            colour = v.get(_VAR[link.status], "")
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"{_ICON[link.status]} ", style=f"bold {colour}")
            text.append(f"{TITLES.get(link.id, link.id):<19}", style="bold")
            text.append(f"{link.status.value:<8}", style=f"bold {colour}")
            marks = []
            if link.id == report.root_cause:
                marks.append("ROOT CAUSE")
            if link.id == report.broken_link:
                marks.append("broken link")
            if marks:
                text.append(f" {' · '.join(marks)} ",
                            style=f"bold reverse {v.get('status-fail', '')}")
            text.append(f"\n  {_cut(link.summary, width)}")
            if link.hint and link.status is not Status.PASS:
                text.append(f"\n  → {_cut(link.hint, width - 2)}", style="italic")
            options.append(Option(text, id=link.id))
        if state.error:
            options.append(Option(Text(state.error, style=v.get("status-warn", "")),
                                  disabled=True))
        return options

    def selected_link(self) -> LinkResult | None:
        report = self.state.report
        if report is None or self.highlighted is None:
            return None
        option = self.get_option_at_index(self.highlighted)
        try:
            return report.link(option.id or "")
        except KeyError:
            return None

    def action_open_evidence(self) -> None:
        link = self.selected_link()
        if link is not None:
            self.post_message(self.EvidenceRequested(link))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_open_evidence()
