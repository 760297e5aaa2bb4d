"""The header: host, connection state, data-source chips, what the server is doing, readonly
marker. While the link is down the chips are not green and the age of the data is shown."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from vllm_console.console.transport.host import ConnectionState, LinkStatus
from vllm_console.widgets.status import STATUS_CLASSES, status_style

_NO_SOURCE = ("none", "…", "down", "unreachable", "missing")
BOLD = Style(bold=True)


@dataclass(frozen=True)
class Sources:
    """Where each kind of data comes from now: 'nvml', 'nvidia-smi', 'none', 'live', ..."""

    gpu: str = "…"
    log: str = "…"
    metrics: str = "…"


def describe_link(link: LinkStatus, why: bool = True) -> str:
    """The link in a few words; `why`: with the reason it is down (`connection refused at
    http://...`), which the compact layout leaves out."""
    if link.state is ConnectionState.RECONNECTING and link.retry_in_s is not None:
        text = f"reconnecting in {link.retry_in_s:.0f} s"
        return f"{text}: {link.detail[:100]}" if why and link.detail else text
    if link.state is ConnectionState.REFUSED:
        return f"refused: {link.detail}"
    return link.state.value


def describe_age(seconds: float | None) -> str:
    return "no sample yet" if seconds is None else f"last sample {seconds:.0f} s ago"


class HostHeader(Widget):
    """One line at the top of a host screen."""

    COMPONENT_CLASSES = STATUS_CLASSES
    DEFAULT_CSS = "HostHeader { height: 1; }"

    host_name: reactive[str] = reactive("")
    link: reactive[LinkStatus] = reactive(LinkStatus(ConnectionState.CONNECTING))
    sources: reactive[Sources] = reactive(Sources())
    readonly: reactive[bool] = reactive(False)
    scenario: reactive[str] = reactive("")
    activity: reactive[str] = reactive("")
    """What the server is doing now: "serve: loading weights 2m10s", "restart: stopping", ..."""
    engine_alert: reactive[str] = reactive("")
    """The engine is stalled or dead: `engine stalled 35 s: <reason>`, in the fail colour
    (vLLM's /health keeps answering 200 while its engine hangs)."""
    stale: reactive[bool] = reactive(False)
    """The link is down: what the panes show is old."""
    data_age_s: reactive[float | None] = reactive(None)
    chips: reactive[tuple[str, ...]] = reactive(("gpu", "log", "metrics"))
    """The data sources this view has (a URL-only view: `metrics` alone, no GPU, no log)."""
    compact: reactive[bool] = reactive(False)
    """A narrow terminal: no name badge, and each source chip says only what it is (its
    colour says whether it is live); the full values are in the wide layout."""

    def render(self) -> Text:
        text = Text()
        if not self.compact:
            text.append(" vllm-console ",
                        style=status_style(self, "accent") + Style(bold=True, reverse=True))
        text.append(f" {self.host_name} ", style="bold")
        if self.scenario:
            text.append("(sim) " if self.compact else f"(simulated: {self.scenario}) ",
                        style="italic")
        text.append(f"● {describe_link(self.link, why=not self.compact)}",
                    style=status_style(self, self.link.state.status) + BOLD)
        if self.engine_alert:
            alert = self.engine_alert.split(":", 1)[0] if self.compact else \
                self.engine_alert[:160]
            text.append(f"  {alert} ", style=status_style(self, "fail") + Style(bold=True,
                                                                                reverse=True))
        if self.stale:
            text.append(f" · stale, {describe_age(self.data_age_s)}",
                        style=status_style(self, "warn") + BOLD)
        for label, value in (("gpu", self.sources.gpu), ("log", self.sources.log),
                             ("metrics", self.sources.metrics)):
            if label not in self.chips:
                continue
            good = value not in _NO_SOURCE and not self.stale
            text.append(" " if self.compact else "  ")
            chip = f" {label} " if self.compact else f" {label}:{value} "
            text.append(chip, style=status_style(self, "ok") + Style(reverse=True)
                        if good else status_style(self, "unknown"))
        if self.activity:
            text.append(f"  {self.activity}", style="bold")
        if self.readonly:
            text.append("  READONLY ", style=status_style(self, "warn") + Style(bold=True,
                                                                              reverse=True))
        return text
