"""What the fault and abuse tests share: an event recorder, a numbered log writer that proves
"no gap, no duplicate", and the measured figures (printed, and appended as JSON lines to
`$VC_FIGURES` when set, for docs/reliability.md)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vllm_console.console.telemetry import LogLinesReceived, TelemetryEvent

NUMBERED = re.compile(r"^line (\d{7}) ")


def record_figure(name: str, value: float, unit: str = "s") -> None:
    """One measured figure: printed (pytest -s shows it) and kept in $VC_FIGURES."""
    print(f"FIGURE {name} = {value:.3f} {unit}")
    path = os.environ.get("VC_FIGURES")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"name": name, "value": round(value, 3), "unit": unit}) + "\n")


@dataclass
class Recorder:
    """Every telemetry event with its arrival time; `until` waits for one."""

    events: list[tuple[float, TelemetryEvent]] = field(default_factory=list)
    _numbers: list[int] = field(default_factory=list)
    _scanned: int = 0

    def __call__(self, event: TelemetryEvent) -> None:
        self.events.append((time.monotonic(), event))

    def mark(self) -> int:
        return len(self.events)

    async def until(self, predicate: Callable[[TelemetryEvent], bool], timeout: float = 20,
                    after: int = 0, what: str = "") -> tuple[float, TelemetryEvent]:
        """The first event from index `after` on that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        i = after
        while True:
            while i < len(self.events):
                at, event = self.events[i]
                if predicate(event):
                    return at, event
                i += 1
            if time.monotonic() > deadline:
                kinds = sorted({type(e).__name__ for _, e in self.events[after:]})
                raise AssertionError(f"timed out after {timeout} s waiting for "
                                     f"{what or predicate}; seen since: {kinds}")
            await asyncio.sleep(0.02)

    def texts(self) -> list[str]:
        return [t for _, e in self.events if isinstance(e, LogLinesReceived)
                for t in e.batch.texts]

    def notices(self) -> list[str]:
        return [str(n.kind) for _, e in self.events if isinstance(e, LogLinesReceived)
                for n in e.batch.notices]

    def numbered(self) -> list[int]:
        """The numbers of the `NumberedWriter` lines received, in order. Incremental: tests
        poll it every few ms, and a rescan of every line would starve the event loop (and so
        slow down the very recovery being measured)."""
        events = self.events
        while self._scanned < len(events):
            event = events[self._scanned][1]
            self._scanned += 1
            if isinstance(event, LogLinesReceived):
                self._numbers.extend(int(m[1]) for t in event.batch.texts
                                     if (m := NUMBERED.match(t)))
        return self._numbers


class NumberedWriter:
    """Appends `line NNNNNNN ...` lines to a log, as a server would; `written` counts them.
    `run()` writes continuously (a batch every `every_s`) until `stop()`."""

    def __init__(self, path: Path, batch: int = 10, every_s: float = 0.02) -> None:
        self.path = path
        self.batch = batch
        self.every_s = every_s
        self.written = 0
        self._stop = asyncio.Event()

    def write(self, count: int, path: Path | None = None) -> None:
        with open(path or self.path, "ab") as fh:
            fh.write(b"".join(b"line %07d \xe2\x9c\x93 payload\n" % (self.written + i)
                              for i in range(count)))
        self.written += count

    async def run(self) -> None:
        while not self._stop.is_set():
            self.write(self.batch)
            await asyncio.sleep(self.every_s)

    def stop(self) -> None:
        self._stop.set()


def assert_exactly_once(seen: list[int], written: int) -> None:
    """Every line 0..written-1 arrived once, in order (no gap, no duplicate)."""
    if seen == list(range(written)):
        return
    dups = len(seen) - len(set(seen))
    missing = sorted(set(range(written)) - set(seen))
    raise AssertionError(f"{len(seen)} lines for {written} written: {dups} duplicate(s), "
                         f"{len(missing)} missing (first {missing[:5]}), "
                         f"in order: {seen == sorted(seen)}")


def pids_with_env(needle: str, user: str | None = None) -> list[int]:
    """Processes (of `user`) whose environment holds `needle`: the console's helpers carry
    their arguments in VLLM_CONSOLE_ARGS, so a unique path or match finds exactly ours.
    Needs root (or the same user) to read /proc/PID/environ."""
    import pwd

    uid = pwd.getpwnam(user).pw_uid if user else None
    found = []
    raw = needle.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if uid is not None and entry.stat().st_uid != uid:
                continue
            if raw in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def helpers_on_host(root: Path, user: str) -> list[int]:
    """The console's helpers of this simulated host (agent, follower, their nvidia-smi loops)
    running as `user`: they carry their arguments, the tree's paths among them, in
    VLLM_CONSOLE_ARGS (their command lines are only `PYTHON BUNDLE ENTRY`)."""
    return sorted(set(pids_with_env("VLLM_CONSOLE_ARGS=", user))
                  & set(pids_with_env(str(root), user)))


def sigint_as_in_a_terminal() -> None:
    """A child's `preexec_fn`: SIGINT at its default, as in a terminal, whatever this process
    inherited (a shell's background job, as CI may run the suite, has SIGINT ignored, and an
    ignored signal stays ignored across exec: Ctrl+C would never reach the console)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ctrl_c_once_launched(words: list[str], env: dict[str, str]) -> tuple[int, str]:
    """`vllm-console restart ...` (words: the whole command line) interrupted as Ctrl+C in its
    terminal would, once it says the new server was launched: (exit status, stderr)."""
    import signal
    import subprocess

    proc = subprocess.Popen(words, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=sigint_as_in_a_terminal)
    assert proc.stdout is not None
    for line in proc.stdout:
        if " launched " in line:
            break
    else:
        raise AssertionError(f"never launched: {proc.communicate()}")
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    return proc.returncode, err
