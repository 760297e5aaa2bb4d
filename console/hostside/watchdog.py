"""vLLM's watchdog dumps (0.33+): the files its `[Watchdog]Dumped stack to PATH` lines name, and
their text. Used by `stacks` on the host, and as the `watchdog-dumps` entry inside a server's
container, where those paths are (its dump dir is the container's, not the host's).

stdin of `watchdog-dumps`: {"paths": [dump paths], "log": a log file naming more of them,
"since": the server's start (epoch seconds), "dump_bytes": N}; answers {"watchdog": [...]}.
"""

from __future__ import annotations

import os
from typing import Any

from .wire import answer, read_params

DUMP_BYTES = 256 * 1024
WATCHDOG_MARK = b"[Watchdog]Dumped stack to "
LOG_TAIL = 8 * 1024 * 1024


def paths_in(data: bytes) -> list[str]:
    """The dump files named by `[Watchdog]Dumped stack to PATH` lines in `data`, in order,
    once each."""
    found: list[str] = []
    at = data.find(WATCHDOG_MARK)
    while at >= 0:
        end = data.find(b"\n", at)
        line = data[at + len(WATCHDOG_MARK):end if end >= 0 else len(data)]
        path = line.decode("utf-8", "replace").strip().rstrip(".")
        if path and path not in found:
            found.append(path)
        at = data.find(WATCHDOG_MARK, at + 1)
    return found


def watchdog_paths(log: str, since: float | None, tail: int = LOG_TAIL) -> list[str]:
    """The dump files vLLM's watchdog (0.33+) named in the log's last `tail` bytes
    (`[Watchdog]Dumped stack to PATH`), in order, once each; with `since` (the server's start,
    epoch seconds), only those written since: an earlier run's dumps are not this run's."""
    try:
        with open(log, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - tail))
            data = fh.read(tail)
    except OSError:
        return []
    return since_start(paths_in(data), since)


def since_start(paths: list[str], since: float | None) -> list[str]:
    """With `since` (the server's start, epoch seconds), only the dumps written since: an
    earlier run's dumps are not this run's."""
    if not since:
        return paths
    return [p for p in paths if _mtime(p) is None or (_mtime(p) or 0) >= since - 1]


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def read_dumps(paths: list[str], limit: int) -> list[dict[str, Any]]:
    """Each watchdog dump file: its text (its end, when long) and when it was written."""
    out = []
    for path in paths:
        item: dict[str, Any] = {"path": path}
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                item["mtime"] = os.fstat(fh.fileno()).st_mtime
                fh.seek(max(0, size - limit))
                item["text"] = fh.read(limit).decode("utf-8", "replace")
        except OSError as exc:
            item["error"] = f"{type(exc).__name__}: {exc.strerror or exc}"
        out.append(item)
    return out




def main(argv: list[str]) -> int:
    params = read_params()
    paths = [str(p) for p in params.get("paths") or []]
    since = params.get("since")
    paths = since_start(paths, float(since) if since else None)
    return answer({"watchdog": read_dumps(paths, int(params.get("dump_bytes") or DUMP_BYTES))})
