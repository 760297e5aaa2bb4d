"""The header: host, connection state, data-source chips, readonly marker."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from console.host import ConnectionState, LinkStatus

_STATE_STYLE = {
    ConnectionState.CONNECTED: "status-ok",
    ConnectionState.CONNECTING: "status-unknown",
    ConnectionState.RECONNECTING: "status-warn",
    ConnectionState.DISCONNECTED: "status-fail",
    ConnectionState.REFUSED: "status-fail",
}


@dataclass(frozen=True)
class Sources:
    """Where each kind of data comes from now: 'nvml', 'nvidia-smi', 'none', 'live', ..."""

    gpu: str = "…"
    log: str = "…"
    metrics: str = "…"


def describe_link(link: LinkStatus) -> str:
    if link.state is ConnectionState.RECONNECTING and link.retry_in_s is not None:
        return f"reconnecting in {link.retry_in_s:.0f} s"
    if link.state is ConnectionState.REFUSED:
        return f"refused: {link.detail}"
    return link.state.value


class HostHeader(Widget):
    """One line at the top of a host screen."""

    DEFAULT_CSS = "HostHeader { height: 1; }"

    host_name: reactive[str] = reactive("")
    link: reactive[LinkStatus] = reactive(LinkStatus(ConnectionState.CONNECTING))
    sources: reactive[Sources] = reactive(Sources())
    readonly: reactive[bool] = reactive(False)
    scenario: reactive[str] = reactive("")
    activity: reactive[str] = reactive("")
    """What the server is doing now: "loading weights 2m10s", "restart: stopping", ..."""

    def render(self) -> Text:
        v = self.app.theme_variables
        state_colour = v.get(_STATE_STYLE[self.link.state], "")
        text = Text()
        text.append(" vllm-console ", style=f"bold reverse {v.get('primary', '')}")
        text.append(f" {self.host_name} ", style="bold")
        if self.scenario:
            text.append(f"(simulated: {self.scenario}) ", style="italic")
        text.append(f"● {describe_link(self.link)}", style=f"bold {state_colour}")
        for label, value in (("gpu", self.sources.gpu), ("log", self.sources.log),
                             ("metrics", self.sources.metrics)):
            good = value not in ("none", "…", "down", "unreachable", "missing")
            colour = v.get("status-ok" if good else "status-unknown", "")
            text.append("  ")
            text.append(f" {label}:{value} ", style=f"{colour} reverse" if good else colour)
        if self.activity:
            text.append(f"  {self.activity}", style="bold")
        if self.readonly:
            text.append("  READONLY ", style=f"bold reverse {v.get('status-warn', '')}")
        return text
