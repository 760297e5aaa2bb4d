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
    server: reactive[str] = reactive("")
    """Which of the host's servers this is ("server 2 of 3 · :8001"), or that it exited;
    "" on a host with one."""
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
        return self.fitted(self.size.width or 10_000)

    def segments(self) -> list[tuple[int, Text]]:
        """The header's pieces in the order shown, each with its rank: on a narrow terminal
        the lowest rank gives way first (DROP_ORDER), never a word cut in half."""
        segments: list[tuple[int, Text]] = []

        def add(rank: int, words: str, style: Style | str = "") -> None:
            segments.append((rank, Text(words, style=style)))

        if not self.compact:
            add(_BADGE, " vllm-console ",
                status_style(self, "accent") + Style(bold=True, reverse=True))
        add(_KEEP, f" {self.host_name} ", "bold")
        if self.scenario:
            add(_SCENARIO, "(sim) " if self.compact else f"(simulated: {self.scenario}) ",
                "italic")
        if self.server:  # which of the host's servers: kept, as the link is
            gone = "exited" in self.server or "not running" in self.server
            add(_KEEP, f"{self.server} ", status_style(self, "fail") + BOLD if gone
                else Style(bold=True))
        add(_KEEP, f"● {describe_link(self.link, why=not self.compact)}",
            status_style(self, self.link.state.status) + BOLD)
        if self.engine_alert:
            alert = self.engine_alert.split(":", 1)[0] if self.compact else \
                self.engine_alert[:160]
            add(_KEEP, f"  {alert} ", status_style(self, "fail") + Style(bold=True,
                                                                        reverse=True))
        if self.stale:
            add(_STALE, f" · stale, {describe_age(self.data_age_s)}",
                status_style(self, "warn") + BOLD)
        for label, value in (("gpu", self.sources.gpu), ("log", self.sources.log),
                             ("metrics", self.sources.metrics)):
            if label not in self.chips:
                continue
            good = value not in _NO_SOURCE and not self.stale
            chip = Text(" " if self.compact else "  ")
            chip.append(f" {label} " if self.compact else f" {label}:{value} ",
                        style=status_style(self, "ok") + Style(reverse=True)
                        if good else status_style(self, "unknown"))
            segments.append((_CHIPS, chip))
        if self.activity:
            add(_ACTIVITY, f"  {self.activity}", "bold")
        if self.readonly:
            add(_KEEP, "  READONLY ", status_style(self, "warn") + Style(bold=True,
                                                                       reverse=True))
        return segments

    def fitted(self, width: int) -> Text:
        """The header in `width` cells: whole when it fits; else the lowest-ranked pieces
        give way, and what the server is doing is shortened at a word (with …) before it
        goes."""
        segments = self.segments()
        used = sum(t.cell_len for _, t in segments)
        for rank in DROP_ORDER:
            if used <= width:
                break
            for index in range(len(segments) - 1, -1, -1):
                seg_rank, text = segments[index]
                if seg_rank != rank or used <= width:
                    continue
                shorter = _shorten(text, text.cell_len - (used - width)) \
                    if rank == _ACTIVITY else None
                used -= text.cell_len
                if shorter is not None:
                    segments[index] = (rank, shorter)
                    used += shorter.cell_len
                else:
                    del segments[index]
        line = Text(no_wrap=True, overflow="ellipsis")
        for _, text in segments:
            line.append_text(text)
        return line


def _shorten(text: Text, width: int) -> Text | None:
    """`text` cut at the last word that fits in `width` cells, with …; None when not even
    two words would."""
    plain = text.plain
    if width < 12:
        return None
    cut = plain.rfind(" ", 0, width - 1)
    head = plain[:cut].rstrip(" ·:,")
    if len(head.split()) < 2:
        return None
    shortened = text[: len(head)]
    shortened.append("…", style=text.style)
    return shortened


# Ranks of the header's pieces; DROP_ORDER: which give way first on a narrow terminal.
_KEEP, _BADGE, _SCENARIO, _CHIPS, _ACTIVITY, _STALE = range(6)
DROP_ORDER = (_BADGE, _SCENARIO, _CHIPS, _ACTIVITY, _STALE)
