"""The latency table of a serving pane: TTFT, ITL, TPOT, e2e, queue, prefill and decode, and
the request shapes (prompt and generation lengths), at p50/p90/p99 from vLLM's histograms, over
the recent window while requests finish in it, else since the server started, saying which. A
missing figure is `?`, never zero."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from vllm_console.console.telemetry.serving_span import ServingSpan
from vllm_console.widgets.serving_strip import describe_age
from vllm_console.widgets.status import STATUS_CLASSES

LATENCY_ROWS = (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("tpot_s", "TPOT"), ("e2e_s", "e2e"),
                ("queue_s", "queue"), ("prefill_s", "prefill"), ("decode_s", "decode"))
"""Span key -> the row's name, in the order a request lives them (TPOT: the per-request mean
time per output token; ITL: every gap between two tokens)."""
SHAPE_ROWS = (("prompt_tokens", "prompt"), ("generation_tokens", "output"))
"""The request shapes, in tokens."""
QUANTILE_COLUMNS = ("p50", "p90", "p99")


@dataclass(frozen=True)
class LatencyView:
    """The span to show (`ServingStatus.shown_span`), the window a recent span would cover,
    and the age of the scrape it comes from, in `age_step`s (None: no scrape yet)."""

    span: ServingSpan | None = None
    window_s: float = 60.0
    age_s: int | None = None


def seconds(value: float | None) -> str:
    """`4.2 ms`, `210 ms`, `2.10 s`, `35.0 s`; `?` for no figure."""
    if value is None:
        return "?"
    if value < 0.01:
        return f"{value * 1000:.1f} ms"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def tokens(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} tok"


def span_words(span: ServingSpan | None, window_s: float) -> str:
    """Which requests the figures describe: `last 58 s · 12 requests` or `since start-up · 340
    requests (none finished in the last 60 s)`."""
    if span is None:
        return "no /metrics scrape yet"
    count = "?" if span.requests is None else str(span.requests)
    noun = "request" if span.requests == 1 else "requests"
    if not span.since_start:
        return f"last {span.window_s:.0f} s · {count} {noun}"
    return f"since start-up · {count} {noun} (none finished in the last {window_s:.0f} s)"


class LatencyTable(Widget):
    """Renders a `LatencyView`."""

    COMPONENT_CLASSES = STATUS_CLASSES

    view: reactive[LatencyView] = reactive(LatencyView)

    def render(self) -> Group:
        view = self.view
        figures: Mapping[str, Mapping[str, float] | None] = \
            view.span.figures if view.span is not None else {}
        dim = Style(dim=True)
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        for _ in QUANTILE_COLUMNS:
            table.add_column(justify="right")
        table.add_row(Text("latency", style=dim), *(Text(q, style=dim)
                                                    for q in QUANTILE_COLUMNS))
        for key, name in LATENCY_ROWS:
            row = figures.get(key) or {}
            table.add_row(name, *(seconds(row.get(q)) for q in QUANTILE_COLUMNS))
        table.add_row(Text("length", style=dim))
        for key, name in SHAPE_ROWS:
            row = figures.get(key) or {}
            table.add_row(name, *(tokens(row.get(q)) for q in QUANTILE_COLUMNS))
        source = Text(f"metrics · {span_words(view.span, view.window_s)}", style=dim)
        if view.span is not None:
            source.append(f" · {describe_age(view.age_s)}")
        return Group(table, source)
