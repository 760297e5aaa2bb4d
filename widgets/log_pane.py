"""The live serve log: follow, search like lnav, regex filter (invertible), level filter,
styles from what the parsers found, copy a line.

Lines arrive in batches (one `add_batch`/`add_lines` call per ~20-50 ms batch). The pane keeps
its own bounded copy of the lines, numbered from the first it received, so that a filter change
can re-render them and a search can say "3/120". A pane that cannot be seen (its screen is not
the current one) only keeps the batch; it renders once it is seen again.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Input, Static

from vllm_console.console.hostclient.follower import LogBatch
from vllm_console.console.output.display import plain_ascii, safe_text
from vllm_console.console.parsers.classifier import LineEvent, LineKind
from vllm_console.console.telemetry.run_log import RunLog
from vllm_console.widgets.log_lines import LogLines

# A following pane shows new lines at once after a quiet spell, else at most this often: each
# frame of the log costs Textual ~5-7 ms at 160x50 however few lines changed, and batches
# arrive every 20-50 ms. 10 a second: the screen's CPU at 1k-10k lines/s 14% -> 8% against 20
# (docs/benchmarks.md); a flood scrolls faster than anyone reads.
FRAME_S = 1 / 10
LEVELS = ("all", "info", "warning", "error")
_MIN_RANK = {"all": -1, "info": 1, "warning": 2, "error": 3}


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


def compile_query(query: str) -> re.Pattern[str] | None:
    """A case-insensitive regex; an invalid one is taken literally (never an error)."""
    if not query:
        return None
    try:
        return re.compile(query, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(query), re.IGNORECASE)


# The looks of `LogLines.looks` the stylesheet gives (`log--spec`, ... in themes/console.tcss).
_LOOKS = ("spec", "aux", "warn", "fail", "current")


class LogPane(Vertical, can_focus=False):
    """The serve log pane."""

    COMPONENT_CLASSES = {f"log--{look}" for look in _LOOKS}

    BINDINGS = [
        # The keys that open the prompt are priority keys: they run as they are read, so the
        # keys typed right behind them (a paste, a fast typist) reach the prompt, never the
        # screen's or the app's bindings (`t` switched the theme). In the prompt they are
        # typed (`check_action`).
        Binding("slash", "search", "Search", priority=True, id="log.search"),
        Binding("n", "next_match", "Next match", show=False, id="log.next"),
        Binding("N", "prev_match", "Previous match", show=False, id="log.prev"),
        Binding("f", "filter", "Filter", priority=True, id="log.filter"),
        Binding("F", "toggle_follow", "Follow", id="log.follow"),
        Binding("l", "cycle_level", "Level", id="log.level"),
        Binding("e", "engine_start", "Engine start", show=False, id="log.engine_start"),
        Binding("y", "copy_line", "Copy line", show=False, id="log.copy"),
        Binding("escape", "clear", "Clear", show=False, id="log.clear"),
    ]

    follow: reactive[bool] = reactive(True)
    level: reactive[str] = reactive("all")

    def __init__(self, max_lines: int = 20_000, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.max_lines = max_lines
        self._entries: deque[str] = deque(maxlen=max_lines)  # display-safe lines
        self._next = 1  # the number the next line gets
        self._kinds: dict[int, LineKind] = {}  # line number -> what the parsers found
        self._kind_order: deque[int] = deque()  # its keys, oldest first
        self._stale = False  # lines kept while the pane could not be seen
        self._pending_lines: list[str] = []  # kept for the pane's next frame
        self._pending_numbers: list[int] = []
        self._flushed_at = 0.0
        self._flush_timer: Timer | None = None
        self._filter: re.Pattern[str] | None = None
        self._filter_text = ""
        self._invert = False
        self._search: re.Pattern[str] | None = None
        self._search_text = ""
        self._matches: list[int] = []  # numbers of the shown lines that match, ascending
        self._prompt_mode = ""
        # Held, not queried: a message can reach the pane after it is mounted but before its
        # children are (a busy machine, a lazily mounted tab), when a query finds nothing.
        self._status = Static(id="log-status")
        self._log = LogLines(max_lines, self._kinds, id="log")
        self._log.can_focus = True
        self._prompt = Input(id="log-prompt", classes="hidden")

    def compose(self) -> ComposeResult:
        yield self._status
        yield self._log
        yield self._prompt

    @property
    def log_widget(self) -> LogLines:
        return self._log

    @property
    def _match_y(self) -> int:
        """The row of the current match among the shown lines, -1: none."""
        log, number = self._log, self._log.current
        y = log.y_of(number)
        return y if number >= 0 and y < len(log.numbers) and log.numbers[y] == number else -1

    def on_mount(self) -> None:
        self._update_status()
        self._apply_theme()
        self.app.theme_changed_signal.subscribe(self, lambda _: self._apply_theme())
        self.app.screen_change_signal.subscribe(self, self._screen_changed)
        # Lines handed over before the pane was mounted (a host screen being composed) show
        # now: a quiet log may send nothing more.
        self.call_after_refresh(self._screen_changed, None)

    def _apply_theme(self) -> None:
        """The looks of classified lines from the stylesheet's `log--*` component classes
        (after a theme change, the stylesheet has been refreshed by the time this runs); a
        pane outside the console's stylesheet keeps the log's own looks."""
        for look in _LOOKS:
            style = self.get_component_rich_style(f"log--{look}", partial=True)
            if style.color is not None:
                self._log.looks[look] = str(style)
        if self.is_mounted:
            self._log.restyle()

    def _screen_changed(self, _screen: object) -> None:
        if self._stale and self._seen():
            self._rerender()

    def _seen(self) -> bool:
        """The pane's screen is on top, or under screens that let it show through (a
        dialog's translucent background). `Screen.is_current` also counts the screen under an
        opaque one (the fleet table over a host)."""
        if not self.is_attached:
            return False
        stack = self.app.screen_stack
        above = stack[stack.index(self.screen) + 1:] if self.screen in stack else None
        return above is not None and all(s.styles.background.a < 1 for s in above)

    # -- data in ---------------------------------------------------------------------------
    def add_batch(self, batch: LogBatch, notable: Iterable[tuple[int, LineEvent]]) -> None:
        """One follower batch and what the parsers found in it (`LogLinesReceived`). Lines
        that the pane would drop at once (a flood's batch can hold more than `max_lines`) are
        counted but not made display-safe; the rest come display-safe from the batch."""
        skip = max(0, len(batch.texts) - self.max_lines)
        lines = batch.display_lines(skip=skip)
        offset = len(lines) - len(batch.texts)  # the follower's notices come first
        self._next += skip
        self.add_lines(lines, [(offset + i, event) for i, event in notable if i >= skip], True)

    def add_lines(self, lines: Iterable[str],
                  notable: Iterable[tuple[int, LineEvent]] | None = None,
                  safe: bool = False) -> None:
        """Append one batch of lines, escapes already stripped (one call per batch).
        `notable`: the parsers' findings by index in the batch; None: the pane asks them
        (`RunLog.feed_texts`, the rule the rest of the console counts by). `safe`: the lines
        are display-safe already (`LogBatch.display_lines`)."""
        batch = list(lines) if safe else display_safe(lines)
        if not batch:
            return
        if notable is None:
            notable, _ = RunLog().feed_texts(batch)
        first = self._next
        self._next += len(batch)
        for i, event in notable:
            self._kinds[first + i] = event.kind
            self._kind_order.append(first + i)
        dropped = len(self._entries) + len(batch) - self.max_lines
        self._entries.extend(batch)
        if dropped > 0:
            self._forget_before(self._next - len(self._entries))
        if not self._seen():
            self._stale = True
            return
        if self._stale:
            self._rerender()
            return
        numbers = range(first, self._next)
        if self.level != "all" or self._filter is not None:
            shown = [(n, t) for n, t in zip(numbers, batch, strict=True) if self._visible(t)]
            if not shown:
                return
            numbers, batch = [n for n, _ in shown], [t for _, t in shown]  # type: ignore[assignment]
        self._pending_numbers += numbers
        self._pending_lines += batch
        wait = self._flushed_at + FRAME_S - time.monotonic()
        if wait <= 0:
            self._flush()
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(wait, self._flush)

    def _flush(self) -> None:
        """Show the lines held since this pane's last frame (at most one per FRAME_S)."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._flushed_at = time.monotonic()
        lines, numbers = self._pending_lines[-self.max_lines:], \
            self._pending_numbers[-self.max_lines:]
        if not lines:
            return
        self._pending_lines, self._pending_numbers = [], []
        self._note_matches(numbers, lines)
        self._log.append(lines, numbers, self.follow)
        if self._search is not None:
            self._update_status()

    def _forget_before(self, oldest: int) -> None:
        kinds, order = self._kinds, self._kind_order
        while order and order[0] < oldest:
            del kinds[order.popleft()]
        if self._matches and self._matches[0] < oldest:
            del self._matches[:bisect_left(self._matches, oldest)]

    def _note_matches(self, numbers: Sequence[int], lines: Sequence[str]) -> None:
        if self._search is not None:
            search = self._search.search
            self._matches += [n for n, t in zip(numbers, lines, strict=True) if search(t)]

    def _discard_pending(self) -> None:
        self._pending_lines, self._pending_numbers = [], []

    @property
    def entry_count(self) -> int:
        return len(self._entries)

    def visible_lines(self) -> list[str]:
        if self._stale:
            self._rerender()
        self._flush()
        return list(self._log.lines)

    def _visible(self, text: str) -> bool:
        least = _MIN_RANK[self.level]
        if least >= 0 and level_rank(text) < least:  # ranked only when a level is chosen
            return False
        if self._filter is None:
            return True
        return (self._filter.search(text) is None) == self._invert

    def _rerender(self) -> None:
        self._stale = False
        self._discard_pending()
        first = self._next - len(self._entries)
        shown = [(first + i, t) for i, t in enumerate(self._entries) if self._visible(t)]
        numbers, lines = [n for n, _ in shown], [t for _, t in shown]
        self._matches = []
        self._note_matches(numbers, lines)
        if self._log.current not in self._matches:
            self._log.current = -1
        self._log.placeholder = self._empty_reason() if self._entries else ""
        self._log.replace(lines, numbers, self.follow)
        self._update_status()

    def _empty_reason(self) -> str:
        """What a person reads in a pane whose filters hide every line: "no lines at level
        warning", "no lines match /x/", "no lines at level error outside /x/"."""
        parts = ["no lines"]
        if self.level != "all":
            parts.append(f"at level {self.level}")
        if self._filter is not None:
            pattern = f"/{self._filter_text.lstrip('!')}/"
            verb = "outside" if self._invert else "matching" if self.level != "all" else "match"
            parts.append(f"{verb} {pattern}")
        return " ".join(parts)

    # -- filters and search ------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        """A regex filter; a leading `!` inverts it (hide what matches)."""
        self._invert = text.startswith("!")
        self._filter_text = text
        self._filter = compile_query(text[1:] if self._invert else text)
        self._rerender()

    def set_search(self, text: str) -> None:
        self._flush()
        self._search_text = text
        self._search = compile_query(text)
        log = self._log
        log.current = -1
        log.numbered = self._search is not None
        log.search = None if self._search is None else _spans(self._search)
        self._matches = []
        self._note_matches(log.numbers, log.lines)
        log.restyle()
        if self._search is not None:
            self._goto(self._first_match())
        self._update_status()

    def _first_match(self) -> int:
        """lnav's first hit: the newest match at or above the bottom of the view, else the
        oldest below it (around)."""
        if not self._matches:
            return -1
        log = self._log
        bottom = int(log.scroll_offset.y) + log.size.height - 1
        if bottom >= len(log.numbers) or bottom < 0:
            bottom = len(log.numbers) - 1
        at = bisect_right(self._matches, log.numbers[bottom]) - 1
        return self._matches[at if at >= 0 else 0]

    def _step(self, forward: bool) -> int:
        """The next (newer) or previous (older) match from the current one, around."""
        if not self._matches:
            return -1
        current = self._log.current
        if current < 0:
            return self._first_match()
        if forward:
            at = bisect_right(self._matches, current)
            return self._matches[at % len(self._matches)]
        return self._matches[bisect_left(self._matches, current) - 1]

    def _goto(self, number: int, what: str = "") -> None:
        if number < 0:
            self.notify(what or f"no match for {self._search_text!r}", severity="warning",
                        timeout=2)
            return
        log = self._log
        log.current = number
        self.follow = False
        log.restyle()
        y = log.y_of(number)
        log.scroll_to(y=max(0, y - log.size.height // 2), animate=False, immediate=True)
        self._update_status()

    def action_next_match(self) -> None:
        self._flush()
        self._goto(self._step(True))

    def action_prev_match(self) -> None:
        self._flush()
        self._goto(self._step(False))

    def action_engine_start(self) -> None:
        """The newest engine start (the current run begins there); again: the one before."""
        self._flush()
        log = self._log
        starts = [n for n in log.numbers if self._kinds.get(n) is LineKind.ENGINE_START]
        if not starts:
            self._goto(-1, "no engine start in the shown log")
            return
        at = bisect_left(starts, log.current) - 1 if log.current in starts else -1
        self._goto(starts[at])

    def action_copy_line(self) -> None:
        """Copy the current match (or the newest line in view) to the terminal's clipboard
        (OSC 52; tmux and modern terminals pass it)."""
        self._flush()
        log = self._log
        if not log.numbers:
            self.notify("no line to copy", severity="warning", timeout=2)
            return
        if log.current >= 0:
            y = log.y_of(log.current)
        else:
            y = min(len(log.numbers), int(log.scroll_offset.y) + log.size.height) - 1
        self.app.copy_to_clipboard(log.lines[y])
        self.notify(f"copied line {log.numbers[y]}", timeout=2)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self._log.current = -1
            self._log.restyle()
            self._log.scroll_end(animate=False)

    def action_cycle_level(self) -> None:
        self.level = LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)]

    def watch_level(self) -> None:
        if self.is_mounted:
            self._rerender()

    def watch_follow(self, follow: bool) -> None:
        if self.is_mounted:
            self._log.auto_scroll = follow
            self._update_status()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # In the prompt, `/` and `f` are characters of the query. `screen.focused`, not
        # `has_focus`: that follows the Focus event, still queued when the keys typed right
        # behind `/` arrive.
        return not (action in ("search", "filter") and self.is_attached
                    and self.screen.focused is self._prompt)

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
        # At once, not after the queued events (`focus()` waits for them): keys typed right
        # after `/` (a paste, a fast typist, tmux send-keys) are already queued, and would
        # otherwise reach the pane and the screen as commands.
        self.screen.set_focus(prompt)

    @on(Input.Submitted, "#log-prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        prompt = self._prompt
        prompt.add_class("hidden")
        if self._prompt_mode == "search":
            self.set_search(event.value)
        else:
            self.set_filter(event.value)
        self.screen.set_focus(self._log)  # `n` typed right after Enter steps, as in less

    def on_key(self, event) -> None:  # type: ignore[no-untyped-def]
        prompt = self._prompt
        if event.key == "escape" and prompt.has_focus:
            event.stop()
            prompt.add_class("hidden")
            self.screen.set_focus(self._log)

    def _update_status(self) -> None:
        parts = ["following" if self.follow else "paused (F to follow)", f"level {self.level}"]
        if self._filter_text:
            negate = "NOT " if self._invert else ""
            parts.append(f"filter {negate}/{self._filter_text.lstrip('!')}/")
        if self._search_text:
            matches, current = self._matches, self._log.current
            at = bisect_left(matches, current) + 1 if current in matches else 0
            where = f"{at}/{len(matches)}" if at else f"{len(matches)} matches"
            parts.append(f"search /{self._search_text}/ {where}")
        self._status.update(" · ".join(parts))


def _spans(pattern: re.Pattern[str]) -> Callable[[str], list[tuple[int, int]]]:
    """The (start, end) of each non-empty match of `pattern` in a line."""
    def spans(line: str) -> list[tuple[int, int]]:
        return [m.span() for m in pattern.finditer(line) if m.end() > m.start()]
    return spans
