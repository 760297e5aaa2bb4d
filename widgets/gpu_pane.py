"""GPUs: one row per GPU with utilisation and memory bars, temperature, power and a history
sparkline; then the processes holding GPU memory, an orphaned EngineCore standing out."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from vllm_console.console.hostclient.agent.samples import AgentSample, ServeProc
from vllm_console.widgets.row_repaint import refresh_rows
from vllm_console.widgets.status import STATUS_CLASSES, status_style

SPARK = "▁▂▃▄▅▆▇█"


def bar(fraction: float | None, width: int, colour: Style) -> Text:
    """A horizontal bar; unknown values are shown as such, never as zero."""
    if fraction is None:
        return Text("?".center(width), style="dim")
    fraction = min(max(fraction, 0.0), 1.0)
    filled = int(round(fraction * width))
    return Text("█" * filled, style=colour) + Text("░" * (width - filled), style="dim")


def sparkline(percents: list[float], width: int) -> str:
    """The last `width` percentages (0-100), one block each."""
    return "".join(SPARK[min(len(SPARK) - 1, int(v / 100 * (len(SPARK) - 1) + 0.5))]
                   for v in percents[-width:])


@dataclass(frozen=True)
class GpuView:
    """What the pane renders: the latest sample and the utilisation history per GPU."""

    sample: AgentSample | None = None
    history: dict[int, tuple[float, ...]] = field(default_factory=dict)
    error: str = ""
    """Why there is no sample, when there cannot be one (a URL-only server)."""
    containers: dict[str, str] = field(default_factory=dict)
    """Container names by id (the server's), for the processes that run in one."""
    boxed: dict[int, tuple[str, str]] = field(default_factory=dict)
    """The server's container's processes, pid -> (name, container name), from discovery:
    for a runtime whose cgroup names no container id (the pane shows [NAME] either way)."""
    owners: dict[int, str] = field(default_factory=dict)
    """On a host with several servers: which server's tree holds each GPU (`:8001`)."""


def _is_orphan(proc: ServeProc, sample: AgentSample) -> bool:
    """An EngineCore whose API server is gone: it holds GPU memory the next start needs."""
    if not proc.is_engine_core:
        return False
    parent = next((p for p in sample.serve.procs if p.pid == proc.ppid), None)
    return parent is None or parent.is_engine_core


class GpuPane(Widget):
    """Renders a `GpuView` (built by the host screen from its `GpuHistory`)."""

    COMPONENT_CLASSES = STATUS_CLASSES
    view: reactive[GpuView] = reactive(GpuView, always_update=True, repaint=False)
    _title = ""

    def watch_view(self, view: GpuView) -> None:
        """The title says where the figures come from and how old they are. Set here, and
        only when it changes: setting a border title repaints the pane, so setting it while
        rendering drew every sample twice (two frames a second on an idle console)."""
        sample = view.sample
        if sample is not None and sample.gpus:
            title = f"GPUs · {sample.gpu_source}"
            if sample.gpu_age_s is not None and sample.gpu_age_s > 5:
                title += f" · stale {sample.gpu_age_s:.0f} s"
            if title != self._title:
                self._title = self.border_title = title
        refresh_rows(self)  # mostly a figure or two per GPU changed

    def render(self) -> Text:
        sample = self.view.sample
        if sample is None:
            return Text(self.view.error or "waiting for the host agent…", style="italic")
        if not sample.gpus:
            reason = sample.gpu_reason or "no GPU source on the host"
            return Text(f"no GPU telemetry: {reason}", style=status_style(self, "warn"))
        # Fixed columns take 50 cells; the two bars share the rest.
        bar_width = max(6, (self.size.width - 50) // 2)
        text = Text(no_wrap=True, overflow="ellipsis")
        for gpu in sample.gpus:
            util = gpu.util_pct
            mem_frac = (gpu.mem_used_mib / gpu.mem_total_mib
                        if gpu.mem_used_mib is not None and gpu.mem_total_mib else None)
            util_colour = status_style(self, "ok" if (util or 0) < 95 else "warn")
            mem_colour = status_style(self, "warn" if (mem_frac or 0) > 0.97 else "accent")
            hist = list(self.view.history.get(gpu.index, ()))
            text.append(f"GPU{gpu.index} ", style="bold")
            if self.view.owners:
                text.append(f"{self.view.owners.get(gpu.index, '—'):<7.7} ", style="bold")
            text.append_text(bar(None if util is None else util / 100, bar_width, util_colour))
            text.append("   ?% " if util is None else f" {util:3.0f}% ")
            text.append_text(bar(mem_frac, bar_width, mem_colour))
            text.append(f" {_mem(gpu.mem_used_mib, gpu.mem_total_mib)} ")
            text.append("  ?°C " if gpu.temp_c is None else f"{gpu.temp_c:3.0f}°C ")
            text.append("   ?W " if gpu.power_w is None else f"{gpu.power_w:4.0f}W ")
            text.append(sparkline(hist, 12) + "\n", style=util_colour)
        procs = self._processes(sample)
        if procs is not None:
            text.append_text(procs)
        return text

    def _processes(self, sample: AgentSample) -> Text | None:
        if not sample.gpu_procs:
            return None
        by_pid = {p.pid: p for p in sample.serve.procs}
        text = Text("\nholding GPU memory: ", style="dim")
        for gp in sample.gpu_procs:
            proc = by_pid.get(gp.pid)
            boxed = self.view.boxed.get(gp.pid)
            name = proc.name if proc else boxed[0] if boxed else "?"
            mem = "?" if gp.used_mib is None else f"{gp.used_mib / 1024:.1f} GiB"
            if gp.container:
                mem = f"[{self.view.containers.get(gp.container) or gp.container[:12]}] {mem}"
            elif boxed:
                mem = f"[{boxed[1]}] {mem}"
            if proc is not None and _is_orphan(proc, sample):
                text.append(f" ORPHANED {name} pid {gp.pid} {mem} ",
                            style=status_style(self, "fail") + Style(bold=True, reverse=True))
            else:
                text.append(f"{name} pid {gp.pid} {mem}  ")
        text.no_wrap = False
        return text


def _mem(used: float | None, total: float | None) -> str:
    if used is None or total is None:
        return "   ?/?  GiB"
    return f"{used / 1024:5.1f}/{total / 1024:.0f} GiB"
