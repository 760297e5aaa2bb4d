"""Relaunching `vllm serve` and watching it come up, on the host.

The new server gets its own session (it outlives this step and the SSH link), the same argv,
environment and working directory as the one stopped, and its output appended to the same log
after a marker line. This step stays its parent until it is ready, so that an early exit is
seen with its exit status.
"""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from ..vocabulary import READY_LINE

READY = READY_LINE.encode()


def file_kind(path: str) -> str:
    """`file`, `missing`, or what else is there (`FIFO`, `socket`, `device`, `directory`):
    a relaunch must never open anything but a regular file for its output."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable path ({exc.strerror})"
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"),
                       (stat.S_ISBLK, "device"), (stat.S_ISDIR, "directory")):
        if test(mode):
            return name
    return "special file"


class NotAFile(OSError):
    """The log is no regular file (a FIFO whose reader is gone would block its writer)."""


def open_log(log: str) -> int:
    """An fd appending to `log`, which must be (or become) a regular file. Opened without
    blocking: a FIFO without a reader would otherwise hang the open for good."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile(f"{log} is a {file_kind(log)}, not a regular file")
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_marker(log: str, marker: str) -> tuple[int, int]:
    """Append `marker` as a line to `log`; returns (an fd open for appending, the marker's
    byte offset). Raises OSError (NotAFile for a FIFO, socket or device)."""
    fd = open_log(log)
    offset = os.fstat(fd).st_size
    # A log whose last line is unfinished (a killed writer) gets a newline first.
    if offset:
        with open(log, "rb") as fh:
            fh.seek(offset - 1)
            if fh.read(1) != b"\n":
                os.write(fd, b"\n")
                offset += 1
    os.write(fd, marker.encode("utf-8", "replace") + b"\n")
    return fd, offset


def launch(argv: list[str], cwd: str, env: dict[str, str], log_fd: int) -> subprocess.Popen:
    """Start argv in a new session with stdout and stderr on `log_fd`."""
    return subprocess.Popen(argv, cwd=cwd or None, env=env, stdin=subprocess.DEVNULL,
                            stdout=log_fd, stderr=subprocess.STDOUT, start_new_session=True,
                            close_fds=True)


def http_ok(url: str, timeout: float = 2.0, api_key: str = "") -> tuple[bool, str]:
    """(answered 200, what it said or why not); `api_key` is sent as vLLM's `--api-key`
    expects it."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        request = urllib.request.Request(url, headers=headers)  # noqa: S310
        with urllib.request.urlopen(request, timeout=timeout) as resp:  # noqa: S310
            return resp.status == 200, f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, str(reason)


class LogWatch:
    """Reads a log from an offset as it grows and says when the ready line has appeared."""

    def __init__(self, path: str, offset: int) -> None:
        self.path = path
        self.offset = offset
        self._tail = b""
        self.ready = False

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(4 * 1024 * 1024)
        except OSError:
            return
        if not data:
            return
        self.offset += len(data)
        window = self._tail + data
        if READY in window:
            self.ready = True
        self._tail = window[-len(READY):]


def wait_ready(proc: subprocess.Popen | None, alive: Callable[[], bool],
               watch: LogWatch | None, base_url: str, timeout: float,
               owner: Callable[[], str] = lambda: "", *, api_key: str = "",
               left: Callable[[], bool] = lambda: False) -> tuple[str, str, int | None]:
    """Follow start-up until the log says ready (when there is a log), /health and
    /v1/models answer (200 with `api_key`; a 401 is a keyed server that is up all the same:
    its routes exist only once the engine is), and the answer comes from the new server:
    `owner()` is "" when its tree holds the port, else says who does (a supervisor's own
    server answers as well). `left()` is true once the console that asked for the restart
    is gone (Ctrl+C): nobody waits for the answer, and the step must not hold the host's
    restart lock for the rest of a long start-up. Returns (outcome, message, exit status)
    where outcome is `ready`, `exited`, `left` or `timeout`."""
    deadline = time.monotonic() + timeout
    health = models = other = ""
    while True:
        why = f" ({other})" if other else ""
        if proc is not None:
            code = proc.poll()
            if code is not None:
                how = f"signal {-code}" if code < 0 else f"status {code}"
                return "exited", f"vllm serve exited with {how} before it was ready{why}", code
        elif not alive():
            return "exited", f"the new server process is gone before it was ready{why}", None
        if watch is not None:
            watch.poll()
        if watch is None or watch.ready:
            ok_health, health = http_ok(base_url + "/health")
            ok_models, models = (http_ok(base_url + "/v1/models", api_key=api_key)
                                 if ok_health else (False, "not asked"))
            keyed = ok_health and models == "HTTP 401"
            if ok_health and (ok_models or keyed):
                other = owner()
                if not other:
                    said = ("/health answers 200 and /v1/models answers 401: the server wants "
                            "its --api-key" if keyed else "/health and /v1/models answer 200")
                    return "ready", f"{said} on the host, from the new server", None
        if left():
            return "left", "the console was interrupted before the server was ready; it " \
                           "keeps starting on its own", None
        if time.monotonic() >= deadline:
            seen = "the log says ready, but " if watch is not None and watch.ready else ""
            extra = f"{seen}/health: {health or 'not asked'}, /v1/models: {models or 'not asked'}"
            extra += f"; {other}" if other else ""
            return "timeout", f"not ready after {timeout:g} s ({extra}); the process keeps " \
                              "running", None
        time.sleep(0.1)

