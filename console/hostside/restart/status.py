"""The restart step's progress file and lock on the host.

Progress is JSON lines appended to a status file the client follows (by byte offset, so a
client that lost its link resumes with no gap and no duplicate). The lock is an flock on a file
in the private per-user directory; its holder writes who it is into it, so that a second
restart can be told which one runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from typing import Any


class StatusFile:
    """Appends one JSON object per line: {"t", "step", "message", ...}; `final` on the last.

    While the step waits (for the tree to exit, for the server to start: minutes), a heartbeat
    line follows every `heartbeat_s` of silence, so the client can tell a step that died from
    one that waits without asking the host anything."""

    HEARTBEAT = "heartbeat"

    def __init__(self, path: str, heartbeat_s: float = 10.0) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._fh = os.fdopen(fd, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._closed = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, args=(heartbeat_s,), daemon=True)
        self._beat.start()

    def write(self, step: str, message: str, *, final: bool = False, **fields: Any) -> None:
        record: dict[str, Any] = {"t": round(time.time(), 3), "step": step, "message": message}
        record.update(fields)
        if final:
            record["final"] = True
        with self._lock:
            if self._closed.is_set():
                return
            self._fh.write(json.dumps(record, sort_keys=True) + "\n")
            self._fh.flush()
            self._last = time.monotonic()

    def _heartbeat(self, every: float) -> None:
        while not self._closed.wait(min(1.0, every)):
            if time.monotonic() - self._last >= every:
                try:
                    self.write(self.HEARTBEAT, "")
                except (OSError, ValueError):
                    return

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            self._fh.close()


def take_lock(path: str, holder: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """(fd, {}) when the lock is ours now; (None, holder) with the current holder's record
    (pid, start time, id, user) when another restart holds it. The fd must stay open for as
    long as the lock is to be held; the file is never removed (removing a flocked file races)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            raw = os.pread(fd, 64 * 1024, 0)
        finally:
            os.close(fd)
        try:
            other = json.loads(raw.decode("utf-8", "replace") or "{}")
        except ValueError:
            other = {}
        return None, other if isinstance(other, dict) else {}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder, sort_keys=True).encode(), 0)
    return fd, {}


def read_holder(path: str) -> dict[str, Any]:
    """The record the last lock holder wrote ({} when none). Whether it still runs is for the
    caller to see (pid + start time): querying the flock itself would race a real taker."""
    return read_json(path)


def write_private(path: str, data: dict[str, Any]) -> None:
    """Write JSON readable by this user only (temp + rename)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, sort_keys=True)
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
