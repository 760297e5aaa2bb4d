"""vllm-console container log follower: a container's output (`docker logs`), its current run,
replayed then followed live, in the log follower's frames (`follow`), so that the console reads
it as it reads a file.

    BUNDLE follow-container --runtime docker --ref NAME --since EPOCH
                            [--after STAMP --skip K --offset O] [--head B --backlog B]

The frames are `follow`'s, the offsets counting the bytes of the unstamped output sent since
the run's start (there is no file): `open` (`why`: `start`, `head`, `skip`, `resume`), `data`
(with `stamp` and `same`: the stamp of its last line and how many lines sent so far carry it,
which is where a resume starts again), `eof` (the replay is done: live from here) and
`missing` (the container is not running: it waits for it to run again).

1. The replay: `docker logs --timestamps --since START` into a file, stdout and stderr put back
   in one order by their stamps (`containers.export_log`); whole when at most `head + backlog`
   bytes, else its first `head` bytes (the start-up: the engine's config) and its last
   `backlog`, like `follow`.
2. Live: `docker logs --follow --timestamps --since STAMP` (the last stamp sent), the lines up to
   the ones already sent skipped, both streams read as their lines come.
3. The command ends when the container stops: `missing`, then every 2 s a look (`docker
   inspect`): running again in the same start, live again; started anew, the follower ends
   (exit 0): the console follows the new run from its start.

Stops like `follow`: on SIGTERM/SIGINT/SIGHUP, when stdout goes away, at EOF of stdin.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import time

from .containers import RUNTIME, RUNTIMES, _cli, _sort_key, export_log
from .follow import Output, _stop, _stopping
from .lifeline import on_stdin_eof

CHUNK = 256 * 1024
WAIT_S = 2.0


def _split(line: bytes) -> tuple[bytes, bytes]:
    """(stamp, text) of a `--timestamps` line; (b"", line) for a line without one."""
    stamp, sep, rest = line.partition(b" ")
    if sep and stamp[:1].isdigit() and stamp.endswith(b"Z"):
        return stamp, rest
    return b"", line


class Lines:
    """Unstamped lines out as `data` frames; the stamp and count of the last one kept."""

    def __init__(self, out: Output, offset: int) -> None:
        self.out = out
        self.offset = offset
        self.stamp = b""
        self.same = 0

    def send(self, lines: list[bytes]) -> None:
        if not lines:
            return
        body = []
        for line in lines:
            stamp, rest = _split(line)
            stamp = stamp or self.stamp
            if stamp == self.stamp:
                self.same += 1
            else:
                self.stamp, self.same = stamp, 1
            body.append(rest)
        data = b"".join(body)
        self.out.frame({"t": "data", "off": self.offset, "n": len(data),
                        "stamp": self.stamp.decode("ascii", "replace"), "same": self.same},
                       data)
        self.offset += len(data)


def replay(out: Output, runtime: str, ref: str, since: float, head: int, backlog: int
           ) -> Lines | None:
    """The run so far; the `Lines` to go on from (None: `missing` sent)."""
    path, why = export_log(ref, since, runtime, keep_stamps=True)
    if path is None:
        out.frame({"t": "missing", "why": why})
        return None
    try:
        with open(path, "rb") as fh:
            stamped = fh.read().splitlines(keepends=True)
    finally:
        os.unlink(path)
    size = sum(len(_split(line)[1]) for line in stamped)
    lines = Lines(out, 0)
    if size <= head + backlog:
        out.frame({"t": "open", "dev": 0, "ino": 0, "off": 0, "size": size, "why": "start"})
        lines.send(stamped)
        return lines
    out.frame({"t": "open", "dev": 0, "ino": 0, "off": 0, "size": size, "why": "head"})
    taken, first = 0, []
    for line in stamped:
        taken += len(_split(line)[1])
        first.append(line)
        if taken >= head:
            break
    lines.send(first)
    tail, kept = [], 0
    for line in reversed(stamped[len(first):]):
        kept += len(_split(line)[1])
        if kept > backlog:
            break
        tail.append(line)
    tail.reverse()
    lines.offset = size - sum(len(_split(line)[1]) for line in tail)
    out.frame({"t": "open", "dev": 0, "ino": 0, "off": lines.offset, "size": size,
               "why": "skip"})
    lines.send(tail)
    return lines


def live(lines: Lines, runtime: str, ref: str, since: float, skip: int) -> None:
    """Follow until the container's output ends (it stopped) or the follower is told to stop:
    from the last stamp sent (else the run's start), what was sent skipped."""
    argv = [runtime, "logs", "--follow", "--timestamps", "--since",
            lines.stamp.decode("ascii", "replace") if lines.stamp else f"{since:.6f}"]
    proc = subprocess.Popen([*argv, ref], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stderr is not None
    pending = {proc.stdout.fileno(): b"", proc.stderr.fileno(): b""}
    last = lines.stamp
    try:
        while pending and not _stopping:
            ready, _, _ = select.select(list(pending), [], [], 0.5)
            for fd in ready:
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    del pending[fd]
                    continue
                data = pending[fd] + chunk
                cut = data.rfind(b"\n") + 1
                pending[fd] = data[cut:]
                fresh = []
                for line in data[:cut].splitlines(keepends=True):
                    # Lines the replay (or the last follower) sent: up to the last stamp,
                    # and `skip` lines of that stamp itself.
                    if last and _sort_key(line) < _sort_key(last + b" "):
                        continue
                    if last and line.startswith(last + b" ") and skip > 0:
                        skip -= 1
                        continue
                    fresh.append(line)
                lines.send(fresh)
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def _state(runtime: str, ref: str) -> tuple[bool, str]:
    code, out, _err = _cli(runtime, "inspect", "-f", "{{.State.Running}} {{.State.StartedAt}}",
                           ref)
    running, _, started = out.strip().partition(" ")
    return code == 0 and running == "true", started


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="follow-container")
    p.add_argument("--runtime", default=RUNTIME, choices=RUNTIMES)
    p.add_argument("--ref", required=True)
    p.add_argument("--since", type=float, required=True)
    p.add_argument("--after", default="")
    p.add_argument("--skip", type=int, default=0)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--head", type=int, default=2 * 1024 * 1024)
    p.add_argument("--backlog", type=int, default=16 * 1024 * 1024)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    on_stdin_eof(_stop)
    out = Output()
    _running, started = _state(args.runtime, args.ref)
    if args.after:
        lines: Lines | None = Lines(out, args.offset)
        assert lines is not None
        lines.stamp, lines.same = args.after.encode(), args.skip
        out.frame({"t": "open", "dev": 0, "ino": 0, "off": args.offset, "size": args.offset,
                   "why": "resume"})
        skip = args.skip
    else:
        lines = replay(out, args.runtime, args.ref, args.since, args.head, args.backlog)
        skip = lines.same if lines is not None else 0
    if lines is None:
        return 0
    out.frame({"t": "eof", "off": lines.offset})
    while not _stopping:
        live(lines, args.runtime, args.ref, args.since, skip)
        if _stopping:
            break
        skip = lines.same
        out.frame({"t": "missing", "why": f"the container {args.ref} is not running "
                                          f"({args.runtime} inspect)"})
        while not _stopping:
            time.sleep(WAIT_S)
            running, now = _state(args.runtime, args.ref)
            if running and now != started:
                return 0  # a new run: the console follows it from its start
            if running:
                out.frame({"t": "open", "dev": 0, "ino": 0, "off": lines.offset,
                           "size": lines.offset, "why": "resume"})
                break
    return 0
