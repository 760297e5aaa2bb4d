"""The draft config against its reference: expected vs actual per field, the invariant checks,
and the full JSON diff on demand (`d`)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from vllm_console.checks.draft_diff import DraftDiff
from vllm_console.console.output.display import safe_text
from vllm_console.widgets.status import STATUS_CLASSES, status_style

BOLD = Style(bold=True)


def _show(value: Any) -> str:
    """Compact: a list of repeated strings reads `sliding_attention×4, full_attention`."""
    if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
        runs: list[list[Any]] = []
        for item in value:
            if runs and runs[-1][0] == item:
                runs[-1][1] += 1
            else:
                runs.append([item, 1])
        if len(runs) < len(value):
            return safe_text(", ".join(f"{x}×{n}" if n > 1 else x for x, n in runs), 70)
    return safe_text(json.dumps(value, separators=(",", ":"), default=repr), 70)


class DraftDiffPane(VerticalScroll):
    """Renders a `DraftDiff`; `d` toggles the full JSON diff."""

    COMPONENT_CLASSES = STATUS_CLASSES

    BINDINGS = [Binding("d", "toggle_full", "Full diff", id="diff.full")]

    diff: reactive[DraftDiff | None] = reactive(None, always_update=True)
    full: reactive[bool] = reactive(False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # Held, not queried: the diff can arrive after the pane is mounted but before its body
        # is (the pane sits in a tab, mounted lazily), when a query finds nothing.
        self._body = Static(id="diff-body")

    def compose(self):  # type: ignore[no-untyped-def]
        yield self._body

    def on_mount(self) -> None:
        self._show_body()

    def watch_diff(self) -> None:
        self._show_body()

    def watch_full(self) -> None:
        self._show_body()

    def action_toggle_full(self) -> None:
        self.full = not self.full

    def _show_body(self) -> None:
        if self.is_attached:
            self._body.update(self._content())

    def _content(self) -> Group | Text:
        ok, fail, warn = (status_style(self, "ok"), status_style(self, "fail"),
                          status_style(self, "warn"))
        diff = self.diff
        if diff is None:
            return Text("reading the draft config…", style="italic")
        if diff.error:
            return Text(f"cannot compare: {diff.error}", style=fail)
        head = Text()
        head.append(safe_text(diff.path, 200), style="bold")
        if diff.reference:
            head.append(f"\nvs {diff.reference} ({diff.reference_source})", style="dim")
        else:
            head.append("\nno reference for this drafter: invariants only "
                        "(--reference PATH to compare)", style=warn)
        parts: list[Any] = [head]
        if diff.rows:
            table = Table(box=None, padding=(0, 1), expand=True, show_edge=False)
            table.add_column("", width=1)
            table.add_column("field", style="bold", no_wrap=True)
            table.add_column("expected", overflow="fold")
            table.add_column("actual", overflow="fold")
            for row in diff.rows:
                colour = ok if row.ok else fail
                table.add_row(Text("✔" if row.ok else "✘", style=colour + BOLD),
                              row.field, _show(row.expected),
                              Text(_show(row.actual) if row.present else "(missing)",
                                   style="" if row.ok else colour + BOLD))
            parts.append(table)
            wrong = len(diff.wrong)
            parts.append(Text(f"{wrong} field(s) differ — a: write the reference values "
                              "(backup kept)" if wrong else "all compared fields match",
                              style=fail if wrong else ok))
        checks = Text("\ninvariants\n", style="bold")
        for f in diff.findings:
            colour = {"ok": ok, "warn": warn}.get(f.level, fail)
            checks.append(f" {'✔' if f.level == 'ok' else '!' if f.level == 'warn' else '✘'} ",
                          style=colour + BOLD)
            checks.append(safe_text(f.message) + "\n")
        parts.append(checks)
        if self.full:
            body = Text("\nfull diff (reference → draft)\n", style="bold")
            for line in diff.full_diff or ("(identical)",):
                style = fail if line.startswith("+") and not line.startswith("+++") else \
                    ok if line.startswith("-") and not line.startswith("---") else "dim"
                body.append(safe_text(line) + "\n", style=style)
            parts.append(body)
        else:
            parts.append(Text("d: full JSON diff", style="dim"))
        return Group(*parts)
