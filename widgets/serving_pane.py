"""The serving pane of a screen on the server's URL alone: the engine's state, requests
running and waiting, prompt and generation tokens/s, KV-cache use and prefix-cache hits, each
with its history (a chart as tall as the pane has room for), and the request outcomes since
start-up. A missing figure is `?`, never zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from vllm_console.widgets.gpu_pane import SPARK
from vllm_console.widgets.serving_strip import ENGINE_STATUS, ServingView, describe_age
from vllm_console.widgets.status import STATUS_CLASSES, status_style

LOAD_ROWS = (("running", "running", "", ".0f"), ("waiting", "waiting", "", ".0f"),
             ("prompt_tps", "prompt", " tok/s", ".1f"),
             ("generation_tps", "generation", " tok/s", ".1f"),
             ("kv_cache_usage_pct", "KV cache", "%", ".1f"),
             ("prefix_cache_hit_pct", "prefix hit", "%", ".1f"))
"""ServerLoad figure, its name, unit and format: one row each, with its history."""
PERCENT = frozenset({"kv_cache_usage_pct", "prefix_cache_hit_pct"})
"""Drawn against 100%; the other histories against their own highest value."""
FIXED_LINES = 3
"""The engine line and the two outcome lines: the charts share the rest of the pane's height."""
LABEL_WIDTH = 26


@dataclass(frozen=True)
class ServingPaneView:
    """The strip's figures (engine, load, outcomes, ages) and each load figure's recent
    values, oldest first (`LoadHistory`)."""

    figures: ServingView = field(default_factory=ServingView)
    history: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


def chart(fractions: Sequence[float], width: int, rows: int) -> list[str]:
    """The last `width` values (0..1) as columns `rows` high, top row first: each row holds
    eight levels (a value of 0 is a low tick on the bottom row, so a flat line still shows)."""
    columns = list(fractions)[-width:]
    levels = len(SPARK)
    out = []
    for row in range(rows - 1, -1, -1):
        line = []
        for value in columns:
            filled = max(0.0, min(1.0, value)) * rows * levels - row * levels
            if filled >= levels:
                line.append(SPARK[-1])
            elif filled >= 1:
                line.append(SPARK[int(filled) - 1])
            else:
                line.append(SPARK[0] if row == 0 else " ")
        out.append("".join(line))
    return out


class ServingPane(Widget):
    """Renders a `ServingPaneView`."""

    COMPONENT_CLASSES = STATUS_CLASSES

    view: reactive[ServingPaneView] = reactive(ServingPaneView)

    def render(self) -> Group:
        view, figures = self.view, self.view.figures
        dim = Style(dim=True)
        colour = status_style(self, ENGINE_STATUS.get(figures.engine, "unknown"))
        engine = Text("engine ", style="bold", no_wrap=True, overflow="ellipsis")
        engine.append(figures.engine_words(), style=colour + Style(bold=True,
                                                                  reverse=figures.alarm))
        engine.append(f"  {figures.engine_reason}", style=dim)
        where = {"log": "log", "metrics": "metrics"}.get(figures.load_source, "no source")
        engine.append(f"  [{where} · {describe_age(figures.load_age_s)}]", style=dim)
        return Group(engine, *self._load(view), *self._outcomes(figures))

    def _load(self, view: ServingPaneView) -> list[Text]:
        figures = view.figures
        width = self.size.width - LABEL_WIDTH
        # Too narrow for a chart (80 columns, beside the latency table): the figures alone.
        rows = max(1, (self.size.height - FIXED_LINES) // len(LOAD_ROWS)) if width >= 8 else 0
        accent = status_style(self, "accent")
        lines = []
        for key, name, unit, fmt in LOAD_ROWS:
            value = getattr(figures, key)
            shown = "?" if value is None else f"{value:{fmt}}{unit}"
            points = view.history.get(key, ())
            top = 100.0 if key in PERCENT else max(points, default=0.0)
            drawn = chart([v / top if top > 0 else 0.0 for v in points], width, rows) \
                if rows else [""]
            for i, part in enumerate(drawn):
                last = i == len(drawn) - 1  # the figure on the chart's bottom row
                line = Text(f"{name:<11}" if last else " " * 11, style="bold")
                line.append(f"{shown:>13}  " if last else " " * 15)
                line.append(part or ("·" if last and rows else ""), style=accent)
                lines.append(line)
        return lines

    def _outcomes(self, figures: ServingView) -> list[Text]:
        requests = figures.requests or {}
        finished = requests.get("finished") or {}
        preemptions = requests.get("preemptions_total")
        done = Text(f"{'finished':<13}", style="bold", no_wrap=True, overflow="ellipsis")
        done.append(" · ".join(f"{reason} {count}" for reason, count in finished.items())
                    if finished else "?")
        preempted = Text(f"{'preempted':<13}", style="bold", no_wrap=True, overflow="ellipsis")
        preempted.append("?" if preemptions is None else str(preemptions))
        preempted.append("   both since start-up", style=Style(dim=True))
        return [done, preempted]
