"""`LogFollower`: the serve log, followed on the host from a byte offset, as batches of lines.

Why a dedicated host-side follower (`console/hostside/follow.py`) on its own stream rather than
`tail -F` or the agent's pipe:

- resuming with no gap and no duplicate needs the exact byte position of what arrived, and which
  file it belongs to: the follower frames its output with (inode, offset), so after a lost link
  it restarts at exactly that position and checks that the bytes before it are unchanged
  (`tail` reports neither, and silently re-reads or skips on truncation);
- its volume (100k lines/s and more during a flood) must not delay the agent's 1 Hz samples,
  nor a quiet log cost the agent anything; and the log path changes on its own schedule (a
  relaunch with another log) without restarting GPU telemetry;
- it is still one long-lived process per log, never one per tick, and costs one of the link's
  four channels.

Here the frames are decoded, the bytes split into lines (`\\r\\n`, `\\n`, `\\r`), decoded as UTF-8
with replacement (invalid bytes and NULs never raise), stripped of terminal escapes, kept in a
ring buffer bounded by line count and bytes, and handed to a callback in batches: at most one
batch per `min_gap_s`, a line waits at most `batch_s`, and a quiet stream flushes after
`idle_flush_s`. Very long lines are kept whole (cut only by `LogEntry.display`) up to
`max_line_bytes`, past which a line is cut so that memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from vllm_console.console.output.display import DISPLAY_MAX, PlainLines, safe_text
from vllm_console.console.parsers.lines import LineAssembler
from vllm_console.console.parsers.redact import redact_text
from vllm_console.console.parsers.sieve import batch_keys
from vllm_console.console.transport.aio import cancel_and_wait, within
from vllm_console.console.transport.host import (
    ConnectionState,
    Host,
    HostError,
    StreamHandle,
    backoff,
)
from vllm_console.console.transport.remote_scripts import python_line

SIG_BYTES = 64
MIB = 1024 * 1024
_PLAIN = PlainLines()  # which lines of a batch the screen must change, cached across batches


class FollowState(StrEnum):
    """Where the follower stands, for the log pane's title."""

    STARTING = "starting"
    REPLAYING = "replaying"
    LIVE = "live"
    MISSING = "missing"
    RECONNECTING = "reconnecting"
    STOPPED = "stopped"


class NoticeKind(StrEnum):
    """Something about the log itself, shown between its lines."""

    STARTED = "started"
    RESUMED = "resumed"
    TRUNCATED = "truncated"
    ROTATED = "rotated"
    RECREATED = "recreated"
    CREATED = "created"
    SKIPPED = "skipped"
    MISSING = "missing"
    CAUGHT_UP = "caught-up"
    DISCONNECTED = "disconnected"
    FOLLOWER_ENDED = "follower-ended"
    GAP = "gap"
    LINE_CUT = "line-cut"


_NOTICE_TEXT = {
    NoticeKind.STARTED: "following {detail}",
    NoticeKind.RESUMED: "resumed after reconnect at byte {detail}",
    NoticeKind.TRUNCATED: "log truncated (restarted with '>'?): reading from its start",
    NoticeKind.ROTATED: "log rotated: reading the new file from its start",
    NoticeKind.RECREATED: "log deleted and created again: reading from its start",
    NoticeKind.CREATED: "log appeared: reading from its start",
    NoticeKind.SKIPPED: "{detail} skipped (backlog limit)",
    NoticeKind.MISSING: "log not readable: {detail}; waiting for it",
    NoticeKind.CAUGHT_UP: "caught up",
    NoticeKind.DISCONNECTED: "link lost ({detail}); will resume where it stopped",
    NoticeKind.FOLLOWER_ENDED: "log follower ended ({detail}); starting it again where it "
                               "stopped",
    NoticeKind.GAP: "gap in the log: {detail}",
    NoticeKind.LINE_CUT: "a line longer than {detail} was cut",
}


class LogEntry(NamedTuple):
    """One log line, terminal escapes stripped, whole. `seq` counts lines since the start."""

    # Built on request only (`LogBatch.entries`, `LogFollower.recent`): the hot path and the
    # ring carry plain texts, numbered by where they are.
    seq: int
    text: str

    def display(self, width: int = DISPLAY_MAX) -> str:
        """The line for the screen: secrets (`'api_key': ...`, `--api-key X`) redacted, bidi
        controls made inert, cut at `width` characters (saying how much was cut)."""
        return safe_text(redact_text(self.text, width + 256), width)


@dataclass(frozen=True, slots=True)
class FollowNotice:
    """An event of the log file (truncated, rotated, ...) or of the link."""

    kind: NoticeKind
    detail: str = ""

    @property
    def text(self) -> str:
        return "— " + _NOTICE_TEXT[self.kind].format(detail=self.detail) + " —"


@dataclass(frozen=True, slots=True)
class FollowPosition:
    """Exactly how far the follower got: the file (device, inode) and the byte after the last
    one received; `sig` holds the bytes just before it (to see a rewrite on resume)."""

    path: str
    dev: int
    ino: int
    offset: int
    sig: bytes = b""


@dataclass(frozen=True, slots=True)
class LogBatch:
    """Lines and notices that arrived together; `live` is False while the backlog is replayed.

    The lines are kept as their texts, the first one's `seq` beside them: no object per line
    on the hot path (`entries` builds the `LogEntry`s for whoever asks)."""

    texts: tuple[str, ...]
    notices: tuple[FollowNotice, ...] = ()
    live: bool = True
    position: FollowPosition | None = None
    first_seq: int = 0
    _keys: list[list[bytes] | None] = field(default_factory=list, init=False, compare=False,
                                             repr=False)  # `keys`, once made

    @classmethod
    def of(cls, entries: Iterable[LogEntry], **kw: Any) -> LogBatch:
        """A batch of these entries (consecutive `seq`s)."""
        listed = tuple(entries)
        return cls(tuple(e.text for e in listed), first_seq=listed[0].seq if listed else 0, **kw)

    @property
    def entries(self) -> tuple[LogEntry, ...]:
        return tuple(map(LogEntry, range(self.first_seq, self.first_seq + len(self.texts)),
                         self.texts))

    @property
    def keys(self) -> list[bytes] | None:
        """The lines' `batch_keys`, made on first use: the telemetry's sieve and the screen's
        `PlainLines` both answer by them (one translation of a batch, not two)."""
        if not self._keys:
            self._keys.append(batch_keys(self.texts))
        return self._keys[0]

    def display_lines(self, width: int = DISPLAY_MAX, skip: int = 0) -> list[str]:
        """Everything for one `Log.write_lines`: notices first, then the lines from the
        `skip`-th on (a pane that keeps fewer lines than this batch holds never shows the
        first ones), cut to width.

        Only the lines `PlainLines` finds that the screen must change (nearly none of a busy
        log's) pay for `LogEntry.display`; the others are shown as they are."""
        texts = list(self.texts[skip:])
        keys = self.keys
        self._keys.clear()  # the screen is their last user: not kept while the batch is
        for i in _PLAIN.changed(texts, width, None if keys is None else keys[skip:]):
            texts[i] = LogEntry(self.first_seq + skip + i, texts[i]).display(width)
        return [n.text for n in self.notices] + texts


class FrameError(HostError):
    """The follower's output was not the framing it should be."""


class FrameDecoder:
    """Splits the follower's stdout into (header, payload) frames, across chunk borders."""

    MAX_HEADER = 64 * 1024

    def __init__(self) -> None:
        self._buf = bytearray()
        self._header: dict[str, Any] | None = None
        self._need = 0

    def feed(self, chunk: bytes) -> list[tuple[dict[str, Any], bytes]]:
        buf = self._buf
        buf += chunk
        out: list[tuple[dict[str, Any], bytes]] = []
        pos = 0
        while True:
            if self._header is not None:
                if len(buf) - pos < self._need:
                    break
                out.append((self._header, bytes(buf[pos:pos + self._need])))
                pos += self._need
                self._header = None
                continue
            nl = buf.find(b"\n", pos)
            if nl < 0:
                if len(buf) - pos > self.MAX_HEADER:
                    raise FrameError("log follower: garbled output (no frame header)")
                break
            try:
                header = json.loads(buf[pos:nl])
            except ValueError:
                raise FrameError("log follower: garbled frame header: "
                                 f"{bytes(buf[pos:min(nl, pos + 200)])!r}") from None
            pos = nl + 1
            if not isinstance(header, dict):
                raise FrameError("log follower: frame header is not an object")
            need = header.get("n", 0) if header.get("t") == "data" else 0
            if not isinstance(need, int) or isinstance(need, bool) or need < 0:
                raise FrameError(f"log follower: bad frame length {need!r}")
            if need:
                self._header, self._need = header, need
            else:
                out.append((header, b""))
        del buf[:pos]
        return out


OnBatch = Callable[[LogBatch], Awaitable[None] | None]


class LogFollower:
    """Follows one log file on a host. `run(on_batch)` until `stop()` or cancellation; it
    resumes by byte position after a lost link. `recent()` is the bounded ring of lines."""

    def __init__(self, host: Host, path: str, *, start: str = "run", offset: int = 0,
                 backlog_bytes: int = 16 * MIB, head_bytes: int = 2 * MIB,
                 max_lines: int = 100_000, max_bytes: int = 64 * MIB,
                 max_line_bytes: int = 16 * MIB, batch_s: float = 0.05,
                 idle_flush_s: float = 0.005, min_gap_s: float = 0.02, poll_s: float = 0.01,
                 python: str = "",
                 clock: Callable[[], float] = time.monotonic) -> None:
        if start not in ("run", "end", "begin", "offset"):
            raise ValueError(f"start must be run, end, begin or offset, not {start!r}")
        self.host = host
        self.path = path
        self.start = start
        self.offset = offset
        """Where `start="offset"` begins (a restart's log, from its marker on)."""
        self.backlog_bytes = backlog_bytes
        self.head_bytes = head_bytes
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.max_line_bytes = max_line_bytes
        self.batch_s = batch_s
        self.idle_flush_s = idle_flush_s
        self.min_gap_s = min_gap_s
        self.poll_s = poll_s
        self.python = python
        self.scripts = host.scripts
        self._clock = clock
        # The texts only: the ring's oldest line is number `_seq - len(_ring)`. (Per-line
        # (seq, text) tuples cost ~50 ns a line to make, and each was tracked by the collector
        # until it had survived a collection.)
        self._ring: deque[str] = deque()
        self._ring_bytes = 0
        self._seq = 0
        self._assembler = LineAssembler()
        self._partial = 0
        self._position: FollowPosition | None = None
        self._pending: list[str] = []  # texts; the first one's seq is _seq - len(_pending)
        self._notices: list[FollowNotice] = []
        self._first_pending = 0.0
        self._last_flush = 0.0
        self._live = False
        self._state = FollowState.STARTING
        self._stopping = False
        self._wake = asyncio.Event()
        self._queue: asyncio.Queue[bytes | None] | None = None
        self.reconnects = 0

    # -- what the UI reads --------------------------------------------------------------
    @property
    def state(self) -> FollowState:
        return self._state

    @property
    def position(self) -> FollowPosition | None:
        return self._position

    def recent(self) -> tuple[LogEntry, ...]:
        """The lines kept (at most `max_lines`, about `max_bytes` of text), oldest first."""
        ring = self._ring
        return tuple(map(LogEntry, range(self._seq - len(ring), self._seq), ring))

    def stop(self) -> None:
        """End `run()` soon (it also ends when its task is cancelled)."""
        self._stopping = True
        self._wake.set()
        if self._queue is not None:
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)

    # -- the host command ---------------------------------------------------------------
    async def _command(self, *, once: bool = False) -> str:
        args = [self.path, "--poll", f"{self.poll_s:g}"]
        pos = self._position
        if pos is not None:
            args += ["--ino", str(pos.ino), "--offset", str(pos.offset), "--sig", pos.sig.hex()]
        else:
            args += ["--start", self.start, "--backlog", str(self.backlog_bytes),
                     "--head", str(self.head_bytes)]
            if self.start == "offset":
                args += ["--offset", str(self.offset)]
        if once:
            args.append("--once")
        return python_line(await self.scripts.bundle(), "follow", args, python=self.python,
                           python3=self.scripts.interpreter("python3"))

    # -- following ----------------------------------------------------------------------
    async def run(self, on_batch: OnBatch) -> None:
        """Follow until `stop()`: batches go to `on_batch` (sync or async). A lost link or a
        follower that died is retried with backoff and resumed at the exact byte."""
        self._stopping = False
        self._wake = asyncio.Event()
        attempt = 0
        try:
            while not self._stopping:
                try:
                    handle = await self.host.stream(await self._command())
                except HostError as exc:
                    await self._lost(str(exc), on_batch)
                    await self._wait_retry(attempt)
                    attempt += 1
                    continue
                reason = "log follower ended"
                delivered = False
                try:
                    delivered = await self._pump(handle, on_batch)
                except HostError as exc:
                    reason = str(exc)
                finally:
                    with contextlib.suppress(Exception):
                        await handle.close()
                if self._stopping:
                    break
                attempt = 0 if delivered else attempt + 1
                await self._lost(reason, on_batch)
                await self._wait_retry(attempt)
        finally:
            self._state = FollowState.STOPPED

    async def _lost(self, reason: str, on_batch: OnBatch) -> None:
        self._state = FollowState.RECONNECTING
        self.reconnects += 1
        link_up = self.host.link.state is ConnectionState.CONNECTED
        kind = NoticeKind.FOLLOWER_ENDED if link_up else NoticeKind.DISCONNECTED
        self._notices.append(FollowNotice(kind, reason))
        await self._flush(on_batch)

    async def _wait_retry(self, attempt: int) -> None:
        delay = backoff(attempt)
        # SSHHost reconnects on its own; start again as soon as it is back (the attempts
        # that failed while it was down say nothing about the link now up).
        if self.host.link.state is not ConnectionState.CONNECTED:
            delay = backoff(0)
        with contextlib.suppress(TimeoutError):
            await self.host.wait_connected(timeout=30)
        with contextlib.suppress(TimeoutError):
            await within(self._wake.wait(), delay)  # stop() cuts the wait short

    async def _pump(self, handle: StreamHandle, on_batch: OnBatch) -> bool:
        """Read one follower process to its end. True when it delivered anything."""
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=8)
        self._queue = queue
        failure: list[BaseException] = []

        async def read() -> None:
            # No `finally`: a cancelled reader must not wait on a full queue.
            try:
                async for chunk in handle:
                    await queue.put(chunk)
            except HostError as exc:
                failure.append(exc)
            except (OSError, ValueError) as exc:
                failure.append(HostError(f"log stream broke: {exc}"))
            await queue.put(None)

        decoder = FrameDecoder()
        reader = asyncio.create_task(read(), name=f"follow-read {self.path}")
        delivered = False
        try:
            while not self._stopping:
                timeout = self._flush_timeout()
                try:
                    if timeout is None:
                        chunk = await queue.get()
                    else:
                        chunk = await within(queue.get(), timeout)
                except TimeoutError:
                    await self._flush(on_batch)
                    continue
                if chunk is None:
                    break
                delivered = True
                for header, payload in decoder.feed(chunk):
                    self._frame(header, payload)
                    if header.get("t") == "eof" and not self._live:
                        await self._flush(on_batch)
                        self._live = True
                        self._state = FollowState.LIVE
                if self._flush_due():
                    await self._flush(on_batch)
        finally:
            self._queue = None
            await cancel_and_wait(reader)
        await self._flush(on_batch)
        if failure:
            raise failure[0]
        return delivered

    def _flush_timeout(self) -> float | None:
        if not self._pending and not self._notices:
            return None
        now = self._clock()
        wait = min(self.idle_flush_s, self._first_pending + self.batch_s - now)
        return max(wait, self._last_flush + self.min_gap_s - now, 0.0)

    def _flush_due(self) -> bool:
        now = self._clock()
        return bool(self._pending or self._notices) and (
            now - self._first_pending >= self.batch_s
            and now - self._last_flush >= self.min_gap_s)

    async def _flush(self, on_batch: OnBatch) -> None:
        if not self._pending and not self._notices:
            return
        batch = LogBatch(tuple(self._pending), tuple(self._notices), self._live,
                         self._position, self._seq - len(self._pending))
        self._pending = []
        self._notices = []
        self._last_flush = self._clock()
        result = on_batch(batch)
        if inspect.isawaitable(result):
            await result

    # -- frames -------------------------------------------------------------------------
    def _frame(self, header: dict[str, Any], payload: bytes) -> None:
        kind = header.get("t")
        try:
            if kind == "data":
                self._data(header, payload)
            elif kind == "open":
                self._open(header)
            elif kind == "missing":
                self._state = FollowState.MISSING
                self._notice(NoticeKind.MISSING, str(header.get("why", "")))
        except (TypeError, ValueError, OverflowError) as exc:
            # A header of the wrong shape: start the follower again (a HostError), rather than
            # end following for good.
            raise FrameError(f"log follower: bad {kind} frame: {exc}") from None
        if kind == "error":
            raise HostError(f"log follower: {header.get('msg')}")

    def _open(self, header: dict[str, Any]) -> None:
        why = header.get("why")
        off = int(header.get("off", 0))
        dev, ino = int(header.get("dev", 0)), int(header.get("ino", 0))
        previous = self._position
        if why not in ("resume", "head"):
            # A new file, a rewritten one or a jump: the unfinished line of before is done.
            self._lines(self._assembler.flush_stripped())
            self._assembler = LineAssembler()
            self._partial = 0
        if why == "start" or why == "head":
            self._state = FollowState.REPLAYING
            self._notice(NoticeKind.STARTED, self.path)
        elif why == "resume":
            self._notice(NoticeKind.RESUMED, str(off))
        elif why == "skip" and previous is not None:
            self._notice(NoticeKind.SKIPPED, _size(off - previous.offset))
        elif why in ("truncated", "rotated", "recreated", "created"):
            self._notice(NoticeKind(why))
        if self._state is FollowState.MISSING or self._state is FollowState.RECONNECTING:
            self._state = FollowState.LIVE if self._live else FollowState.REPLAYING
        sig = previous.sig if why == "resume" and previous is not None else b""
        self._position = FollowPosition(self.path, dev, ino, off, sig)

    def _data(self, header: dict[str, Any], payload: bytes) -> None:
        pos = self._position
        off = int(header.get("off", 0))
        if pos is None:
            pos = FollowPosition(self.path, 0, 0, off)
        elif off != pos.offset:
            self._notice(NoticeKind.GAP, f"expected byte {pos.offset}, got {off}")
        sig = (pos.sig + payload[-SIG_BYTES:])[-SIG_BYTES:]
        self._position = FollowPosition(pos.path, pos.dev, pos.ino, off + len(payload), sig)
        lines = self._assembler.feed_stripped(payload)
        end = max(payload.rfind(b"\n"), payload.rfind(b"\r"))
        self._partial = len(payload) - end - 1 if end >= 0 else self._partial + len(payload)
        if self._partial > self.max_line_bytes:
            # Bounded memory beats a whole line here: cut it, say so.
            lines += self._assembler.flush_stripped()
            self._partial = 0
            self._notice(NoticeKind.LINE_CUT, _size(self.max_line_bytes))
        self._lines(lines)

    def _lines(self, texts: list[str]) -> None:
        """Keep and queue lines, escapes already stripped (`LineAssembler.feed_stripped`)."""
        if not texts:
            return
        if not self._pending and not self._notices:
            self._first_pending = self._clock()
        self._seq += len(texts)
        self._pending.extend(texts)
        ring = self._ring
        ring.extend(texts)
        size = self._ring_bytes + sum(map(len, texts))
        while ring and (len(ring) > self.max_lines or size > self.max_bytes):
            size -= len(ring.popleft())
        self._ring_bytes = size

    def _notice(self, kind: NoticeKind, detail: str = "") -> None:
        if not self._pending and not self._notices:
            self._first_pending = self._clock()
        self._notices.append(FollowNotice(kind, detail))

    # -- one pass -----------------------------------------------------------------------
    async def read_once(self, timeout: float = 60.0) -> LogBatch:
        """The log as the follower would replay it (the current run, or the backlog), read in
        one command and returned whole: for one-shot uses like `status`."""
        result = await self.host.run(await self._command(once=True), timeout=timeout)
        decoder = FrameDecoder()
        for header, payload in decoder.feed(result.stdout):
            self._frame(header, payload)
        self._lines(self._assembler.flush_stripped())
        batch = LogBatch(tuple(self._pending), tuple(self._notices), False, self._position,
                         self._seq - len(self._pending))
        self._pending, self._notices = [], []
        if not result.ok and not batch.texts:
            why = result.error_text.strip() or f"exit {result.exit_status}"
            raise HostError(f"{self.host.name}: cannot read {self.path}: {why}")
        return batch


def _size(n: int) -> str:
    if n >= MIB:
        return f"{n / MIB:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"
