"""Following a growing file on the host by byte offset, across a lost SSH link.

One long-lived `tail -F` per file (no process per tick). When the link drops, the follower waits
for it to come back (the host reconnects with backoff) and resumes at the byte it stopped at:
no gap, no duplicate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable

from console.host import Host, HostError, StreamHandle

# A line longer than this is cut (the rest up to its newline skipped): the start-up tracker
# needs no more, and a writer that never ends its line must not grow the client's memory.
MAX_LINE_BYTES = 1 << 20


class LinkTimeout(HostError):
    """The link stayed down for longer than the follower was allowed to wait."""


class FileFollower:
    """Whole lines of `path` from `offset` on, as they are written."""

    def __init__(self, host: Host, path: str, offset: int = 0, *, link_timeout: float = 120.0,
                 on_link: Callable[[bool, str], None] | None = None,
                 catch_up: bool = False) -> None:
        self.host = host
        self.path = path
        self.offset = offset
        """Bytes of the file consumed so far (complete lines only)."""
        self._link_timeout = link_timeout
        self._on_link = on_link
        self._handle: StreamHandle | None = None
        self._closed = False
        self._backlog_end = 0
        self._catch_up = catch_up
        """Started late (after a lost link): what the file holds already is backlog."""

    @property
    def catching_up(self) -> bool:
        """The last line yielded was written while the link was down: it arrived late, so the
        time it was received says nothing about when it was written."""
        return self.offset <= self._backlog_end

    async def close(self) -> None:
        self._closed = True
        handle, self._handle = self._handle, None
        if handle is not None:
            await handle.close()

    async def lines(self) -> AsyncGenerator[str, None]:
        """Lines (without endings) until `close()`; raises LinkTimeout when the link stays
        down too long."""
        if self._catch_up:
            await self._measure_backlog()
        while not self._closed:
            partial = b""  # received, not yet a whole line: re-read after a reconnect
            skipping = False  # in the rest of a line already cut
            try:
                self._handle = await self.host.stream(
                    ["tail", "-c", f"+{self.offset + 1}", "-F", "--", self.path])
                async for chunk in self._handle:
                    if skipping:
                        end = chunk.find(b"\n")
                        if end < 0:
                            self.offset += len(chunk)
                            continue
                        self.offset += end + 1
                        chunk, skipping = chunk[end + 1:], False
                    *whole, partial = (partial + chunk).split(b"\n")
                    for raw in whole:
                        self.offset += len(raw) + 1
                        yield raw.rstrip(b"\r").decode("utf-8", "replace")
                    if len(partial) > MAX_LINE_BYTES:
                        self.offset += len(partial)
                        cut, partial, skipping = partial[:MAX_LINE_BYTES], b"", True
                        yield cut.decode("utf-8", "replace")
            except HostError as exc:
                if self._closed:
                    return
                await self._wait_link(str(exc))
                continue
            finally:
                handle, self._handle = self._handle, None
                if handle is not None:
                    await handle.close()
            if self._closed:
                return
            # `tail -F` never ends by itself: the channel went away with the link.
            await self._wait_link("stream ended")

    async def _wait_link(self, why: str) -> None:
        if self._on_link is not None:
            self._on_link(False, why)
        deadline = time.monotonic() + self._link_timeout
        delay = 0.2
        while True:
            try:
                await self.host.connect()
                break
            except HostError as exc:
                if time.monotonic() >= deadline:
                    raise LinkTimeout(f"{self.host.name}: link down for more than "
                                      f"{self._link_timeout:g} s: {exc}") from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        await self._measure_backlog()
        if self._on_link is not None:
            self._on_link(True, "link back")

    async def _measure_backlog(self) -> None:
        """Note how far the file reaches now: the lines up to there were written while
        nobody followed."""
        try:
            size = await self.host.run(["stat", "-L", "-c", "%s", "--", self.path], timeout=15)
            if size.ok and size.text.strip().isdigit():
                self._backlog_end = int(size.text.strip())
        except HostError:
            pass  # the stream will say what is wrong with the link

