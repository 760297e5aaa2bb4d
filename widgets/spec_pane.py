"""Speculative decoding: acceptance length over time against the profile's expected value,
per-position acceptance bars, and the three-state status (not configured / no evidence yet /
active). A missing figure is shown as missing, never as zero."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from vllm_console.console.telemetry.history import RestartMark
from vllm_console.console.telemetry.spec_decode import SpecDecodeState, SpecDecodeStatus
from vllm_console.widgets.gpu_pane import SPARK
from vllm_console.widgets.row_repaint import refresh_rows
from vllm_console.widgets.status import STATUS_CLASSES, status_style

if TYPE_CHECKING:
    from vllm_console.checks.profile import Acceptance

RESTART_GLYPH = "┃"


@dataclass(frozen=True)
class SpecView:
    """The state to render, the acceptance length the profile expects (e.g. ~6.4), and the
    acceptance history across every run seen, restarts marked (`AcceptanceHistory`)."""

    state: SpecDecodeState | None = None
    expected: Acceptance | None = None
    """The profile's range (flagged by `Acceptance.is_low`, the chain's rule)."""
    history: tuple[float | RestartMark, ...] = ()


def acceptance_chart(points: Sequence[float | RestartMark], width: int, top: float,
                     good: Style, bad: Style, mark: Style,
                     expected: Acceptance | None = None) -> Text:
    """A one-line history of acceptance length scaled to `top`, each point in the good colour
    unless `expected` flags it low (`Acceptance.is_low`); a restart is a `┃`."""
    out = Text()
    for point in list(points)[-width:]:
        if isinstance(point, RestartMark):
            out.append(RESTART_GLYPH, style=mark)
            continue
        level = min(len(SPARK) - 1,
                    max(0, int((point - 1) / max(top - 1, 0.01) * (len(SPARK) - 1))))
        out.append(SPARK[level], style=bad if expected is not None and expected.is_low(point)
                   else good)
    return out


def per_position_rows(positions: tuple[float, ...], colour: Style) -> list[Text]:
    """Acceptance of draft token k, one column per position: bars, then the values."""
    head = Text("position ", style="dim")
    bars = Text("accepted ", style="dim")
    values = Text("         ")
    for k, rate in enumerate(positions, 1):
        level = min(len(SPARK) - 1, max(0, int(round(rate * (len(SPARK) - 1)))))
        head.append(f"{k:>4}")
        bars.append(f"   {SPARK[level] if rate > 0 else ' '}", style=colour)
        # ".14" rather than "0.14": fifteen positions fit a half-width pane.
        values.append(f"{rate:.2f}".lstrip("0").rjust(4) if rate < 0.995 else " 1.0")
    return [head, bars, values]


class SpecPane(Widget):
    """Renders a `SpecView`."""

    COMPONENT_CLASSES = STATUS_CLASSES

    view: reactive[SpecView] = reactive(SpecView, always_update=True, repaint=False)
    compact: reactive[bool] = reactive(False)
    """The compact layout: the acceptance figure and its history, no per-position rows."""
    waiting_for: reactive[str] = reactive("the serve log")
    """Whence the first figures come (a URL-only view has no log: the server's /metrics)."""

    def watch_view(self) -> None:
        refresh_rows(self)  # an update mostly moves a figure and the chart's newest point

    def render(self) -> Group | Text:
        state, expected = self.view.state, self.view.expected
        if state is None:
            return Text(f"waiting for {self.waiting_for}…", style="italic")
        if state.status is SpecDecodeStatus.NOT_CONFIGURED:
            return Text("speculative decoding not configured for this run", style="italic")
        conf = state.configured
        head = Text()
        if conf is not None and conf.method is None and conf.model is None:
            # Only the counters said it (URL only): they carry no method and no drafter.
            head.append(f"{conf.num_spec_tokens or '?'} speculative tokens", style="bold")
            head.append(" · method and drafter: not in /metrics", style="dim")
        elif conf is not None:
            head.append(f"{conf.method or '?'} · {conf.num_spec_tokens or '?'} speculative "
                        "tokens · ", style="bold")
            model = (conf.model or "").rstrip("/").rsplit("/", 1)[-1]
            head.append(f"{model}", style="dim")
        shown = state.shown
        if shown is None:
            if head:  # the configuration on its own line, then what is (not) seen yet
                head.append("\n")
            head.append("configured; no drafts seen yet (idle server, or still starting)",
                        style=status_style(self, "unknown"))
            return head
        latest, source = shown
        length = latest.mean_acceptance_length
        high = expected.high if expected is not None else None
        good = expected is None or (length is not None and not expected.is_low(length))
        colour = status_style(self, "ok" if good else "fail")
        line = Text()
        line.append("acceptance length ", style="bold")
        line.append("?" if length is None else f"{length:.2f}", style=colour + Style(bold=True))
        if high is not None:
            line.append(f"  (expected ~{high:.1f})", style="dim")
        rate = latest.draft_acceptance_rate_pct
        if rate is not None:
            line.append(f"   draft acceptance {rate:.1f}%")
        line.append(f"   [{source}]", style="dim")
        history = self.view.history
        top = max([high or 0.0, *(p for p in history if isinstance(p, float)), 2.0])
        width = max(10, self.size.width - 13)
        mark = status_style(self, "accent") + Style(bold=True)
        legend = f" {RESTART_GLYPH} restart"
        restarted = any(isinstance(p, RestartMark) for p in history[-width:])
        if restarted:
            width -= len(legend)
        chart = Text("history      ", style="dim") + acceptance_chart(
            history, width, top, status_style(self, "ok"), status_style(self, "fail"), mark,
            expected)
        if restarted:
            chart.append(legend, style=mark)
        rows = [head, line, chart]
        if latest.per_position and not self.compact:
            rows += per_position_rows(latest.per_position, colour)
        return Group(*rows)
