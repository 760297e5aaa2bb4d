"""A restart's files on the host (its status file, the serve log from the marker on), followed
with the console's own log follower (`console.hostclient.follower.LogFollower`: one long-lived
process per file, resumed at the exact byte after a lost link, no gap and no duplicate) and handed
over as lines, with the link's losses and returns said and bounded.

What this adds for a restart: the link may stay down for `link_timeout` at most (then
`LinkTimeout`: the restart goes on on the host, the client stops waiting), and lines that
arrive after the link came back but were written while it was down are marked
(`catching_up`), so that the start-up phases they report get no made-up duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable

from vllm_console.console.hostclient.follower import LogBatch, LogFollower, NoticeKind
from vllm_console.console.transport.aio import cancel_and_wait, within
from vllm_console.console.transport.host import ConnectionState, Host, HostError

# A line longer than this is cut (the follower says so): the start-up tracker needs no more,
# and a writer that never ends its line must not grow the client's memory.
MAX_LINE_BYTES = 1 << 20
_LOST = (NoticeKind.DISCONNECTED, NoticeKind.FOLLOWER_ENDED)


class LinkTimeout(HostError):
    """The link stayed down for longer than the follower was allowed to wait."""


class FileFollower:
    """Whole lines of `path` from byte `offset` on, as they are written."""

    def __init__(self, host: Host, path: str, offset: int = 0, *, link_timeout: float = 120.0,
                 on_link: Callable[[bool, str], None] | None = None,
                 catch_up: bool = False, python: str = "") -> None:
        self.host = host
        self.path = path
        self._consumed = offset
        self._link_timeout = link_timeout
        self._on_link = on_link
        # Each chunk's lines handed over at once, into a short queue the reader drains: a
        # writer faster than the restart reads never piles up in memory here.
        self._follower = LogFollower(host, path, start="offset", offset=offset,
                                     max_lines=256, max_bytes=4 * MAX_LINE_BYTES,
                                     max_line_bytes=MAX_LINE_BYTES, batch_s=0.0,
                                     idle_flush_s=0.0, min_gap_s=0.0,
                                     python=python)
        self._batches: asyncio.Queue[LogBatch] = asyncio.Queue(maxsize=4)
        self._task: asyncio.Task[None] | None = None
        self._down_since: float | None = None
        self._backlog_end = -1 if catch_up else 0
        """Lines up to this byte were written while nobody followed (-1: not measured yet)."""
        self._late = False

    @property
    def offset(self) -> int:
        """How far the lines handed over reach (the follower may have read further): where to
        read on for the rest once it is closed."""
        return self._consumed

    @property
    def catching_up(self) -> bool:
        """The last line handed over was written while the link was down: it arrived late, so
        the time it was received says nothing about when it was written."""
        return self._late

    async def close(self) -> None:
        self._follower.stop()
        if self._task is not None:
            await cancel_and_wait(self._task)

    async def lines(self) -> AsyncGenerator[str, None]:
        """Lines (without endings) until `close()`; raises LinkTimeout when the link stays
        down too long."""
        if self._backlog_end < 0:
            await self._measure_backlog()
        self._task = asyncio.create_task(self._follower.run(self._batches.put),
                                         name=f"restart-follow {self.path}")
        try:
            while True:
                batch = await self._next()
                if any(n.kind in _LOST for n in batch.notices):
                    self._lost(next(n.detail for n in batch.notices if n.kind in _LOST))
                elif batch.texts and self._down_since is not None:
                    await self._back()
                self._late = self._consumed < self._backlog_end
                if batch.position is not None:
                    self._consumed = batch.position.offset  # handed over with these lines
                for text in batch.texts:
                    yield text
        finally:
            await self.close()

    async def _next(self) -> LogBatch:
        while True:
            if self._down_since is None:
                return await self._batches.get()
            left = self._down_since + self._link_timeout - time.monotonic()
            with contextlib.suppress(TimeoutError):
                return await within(self._batches.get(), max(0.0, min(left, 1.0)))
            if self.host.link.state is ConnectionState.CONNECTED:
                await self._back()  # back, with nothing new written meanwhile
            elif left <= 0:
                raise LinkTimeout(f"{self.host.name}: link down for more than "
                                  f"{self._link_timeout:g} s: {self.host.link.detail}")

    def _lost(self, why: str) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            if self._on_link is not None:
                self._on_link(False, why)

    async def _back(self) -> None:
        self._down_since = None
        await self._measure_backlog()
        if self._on_link is not None:
            self._on_link(True, "link back")

    async def _measure_backlog(self) -> None:
        """Note how far the file reaches now: the lines up to there were written while
        nobody followed."""
        try:
            size = await self.host.run(["stat", "-L", "-c", "%s", "--", self.path], timeout=15)
            if size.ok and size.text.strip().isascii() and size.text.strip().isdigit():
                self._backlog_end = int(size.text.strip())
        except HostError:
            self._backlog_end = max(self._backlog_end, 0)  # the stream will say what is wrong
