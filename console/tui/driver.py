"""A terminal driver that sleeps while nobody types.

Textual 8.2.8's `LinuxDriver` reads the terminal in a thread that wakes ten times a second
(`select(0.1)`) to see whether it should stop and to time out a lone Escape: 0.15-0.2% of a core
for an empty app at idle, most of the console's idle cost in URL mode (a stdlib peer, vllm-htop,
spends 0.20-0.25% in all; measured in tmux, benchmarks/bench_url.py). `QuietDriver` waits on the
terminal and on a wake-up pipe with no timeout, and with the parser's own deadline while an
Escape may still start a sequence; stopping (`exit_event.set()`, which `disable_input` calls)
writes to the pipe. Everything else is Textual's. The loop is Textual's `run_input_thread`,
checked against its source for 8.2.8 (pinned in pyproject.toml).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from codecs import getincrementaldecoder
from typing import Any, TypeVar

from textual._loop import loop_last
from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver


class _WakingEvent(threading.Event):
    """An event whose `set()` also wakes a `select` waiting on the pipe's other end."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # full (already woken) or closed
            os.write(self._wake_fd, b"\0")


class QuietDriver(LinuxDriver):
    """`LinuxDriver` whose input thread sleeps until a key, a stop, or an Escape's deadline."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        self.exit_event = _WakingEvent(self._wake_write)

    def run_input_thread(self) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        fileno, wake = self.fileno, self._wake_read
        parser = XTermParser(self._debug)
        feed, tick = parser.feed, parser.tick
        decode = getincrementaldecoder("utf-8")().decode

        def timeout() -> float | None:
            """None while nothing is pending; else until the parser's deadline (a lone
            Escape is a key once it passes)."""
            due = parser._timeout_time
            return None if due is None else max(0.0, due - get_time())

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for last, (key, mask) in loop_last(events):
                if key.fd == wake:
                    os.read(wake, 64)
                    continue
                if mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 1024 * 4), final=final and last)
                    if not data:
                        break  # stdin piped and at its end
                    for event in feed(data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(timeout()))
            selector.unregister(self.fileno)
            process(selector.select(0.1), final=True)
        finally:
            selector.close()
            with contextlib.suppress(EOFError, ParseError):
                for _event in feed(""):
                    pass

    def close(self) -> None:
        super().close()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


ReturnType = TypeVar("ReturnType")


class QuietApp(App[ReturnType]):
    """An app that reads its terminal with `QuietDriver` where Textual would use its
    `LinuxDriver` (not on Windows, headless, inline, nor a driver named by `TEXTUAL_DRIVER`):
    both of the console's apps."""

    def get_driver_class(self) -> type[Driver]:
        driver = super().get_driver_class()
        return QuietDriver if driver is LinuxDriver else driver
