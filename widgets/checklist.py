"""The verification chain as a checklist: status, summary and hint per link; the root cause
and the broken link stand out. An unproven link (`unknown`) is amber and says how to prove it:
red is only for a link that failed. Enter opens the highlighted link's evidence."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Focus
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from vllm_console.checks.verdicts import LINK_IDS, Status
from vllm_console.widgets.status import STATUS_CLASSES, status_style

if TYPE_CHECKING:
    from vllm_console.checks.models import ChainReport, LinkResult

_ICON = {Status.PASS: "✔", Status.FAIL: "✘", Status.UNKNOWN: "?", Status.ERROR: "!"}
STATUS_COLOUR = {Status.PASS: "ok", Status.FAIL: "fail", Status.UNKNOWN: "warn",
                 Status.ERROR: "warn"}
"""Unproven (`unknown`) and unprobed (`error`) are amber: red is only for a link that failed."""
BOLD, BOLD_REVERSE = Style(bold=True), Style(bold=True, reverse=True)
NOT_PROVEN = "not proven: press R for a traced restart"
NOT_PROVEN_READONLY = "not proven: a traced restart would prove it"
"""With --readonly there is no R to press."""
CHANGED = "config changed on disk: press r to restart and apply it"
CHANGED_READONLY = "config changed on disk: a restart would apply it"
STARTING = "server starting: checked again once it is up"
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


def fit(text: str, width: int, lines: int) -> list[str]:
    """`text` in at most `lines` lines of `width` cells; the last one ends in … when cut (the
    rest is one Enter away, in the evidence view)."""
    width = max(width, 10)
    text = " ".join(text.split())
    # Paths break where they must, never at their hyphens (which would read as a new word).
    wrapped = textwrap.wrap(text, width, break_on_hyphens=False) or [""]
    if len(wrapped) <= lines:
        return wrapped
    head, at = wrapped[: lines - 1], 0
    for line in head:
        at = text.index(line, at) + len(line)
    rest = text[at:].lstrip()
    return [*head, rest[: width - 1] + "…"]


def marks(link: LinkResult, report: ChainReport,
          readonly: bool = False) -> list[tuple[str, str]]:
    """The labels after a link's status, each with its colour: the root cause; the broken
    link when it failed; how to prove it when it is only unproven."""
    found: list[tuple[str, str]] = []
    if link.id == report.root_cause:
        found.append(("ROOT CAUSE", "fail"))
    if link.id == report.broken_link:
        if link.status is Status.FAIL:
            found.append(("broken link", "fail"))
        elif link.status is Status.UNKNOWN:
            found.append((_unproven(link, readonly), "warn"))
        elif link.status is Status.ERROR:
            found.append(("could not probe: see the evidence", "warn"))
    return found


def _unproven(link: LinkResult, readonly: bool) -> str:
    """Why a link is only unproven, as its evidence says: a config written after the run
    started (a restart applies it: `a` then `r`), a server still starting, else silence that
    a traced restart would break."""
    if link.details.get("config_changed"):
        return CHANGED_READONLY if readonly else CHANGED
    if link.details.get("phase") in ("starting", "before-engine"):
        return STARTING
    return NOT_PROVEN_READONLY if readonly else NOT_PROVEN


def culprit(link: LinkResult) -> tuple[str, str]:
    """What is wrong, from the link's findings: the first failing field (`+N` more) and the
    file on disk that holds it ("" each when the link does not say)."""
    fields = [str(f.get("check", "")).removeprefix("reference:")
              for f in link.details.get("findings", ()) if f.get("level") == "fail"]
    field = fields[0] + (f" +{len(fields) - 1}" if len(fields) > 1 else "") if fields else ""
    return field, str(link.details.get("file") or "")


def short_path(path: str, width: int) -> str:
    """`path` in `width` cells: whole, else its last parts after `…/` (the file's name at
    least)."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    for keep in range(len(parts) - 1, 0, -1):
        tail = "…/" + "/".join(parts[-keep:])
        if len(tail) <= width:
            return tail
    return "…/" + parts[-1]


def culprit_words(link: LinkResult, width: int) -> str:
    """`mask_token_id +2 in …/DFlash/config.json`, in about `width` cells; "" when the link
    names neither."""
    field, path = culprit(link)
    if not path:
        return field
    lead = f"{field} in " if field else "in "
    return lead + short_path(path, max(14, width - len(lead)))


def first_to_look_at(report: ChainReport) -> int:
    """The row Tab lands on: the root cause, else the first link that did not pass."""
    ids = [link.id for link in report.links]
    if report.root_cause in ids:
        return ids.index(report.root_cause)
    return next((n for n, link in enumerate(report.links) if link.status is not Status.PASS), 0)


class Checklist(OptionList):
    """One option per link; the options are rebuilt from each new report."""

    COMPONENT_CLASSES = STATUS_CLASSES
    BINDINGS = [Binding("enter", "open_evidence", "Evidence", id="checklist.evidence")]

    state: reactive[ChecklistState] = reactive(ChecklistState, always_update=True)
    readonly: reactive[bool] = reactive(False)
    detail_lines: reactive[int] = reactive(1)
    """Lines of summary under each link: 0 in the compact layout, more on a tall terminal."""

    class EvidenceRequested(Message):
        """The person asked to see a link's evidence."""

        def __init__(self, link: LinkResult) -> None:
            super().__init__()
            self.link = link

    def watch_state(self, state: ChecklistState) -> None:
        self._rebuild(state)

    def watch_detail_lines(self) -> None:
        self._rebuild(self.state)

    def on_resize(self) -> None:
        self._rebuild(self.state)

    def on_focus(self, event: Focus) -> None:
        if self.state.report is not None:
            self.highlighted = first_to_look_at(self.state.report)

    def _rebuild(self, state: ChecklistState) -> None:
        if not self.is_mounted:
            return
        highlighted = self.highlighted
        self.clear_options()
        self.add_options(self._options_for(state))
        if highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted
        self.update_title()

    def update_title(self) -> None:
        title = "Checklist"
        if self.state.report is not None:  # which profile judged (picked from the method)
            title += f" · {self.state.report.profile}"
        if self.state.running:
            title += " · running…"
        elif self.state.report is not None:
            title += f" · {self.state.report.seconds:.1f} s"
        self.border_title = title
        self.border_subtitle = "c: re-run · enter: evidence"

    def _options_for(self, state: ChecklistState) -> list[Option]:
        report = state.report
        if report is None:
            why = state.error or ("running the chain…" if state.running else
                                  "not run yet: press c")
            unknown = status_style(self, "unknown")
            return [Option(Text(f"{TITLES[i]:<20} {why if n == 0 else ''}", style=unknown),
                           id=i) for n, i in enumerate(LINK_IDS)]
        options: list[Option] = []
        width = max(30, self.scrollable_content_region.width - 3)
        for link in report.links:
            colour = status_style(self, STATUS_COLOUR[link.status])
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"{_ICON[link.status]} ", style=colour + BOLD)
            text.append(f"{TITLES.get(link.id, link.id):<19}", style="bold")
            text.append(f"{link.status.value:<8}", style=colour + BOLD)
            for label, tone in marks(link, report, self.readonly):
                mark = status_style(self, tone)
                text.append(f" {label} ", style=mark + (BOLD_REVERSE if tone == "fail" else BOLD))
            if link.id == report.root_cause:  # the field and the file to fix, on the row
                words = culprit_words(link, self.scrollable_content_region.width
                                      - text.cell_len - 2)
                if words:
                    text.append(f" {words}", style=colour + BOLD)
            if self.detail_lines:
                for line in fit(link.summary, width - 2, self.detail_lines):
                    text.append(f"\n  {line}")
                if link.hint and link.status is not Status.PASS:
                    for line in fit(link.hint, width - 4, self.detail_lines):
                        text.append(f"\n  → {line}", style="italic")
            options.append(Option(text, id=link.id))
        if state.error:
            options.append(Option(Text(state.error, style=status_style(self, "warn")),
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
