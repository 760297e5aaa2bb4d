"""vllm-console log follower: streams a log file from a byte offset, framed, to stdout.

The `follow` entry point: runs on the serving host as a long-lived stream over the SSH link.
Output is a sequence of frames; each starts with one line of JSON:

    {"t": "open", "dev": D, "ino": I, "off": O, "size": S, "why": WHY}   position is now (I, O)
    {"t": "data", "off": O, "n": N}  followed by exactly N raw bytes of the file from offset O
    {"t": "eof", "off": O}          caught up with the end of the file
    {"t": "missing", "why": TEXT}   the path is not there (or not readable): waiting for it

WHY is `start`, `resume`, `truncated` (shrank or was rewritten: reading restarts at 0),
`rotated` / `recreated` (a new file under the name: its start), `created` (it appeared), `skip`
(the backlog was cut: bytes between the previous position and O are not sent), `head` (the start
of the current run, sent before a `skip`).

Resuming: `--ino I --offset O --sig HEX` (HEX: the last bytes the client got before O). Same inode,
size >= O and the bytes before O unchanged: it carries on at O. Otherwise the file was truncated
or rotated; a rotated file still in the same directory is found by its inode and its remainder
sent first, so a rotation while the link was down leaves no gap.

Reads are chunked (`os.pread`, 256 KiB), never line by line; the file is polled (fstat + stat,
`--poll` seconds after a poll that found data, each empty poll waiting twice as long as the one
before, up to `--idle-poll`), so a quiet log costs next to nothing. Following is by name
(like `tail -F`): a deleted file is read to its end, then the new one from its start.

It stops on SIGTERM/SIGINT/SIGHUP, when stdout goes away, when its parent goes away, and at EOF
of stdin when stdin is a pipe or socket (the SSH channel closed; see `lifeline`).
"""

import argparse
import json
import os
import signal
import time

from .lifeline import on_stdin_eof
from .vocabulary import RUN_MARKERS, last_run_start, run_mark

CHUNK = 256 * 1024
SIG_BYTES = 64
_NEEDLES = tuple(m.encode() for m in RUN_MARKERS)
SCAN_BLOCK = 1024 * 1024
LINE_AROUND = 64 * 1024

_stopping: list = []


def _stop(*_):
    _stopping.append(True)


class Output:
    """Frames to stdout; a broken pipe ends the follower."""

    def __init__(self, fd=1):
        self.fd = fd

    def frame(self, header, data=b""):
        head = (json.dumps(header, separators=(",", ":")) + "\n").encode()
        parts = [head, data] if data else [head]
        try:
            while parts:
                written = os.writev(self.fd, parts)
                while parts and written >= len(parts[0]):
                    written -= len(parts[0])
                    parts.pop(0)
                if parts and written:
                    parts[0] = parts[0][written:]
        except OSError:
            _stop()


def _line_start(fd, pos):
    """The offset where the line holding byte `pos` starts."""
    lo = pos
    while lo > 0:
        take = min(4096, lo)
        block = os.pread(fd, take, lo - take)
        idx = block.rfind(b"\n")
        if idx >= 0:
            return lo - take + idx + 1
        lo -= take
    return 0


def _next_line_start(fd, pos, size):
    """The first line start at or after `pos` (size when none is near)."""
    if pos <= 0:
        return 0
    if os.pread(fd, 1, pos - 1) == b"\n":
        return pos
    limit = min(size, pos + 1024 * 1024)
    at = pos
    while at < limit:
        block = os.pread(fd, min(65536, limit - at), at)
        if not block:
            break
        idx = block.find(b"\n")
        if idx >= 0:
            return at + idx + 1
        at += len(block)
    return limit


def _line_around(fd, start, pos):
    """The line that starts at `start` and holds byte `pos` (at most `LINE_AROUND` bytes
    either side of `pos`: a line that long whole). Its end is looked for in a few KB first."""
    lo = max(start, pos - LINE_AROUND)
    data = os.pread(fd, pos + 4096 - lo, lo)
    end = data.find(b"\n", pos - lo)
    if end < 0 and len(data) == pos + 4096 - lo:
        data += os.pread(fd, LINE_AROUND - 4096, pos + 4096)
        end = data.find(b"\n", pos - lo)
    return data[:end] if end >= 0 else data


def _marks_backwards(fd, size, floor):
    """(line start, mark) of each line in [floor, size) that is a run mark (`run_mark`, asked
    only of the lines holding one of `RUN_MARKERS`, found with `bytes.find`), from the last
    back."""
    overlap = max(len(m) for m in _NEEDLES) - 1
    hi = size
    last_start = None
    while hi > floor:
        lo = max(floor, hi - SCAN_BLOCK)
        block = os.pread(fd, hi - lo + overlap, lo)
        found = set()
        for needle in _NEEDLES:
            at = block.find(needle)
            while 0 <= at < hi - lo:
                found.add(lo + at)
                at = block.find(needle, at + 1)
        for pos in sorted(found, reverse=True):
            start = _line_start(fd, pos)
            if start == last_start:
                continue
            mark = run_mark(_line_around(fd, start, pos).decode("utf-8", "replace"))
            if mark is not None:
                last_start = start
                yield start, mark
        hi = lo


def find_run_start(fd, size, scan_limit):
    """Where the current run of `vllm serve` starts in the log: the line the vocabulary's rule
    (`last_run_start`, the same as the console's telemetry reads forwards) says begins the
    last run. Scans backwards at most `scan_limit` bytes; None when no mark is found."""
    return last_run_start(_marks_backwards(fd, size, max(0, size - scan_limit)))


class Follower:
    def __init__(self, path, out, poll, once, idle_poll=None):
        self.path = path
        self.out = out
        self.poll = poll
        self.idle_poll = max(poll, idle_poll if idle_poll is not None else poll)
        self.once = once
        self.fd = None
        self.dev = self.ino = None
        self.off = 0
        self.sig = b""
        self.idle = True
        self.sent_since_eof = False
        self.missing_why = None

    # -- opening ------------------------------------------------------------------------
    def _open(self, path):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            self._missing(exc.strerror or str(exc))
            return None
        st = os.fstat(fd)
        if not _regular(st):
            os.close(fd)
            self._missing("not a regular file")
            return None
        self.missing_why = None
        return fd, st

    def _missing(self, why):
        if why != self.missing_why:
            self.missing_why = why
            self.out.frame({"t": "missing", "why": why})

    def _adopt(self, fd, st, off, why):
        if self.fd is not None and self.fd != fd:
            os.close(self.fd)
        self.fd, self.dev, self.ino, self.off = fd, st.st_dev, st.st_ino, off
        self.sig = os.pread(fd, min(SIG_BYTES, off), off - min(SIG_BYTES, off)) if off else b""
        self.idle = False
        self.sent_since_eof = True  # the first catch-up after any (re)open is announced
        self.out.frame({"t": "open", "dev": st.st_dev, "ino": st.st_ino, "off": off,
                        "size": st.st_size, "why": why})

    def start(self, mode, backlog, head, scan_limit, ino, offset, sig):
        opened = self._open(self.path)
        while opened is None and not _stopping and not self.once:
            time.sleep(max(self.poll, 0.25))
            opened = self._open(self.path)
            if opened is not None:
                self._adopt(opened[0], opened[1], 0, "created")
                return
        if opened is None:
            return
        fd, st = opened
        size = st.st_size
        if ino is not None:
            self._resume(fd, st, ino, offset, sig)
        elif mode == "begin":
            self._adopt(fd, st, 0, "start")
        elif mode == "offset":
            self._adopt(fd, st, min(offset, size), "start")
        else:
            start = None
            if mode == "run":
                start = find_run_start(fd, size, scan_limit)
            if start is None or size - start <= backlog:
                off = start if start is not None else _next_line_start(fd, size - backlog, size)
                self._adopt(fd, st, max(0, off), "start")
                return
            # The run is longer than the backlog: its head, then its tail.
            head_end = _next_line_start(fd, start + head, size)
            tail = _next_line_start(fd, size - backlog, size)
            self._adopt(fd, st, start, "head")
            self._pump(limit=head_end)
            self.off = tail
            self.sig = os.pread(fd, min(SIG_BYTES, tail), tail - min(SIG_BYTES, tail))
            self.out.frame({"t": "open", "dev": st.st_dev, "ino": st.st_ino, "off": tail,
                            "size": size, "why": "skip"})

    def _resume(self, fd, st, ino, offset, sig):
        if st.st_ino == ino:
            if st.st_size >= offset and _same(fd, offset, sig):
                self._adopt(fd, st, offset, "resume")
            else:
                self._adopt(fd, st, 0, "truncated")
            return
        # Rotated while we were away: send the rest of the old file if it is still around.
        old = _find_inode(os.path.dirname(self.path) or ".", st.st_dev, ino)
        if old is not None:
            opened = self._open(old)
            if opened is not None and opened[1].st_size >= offset and _same(opened[0], offset,
                                                                             sig):
                self._adopt(opened[0], opened[1], offset, "resume")
                self._pump(limit=None)
            elif opened is not None:
                os.close(opened[0])
        self._adopt(fd, st, 0, "rotated")

    # -- reading ------------------------------------------------------------------------
    def _pump(self, limit):
        """Send what is there now, up to `limit` (the end of the file when None)."""
        while not _stopping:
            want = CHUNK if limit is None else min(CHUNK, limit - self.off)
            if want <= 0:
                return
            data = os.pread(self.fd, want, self.off)
            if not data:
                return
            self.out.frame({"t": "data", "off": self.off, "n": len(data)}, data)
            self.off += len(data)
            self.sig = (self.sig + data[-SIG_BYTES:])[-SIG_BYTES:]
            self.sent_since_eof = True

    def step(self):
        """One poll: read what is new, notice truncation and a new file under the name.
        Returns True when it caught up with the end of the file."""
        st = os.fstat(self.fd)
        if st.st_size < self.off or (self.idle and st.st_size > self.off
                                     and not _same(self.fd, self.off, self.sig)):
            self._adopt(self.fd, st, 0, "truncated")
        if st.st_size > self.off:
            self.idle = False
            self._pump(limit=None)
            return False
        if self.sent_since_eof:
            self.sent_since_eof = False
            self.out.frame({"t": "eof", "off": self.off})
        self.idle = True
        try:
            named = os.stat(self.path)
        except OSError as exc:
            self._missing(exc.strerror or str(exc))
            return True
        if not _regular(named):
            self._missing("not a regular file")
        elif (named.st_ino, named.st_dev) != (self.ino, self.dev):
            was_missing = self.missing_why is not None
            opened = self._open(self.path)
            if opened is not None:
                self._adopt(opened[0], opened[1], 0, "recreated" if was_missing else "rotated")
                return False
        else:
            self.missing_why = None
        return True

    def run(self):
        parent = os.getppid()
        wait = self.poll
        while not _stopping and self.fd is not None:
            caught_up = self.step()
            if not caught_up:
                wait = self.poll
                continue
            if self.once or os.getppid() != parent:
                return
            # Quick polls while the log is busy; each empty poll waits twice as long, up to
            # `idle_poll` (the first line after a quiet spell waits at most that). An idle
            # server's log gets a line a second, one per request: polls that stayed quick for
            # 2 s after each line kept it at 100 polls a second.
            time.sleep(wait)
            wait = min(self.idle_poll, wait * 2)


def _regular(st):
    import stat as stat_mod

    return stat_mod.S_ISREG(st.st_mode)


def _same(fd, offset, sig):
    """True when the bytes just before `offset` are still `sig` (the file was not rewritten)."""
    if not sig:
        return True
    if offset < len(sig):
        return False
    return os.pread(fd, len(sig), offset - len(sig)) == sig


def _find_inode(directory, dev, ino):
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    if entry.inode() == ino and entry.stat(follow_symlinks=False).st_dev == dev:
                        return entry.path
                except OSError:
                    continue
    except OSError:
        return None
    return None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="vllm-console log follower (stdlib only)")
    p.add_argument("path")
    p.add_argument("--start", default="end", choices=("end", "begin", "offset", "run"))
    p.add_argument("--backlog", type=int, default=16 * 1024 * 1024,
                   help="end/run: at most this many bytes before the end")
    p.add_argument("--head", type=int, default=2 * 1024 * 1024,
                   help="run: bytes of the run's start sent when the run exceeds the backlog")
    p.add_argument("--scan-limit", type=int, default=256 * 1024 * 1024,
                   help="run: how far back to look for the run's start")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--ino", type=int, default=None, help="resume: the inode followed before")
    p.add_argument("--sig", default="", help="resume: hex of the bytes just before --offset")
    p.add_argument("--poll", type=float, default=0.01,
                   help="seconds between polls while the log is busy")
    p.add_argument("--idle-poll", type=float, default=0.1,
                   help="the longest wait between polls of a quiet log (empty polls wait "
                        "twice as long each time, from --poll up to this)")
    p.add_argument("--once", action="store_true", help="exit once caught up with the end")
    return p.parse_args(argv)


def main(argv=None):
    """The `follow` entry point."""
    args = parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    if not args.once:  # a one-shot read ends on its own; its stdin is at EOF from the start
        on_stdin_eof(_stop)  # the SSH channel closed: nobody reads what follows
    follower = Follower(args.path, Output(), max(0.005, args.poll), args.once,
                        idle_poll=args.idle_poll)
    try:
        sig = bytes.fromhex(args.sig)
    except ValueError:
        sig = b""
    follower.start(args.start, max(0, args.backlog), max(0, args.head), args.scan_limit,
                   args.ino, args.offset, sig)
    follower.run()
    return 0
