"""The live serve log: follow, search, regex filter (invertible), level filter, highlights.

Lines arrive in batches (one `add_lines` call per ~50 ms batch) and go to the `Log` in one
`write_lines` followed by `refresh()`: Textual 8.2.8 stops repainting a full `Log` otherwise.
The pane keeps its own bounded copy of the lines so that a filter change can re-render them.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from collections.abc import Iterable

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Log, Static

from console.display import plain_ascii, safe_text

LEVELS = ("all", "info", "warning", "error")
_MIN_RANK = {"all": -1, "info": 1, "warning": 2, "error": 3}
ENGINE_START = "Initializing a V1 LLM engine"


def level_rank(text: str) -> int:
    """The vLLM level of a line from its prefix (cheap: no full parse), -1 when none; a
    traceback line counts as an error."""
    head = " " + text[:120]  # a line may start with its level (no process tag)
    best, found = len(head), -1
    for level, rank in _PREFIX_LEVELS:
        at = head.find(level)
        if 0 <= at < best:  # the first level word is the prefix's, not the message's
            best, found = at, rank
    if found >= 0:
        return found
    if text.startswith("Traceback") or "Error:" in text[:60]:
        return 3
    return -1


_PREFIX_LEVELS = ((" ERROR ", 3), (" CRITICAL ", 3), (" WARNING ", 2), (" INFO ", 1),
                  (" INFO:", 1), (" DEBUG ", 0))


def display_safe(lines: Iterable[str]) -> list[str]:
    """`lines` made inert for the screen (`safe_text`), checked once per batch: a batch of
    printable ASCII (nearly every batch) is safe as it is."""
    batch = list(lines)
    return batch if plain_ascii(batch) else list(map(safe_text, batch))


class LogHighlighter(Highlighter):
    """Colours the lines that matter: spec-decode metrics, aux layers, warnings, errors, and
    the current search term. Styles come from the theme (set by the pane)."""

    def __init__(self) -> None:
        self.styles = {"spec": "bold cyan", "aux": "bold magenta", "warn": "yellow",
                       "fail": "bold red", "search": "reverse"}
        self.search: re.Pattern[str] | None = None

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if "SpecDecoding metrics" in plain or "Speculative metrics" in plain:
            text.stylize(self.styles["spec"])
        elif "auxiliary layers" in plain:
            text.stylize(self.styles["aux"])
        elif " ERROR " in plain or "Error" in plain or "Traceback" in plain:
            text.stylize(self.styles["fail"])
        elif " WARNING " in plain:
            text.stylize(self.styles["warn"])
        if self.search is not None:
            for m in self.search.finditer(plain):
                if m.end() > m.start():
                    text.stylize(self.styles["search"], m.start(), m.end())


def compile_query(query: str) -> re.Pattern[str] | None:
    """A case-insensitive regex; an invalid one is taken literally (never an error)."""
    if not query:
        return None
    try:
        return re.compile(query, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(query), re.IGNORECASE)


class _Log(Log):
    """Textual's `Log`, measuring new lines on the event loop instead of in a thread.

    Stock `Log.write_lines` starts a thread worker per call to measure the lines' cell width,
    which then calls back into the app. At a log flood that is a worker, a thread hop and a
    callback per batch, and as the console closes a batch in flight reached a `Log` already
    out of the DOM: the thread raised `NoActiveAppError` and the app exited with a traceback.
    The pane's lines are display-safe and nearly all printable ASCII, whose width is their
    length: one C-speed check per batch, and `cell_len` only for a batch that needs it.
    """

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if not lines:
            return
        if plain_ascii(lines, max_len=sys.maxsize):
            width = max(map(len, lines))
        else:
            process = self._process_line
            width = max(cell_len(process(line)) for line in lines)
        self._update_maximum_width(updates, width)


class LogPane(Vertical, can_focus=False):
    """The serve log pane."""

    BINDINGS = [
        Binding("slash", "search", "Search", id="log.search"),
        Binding("n", "next_match", "Next", show=False, id="log.next"),
        Binding("N", "prev_match", "Prev", show=False, id="log.prev"),
        Binding("f", "filter", "Filter", id="log.filter"),
        Binding("F", "toggle_follow", "Follow", id="log.follow"),
        Binding("l", "cycle_level", "Level", id="log.level"),
        Binding("e", "engine_start", "Engine start", show=False, id="log.engine_start"),
        Binding("escape", "clear", "Clear", show=False, id="log.clear"),
    ]

    follow: reactive[bool] = reactive(True)
    level: reactive[str] = reactive("all")

    def __init__(self, max_lines: int = 20_000, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.max_lines = max_lines
        self._entries: deque[str] = deque(maxlen=max_lines)  # display-safe lines
        self._filter: re.Pattern[str] | None = None
        self._filter_text = ""
        self._invert = False
        self._search: re.Pattern[str] | None = None
        self._search_text = ""
        self._match_y = -1
        self._prompt_mode = ""
        self.highlighter = LogHighlighter()
        # Held, not queried: a message can reach the pane after it is mounted but before its
        # children are (a busy machine, a lazily mounted tab), when a query finds nothing.
        self._status = Static(id="log-status")
        self._log = _Log(max_lines=max_lines, highlight=True, id="log")
        self._log.highlighter = self.highlighter
        self._log.can_focus = True
        self._prompt = Input(id="log-prompt", classes="hidden")

    def compose(self) -> ComposeResult:
        yield self._status
        yield self._log
        yield self._prompt

    @property
    def log_widget(self) -> Log:
        return self._log

    def on_mount(self) -> None:
        self._update_status()
        self._apply_theme()
        self.watch(self.app, "theme", lambda _: self._apply_theme(), init=False)

    def _apply_theme(self) -> None:
        variables = self.app.theme_variables
        self.highlighter.styles.update({
            "spec": f"bold {variables.get('log-spec', 'cyan')}",
            "aux": f"bold {variables.get('log-aux', 'magenta')}",
            "warn": variables.get("status-warn", "yellow"),
            "fail": f"bold {variables.get('status-fail', 'red')}",
        })
        if self.is_mounted:
            self.log_widget.refresh()

    # -- data in ---------------------------------------------------------------------------
    def add_lines(self, lines: Iterable[str]) -> None:
        """Append one batch of lines, escapes already stripped (one call per batch)."""
        batch = display_safe(lines)
        if not batch:
            return
        self._entries.extend(batch)
        plain = self.level == "all" and self._filter is None
        visible = batch if plain else [t for t in batch if self._visible(t)]
        if visible:
            log = self.log_widget
            log.write_lines(visible, scroll_end=self.follow)
            log.refresh()

    def clear_lines(self) -> None:
        self._entries.clear()
        self.log_widget.clear()

    @property
    def entry_count(self) -> int:
        return len(self._entries)

    def visible_lines(self) -> list[str]:
        return list(self.log_widget.lines)

    def _visible(self, text: str) -> bool:
        least = _MIN_RANK[self.level]
        if least >= 0 and level_rank(text) < least:  # ranked only when a level is chosen
            return False
        if self._filter is None:
            return True
        return (self._filter.search(text) is None) == self._invert

    def _rerender(self) -> None:
        log = self.log_widget
        log.clear()
        log.write_lines([t for t in self._entries if self._visible(t)],
                        scroll_end=self.follow)
        log.refresh()
        self._match_y = -1
        self._update_status()

    # -- filters and search ------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        """A regex filter; a leading `!` inverts it (hide what matches)."""
        self._invert = text.startswith("!")
        self._filter_text = text
        self._filter = compile_query(text[1:] if self._invert else text)
        self._rerender()

    def set_search(self, text: str) -> None:
        self._search_text = text
        self._search = compile_query(text)
        self.highlighter.search = self._search
        self._match_y = -1
        self.log_widget.refresh()
        if self._search is not None:
            self.action_next_match()
        self._update_status()

    def _find(self, forward: bool) -> int:
        lines = self.log_widget.lines
        if self._search is None or not lines:
            return -1
        count = len(lines)
        start = self._match_y if self._match_y >= 0 else (
            int(self.log_widget.scroll_offset.y) - 1 if forward else count)
        for step in range(1, count + 1):
            y = (start + step) % count if forward else (start - step) % count
            if self._search.search(lines[y]):
                return y
        return -1

    def _goto(self, y: int) -> None:
        if y < 0:
            self.notify(f"no match for {self._search_text!r}", severity="warning", timeout=2)
            return
        self._match_y = y
        self.follow = False
        log = self.log_widget
        log.scroll_to(y=max(0, y - log.size.height // 2), animate=False)
        self._update_status()

    def action_next_match(self) -> None:
        self._goto(self._find(True))

    def action_prev_match(self) -> None:
        self._goto(self._find(False))

    def action_engine_start(self) -> None:
        """Jump to the last engine start (the current run begins there)."""
        lines = self.log_widget.lines
        for y in range(len(lines) - 1, -1, -1):
            if ENGINE_START in lines[y]:
                self._goto(y)
                return
        self.notify("no engine start in the visible log", severity="warning", timeout=2)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self.log_widget.scroll_end(animate=False)

    def action_cycle_level(self) -> None:
        self.level = LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)]

    def watch_level(self) -> None:
        if self.is_mounted:
            self._rerender()

    def watch_follow(self, follow: bool) -> None:
        if self.is_mounted:
            self.log_widget.auto_scroll = follow
            self._update_status()

    def action_search(self) -> None:
        self._open_prompt("search", self._search_text, "search (regex)  enter: find  esc: cancel")

    def action_filter(self) -> None:
        self._open_prompt("filter", self._filter_text,
                     "filter (regex, !regex hides matches)  enter: apply  esc: cancel")

    def action_clear(self) -> None:
        if self._filter is not None:
            self.set_filter("")
        if self._search is not None:
            self.set_search("")

    def _open_prompt(self, mode: str, value: str, placeholder: str) -> None:
        prompt = self._prompt
        self._prompt_mode = mode
        prompt.placeholder = placeholder
        prompt.value = value
        prompt.remove_class("hidden")
        prompt.focus()

    @on(Input.Submitted, "#log-prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = self._prompt
        prompt.add_class("hidden")
        if self._prompt_mode == "search":
            self.set_search(event.value)
        else:
            self.set_filter(event.value)
        self.log_widget.focus()

    def on_key(self, event) -> None:  # type: ignore[no-untyped-def]
        prompt = self._prompt
        if event.key == "escape" and prompt.has_focus:
            event.stop()
            prompt.add_class("hidden")
            self.log_widget.focus()

    def _update_status(self) -> None:
        parts = ["following" if self.follow else "paused (F to follow)", f"level {self.level}"]
        if self._filter_text:
            negate = "NOT " if self._invert else ""
            parts.append(f"filter {negate}/{self._filter_text.lstrip('!')}/")
        if self._search_text:
            where = f" line {self._match_y + 1}" if self._match_y >= 0 else ""
            parts.append(f"search /{self._search_text}/{where}")
        self._status.update(" · ".join(parts))
