"""The serving strip: is the server serving, and how fast. Requests running and waiting,
prompt and generation tokens/s, KV-cache use, prefix-cache hits, TTFT/ITL/e2e/queue p50 and
p99 over the recent window, preemptions and outcomes, and the engine's state, each group of
figures with its source (the log's stat line or `/metrics`) and its age. One line in the compact
layout and on short terminals, three in the wide one, and from 50 rows a fourth with the
figures' recent trend (sparklines). A missing figure is `?`, never zero."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from vllm_console.widgets.gpu_pane import sparkline
from vllm_console.widgets.status import STATUS_CLASSES, status_style

ENGINE_STATUS = {"ok": "ok", "idle": "unknown", "stalled": "fail", "dead": "fail",
                 "unknown": "unknown", "restarting": "unknown", "stopping": "unknown"}
"""`serve.engine` -> the status colour it is shown in."""
LATENCY_NAMES = (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("e2e_s", "e2e"), ("queue_s", "queue"))


@dataclass(frozen=True)
class ServingView:
    """What the strip shows: the engine's verdict and how long it has held (stalled or dead),
    the load figures (`throughput` of `status --json`) and the scrapes' serving figures, with
    the ages of both, in whole seconds (None: no figure yet)."""

    engine: str = "unknown"
    engine_reason: str = "no /metrics scrape yet"
    engine_for_s: int | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage_pct: float | None = None
    prefix_cache_hit_pct: float | None = None
    prompt_tps: float | None = None
    generation_tps: float | None = None
    load_source: str = ""
    """Whence the gauges (running, waiting, KV): `log` or `metrics`."""
    rates_source: str = ""
    """Whence the rates (tokens/s, prefix hits), when not the gauges' source."""
    load_age_s: int | None = None
    latency: Mapping[str, Mapping[str, float] | None] | None = None
    window_s: float | None = None
    requests: Mapping[str, Any] | None = None
    serving_age_s: int | None = None
    trends: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """(what, recent values, oldest first): generation tok/s, running, TTFT p99."""

    @property
    def alarm(self) -> bool:
        """The engine is stalled or dead: said as loudly as a crash."""
        return self.engine in ("stalled", "dead")

    def engine_words(self) -> str:
        """`stalled 35 s`, `dead 2 min`, `ok`."""
        if self.engine_for_s is None:
            return self.engine
        return f"{self.engine} {describe_duration(self.engine_for_s)}"


def describe_duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    return f"{seconds // 60} min" if seconds < 7200 else f"{seconds // 3600} h"


def age_step(seconds: float) -> int:
    """An age as the strip shows it: in 5 s steps below a minute, then whole minutes, so a
    screen left alone is not redrawn every second for its ages (`ServingView` holds these)."""
    seconds = max(0, int(seconds))
    return seconds // 5 * 5 if seconds < 60 else seconds // 60 * 60


def describe_age(seconds: int | None) -> str:
    """`<5 s ago`, `10 s ago`, `2 min ago` (of an `age_step`)."""
    if seconds is None:
        return "none yet"
    if seconds < 5:
        return "<5 s ago"
    if seconds < 60:
        return f"{seconds // 5 * 5} s ago"
    return f"{seconds // 60} min ago"


def latency_pair(figures: Mapping[str, float] | None) -> str:
    """p50/p99: `210/800 ms`, `2.1/4.0 s`, `?` without a sample in the window."""
    if not figures:
        return "?"
    p50, p99 = figures.get("p50"), figures.get("p99")
    if p50 is None or p99 is None:
        return "?"
    if p99 < 1:
        return f"{p50 * 1000:.0f}/{p99 * 1000:.0f} ms"
    return f"{p50:.2f}/{p99:.2f} s" if p99 < 10 else f"{p50:.0f}/{p99:.0f} s"


def _num(value: float | None, fmt: str = ".0f", unit: str = "") -> str:
    return "?" if value is None else f"{value:{fmt}}{unit}"


def _source(source: str, age: int | None) -> str:
    where = {"log": "log", "metrics": "metrics"}.get(source, source or "no source")
    return f"  [{where} · {describe_age(age)}]"


class ServingStrip(Widget):
    """Renders a `ServingView`."""

    COMPONENT_CLASSES = STATUS_CLASSES

    view: reactive[ServingView] = reactive(ServingView)
    rows: reactive[int] = reactive(3)
    """1: the one-line form (compact layout, short terminals); 3; 4: with the trends."""

    def _engine(self, view: ServingView) -> Text:
        colour = status_style(self, ENGINE_STATUS.get(view.engine, "unknown"))
        text = Text("engine ", style="bold")
        text.append(view.engine_words(), style=colour + Style(bold=True,
                                                               reverse=view.alarm))
        return text

    def render(self) -> Text | Group:
        view = self.view
        if self.rows < 3:
            return self._one_line(view)
        lines = self._lines(view)
        if self.rows >= 4:
            lines.append(self._trends(view))
        return Group(*lines)

    def _trends(self, view: ServingView) -> Text:
        """Each trend scaled to its own highest value (a sparkline says the shape)."""
        text = Text("trend ", style="bold")
        width = max(8, min(40, (self.size.width - 60) // max(1, len(view.trends))))
        if not view.trends:
            text.append("(builds up with each figure)", style=Style(dim=True))
        for i, (name, values) in enumerate(view.trends):
            top = max(values, default=0.0)
            shown = sparkline([100 * v / top if top > 0 else 0.0 for v in values], width)
            text.append(("   " if i else "") + f"{name} ")
            text.append(shown or "·", style=status_style(self, "accent"))
            if values:
                text.append(f" {values[-1]:.3g}", style=Style(dim=True))
        return text

    def _lines(self, view: ServingView) -> list[Text]:
        dim = Style(dim=True)
        load = self._engine(view)
        load.append(f"   running {_num(view.running)} · waiting {_num(view.waiting)}"
                    f" · KV {_num(view.kv_cache_usage_pct, '.1f', '%')}")
        if view.prefix_cache_hit_pct is not None:
            load.append(f" · prefix hit {view.prefix_cache_hit_pct:.1f}%")
        load.append(f" · prompt {_num(view.prompt_tps, '.1f')} tok/s"
                    f" · generation {_num(view.generation_tps, '.1f')} tok/s")
        load.append(_source(view.load_source, view.load_age_s), style=dim)
        if view.rates_source and view.rates_source != view.load_source:
            load.append(f"[tok/s, prefix: {view.rates_source}]", style=dim)
        latency = Text("latency p50/p99 ", style="bold")
        if view.latency is None:
            latency.append("? (two /metrics scrapes make a window)", style=dim)
        else:
            latency.append(" · ".join(f"{name} {latency_pair(view.latency.get(key))}"
                                      for key, name in LATENCY_NAMES))
            window = f"last {view.window_s:.0f} s, " if view.window_s is not None else ""
            latency.append(f"  [metrics · {window}{describe_age(view.serving_age_s)}]",
                           style=dim)
        outcomes = Text("requests ", style="bold")
        requests = view.requests or {}
        finished = requests.get("finished") or {}
        outcomes.append(f"preemptions {_num(requests.get('preemptions_total'))}")
        if finished:
            outcomes.append(" · finished " + ", ".join(f"{reason} {count}" for reason, count
                                                        in finished.items()))
        outcomes.append("  [metrics · since start-up]" if requests else "  [no /metrics]",
                        style=dim)
        if view.engine not in ("ok", "idle"):
            outcomes.append(f"   engine: {view.engine_reason}",
                            style=status_style(self, ENGINE_STATUS.get(view.engine,
                                                                       "unknown")))
        return [load, latency, outcomes]

    def _one_line(self, view: ServingView) -> Text:
        """80 columns: the state, the load and the p99s, then what gives way, whole, when the
        line is too long (the age, then KV, then throughput): never a figure cut in half."""
        text = self._one_line_parts(view)
        width = self.size.width or 10_000
        while len(text) > 1 and sum(t.cell_len for t in text) > width:
            text.pop()
        line = Text(no_wrap=True, overflow="ellipsis")
        for part in text:
            line.append_text(part)
        return line

    def _one_line_parts(self, view: ServingView) -> list[Text]:
        """The one line's pieces, what must stay first."""
        text = self._engine(view)
        text.append(f" · {_num(view.running)}/{_num(view.waiting)} run/wait · p99")
        latency = view.latency or {}
        for key, name in (("ttft_s", "TTFT"), ("e2e_s", "e2e")):
            figures = latency.get(key)
            p99 = figures.get("p99") if figures else None
            shown = "?" if p99 is None else (f"{p99 * 1000:.0f} ms" if p99 < 1
                                             else f"{p99:.1f} s")
            text.append(f" {name} {shown}")
        newest = min((a for a in (view.load_age_s, view.serving_age_s) if a is not None),
                     default=None)
        return [text, Text(f" · {_num(view.generation_tps, '.0f')} tok/s"),
                Text(f" · KV {_num(view.kv_cache_usage_pct, '.0f', '%')}"),
                Text(f" [{describe_age(newest)}]", style=Style(dim=True))]
