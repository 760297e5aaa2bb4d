"""Log probe: the current run of a serve log, read on the host (stdlib only, python3).

A serve log can be gigabytes and hold many runs. This never reads it line by line from the
start: it searches backwards in big chunks (`bytes.rfind`, C speed) for the last run mark (the
console's restart marker, the version banner, `non-default args:`, the engine start line), then
reads forward from a little before it (`lookback` bytes: the same run's earlier marks and
lines) — only as far as the end of start-up (a ready marker after the last mark) or the scan
cap — and brings back the lines that carry a keyword or a mark, bounded in number and length.
Which of those lines begins the current run is the caller's to decide (one rule with the
console's telemetry, `console.hostside.vocabulary.current_run_start`): this script only finds.

A log rotated away while the server runs still has a name in /proc: when `path` is gone and
`pid` is given, /proc/PID/fd/1 (or /2) is read instead, and said so.

Past the end of start-up, the log's last `tail_bytes` are searched for `tail_keywords` (an
engine that dies on its first request, the latest acceptance): the last `max_lines` such lines
come back as `tail`.

stdin: {"path", "pid": int|null, "start_markers": [...], "ready_markers": [...],
        "keywords": [...], "max_lines": int, "max_line": int, "scan_cap": int, "lookback": int,
        "tail_keywords": [...], "tail_bytes": int}
stdout: {"log": {state}, "last_mark": offset|null, "scan_start": offset, "lines": [[offset,
         text], ...], "dropped", "ready_at", "scanned", "capped", "tail_only", "tail"}
"""

from __future__ import annotations

import collections
import os
import stat
from typing import Any

from .. import containers
from ..wire import answer, read_params

CHUNK = 8 * 1024 * 1024


def _rotated_fd(path: str, pid: int | None) -> str | None:
    """/proc/PID/fd/N when the serve process still writes to `path` but the name is gone
    (rotated or deleted): the current run is in that file, not in whatever now has the name."""
    if not pid:
        return None
    for fd in (1, 2):
        link = f"/proc/{pid}/fd/{fd}"
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if target == path + " (deleted)":
            return link
    return None


def open_log(path: str, pid: int | None) -> tuple[Any, dict[str, Any]]:
    """An open binary file and a state record; (None, state) when it cannot be opened."""
    state: dict[str, Any] = {"path": path}
    candidate = path
    via = _rotated_fd(path, pid)
    if via is not None:
        candidate = via
        state.update({"via": via, "deleted": True})
    try:
        fh = open(candidate, "rb")  # noqa: SIM115 (handed to the caller, who closes it)
    except FileNotFoundError:
        state["state"] = "missing"
        return None, state
    except PermissionError:
        state["state"] = "denied"
        return None, state
    except IsADirectoryError:
        state["state"] = "is-a-directory"
        return None, state
    except OSError as exc:
        state.update({"state": "unreadable", "error": str(exc)})
        return None, state
    st = os.fstat(fh.fileno())
    if stat.S_ISDIR(st.st_mode):
        fh.close()
        state["state"] = "is-a-directory"
        return None, state
    state.update({"state": "ok", "size": st.st_size, "mtime": st.st_mtime,
                  "regular": stat.S_ISREG(st.st_mode)})
    return fh, state


def find_last(fh: Any, size: int, needles: list[bytes]) -> int | None:
    """Offset of the start of the line holding the last occurrence of any needle."""
    overlap = max((len(n) for n in needles), default=1)
    end = size
    while end > 0:
        start = max(0, end - CHUNK)
        fh.seek(start)
        data = fh.read(end - start + (overlap if end < size else 0))
        best = max((data.rfind(n) for n in needles), default=-1)
        if best >= 0:
            line_start = data.rfind(b"\n", 0, best)
            if line_start >= 0:
                return start + line_start + 1
            # The line began in an earlier chunk: find its start there.
            while start > 0:
                back = max(0, start - 65536)
                fh.seek(back)
                piece = fh.read(start - back)
                nl = piece.rfind(b"\n")
                if nl >= 0:
                    return back + nl + 1
                start = back
            return 0
        end = start
    return None


def line_start(fh: Any, offset: int) -> int:
    """The start of the line `offset` falls in (a few KB back at most, else `offset`)."""
    if offset <= 0:
        return 0
    back = max(0, offset - 65536)
    fh.seek(back)
    nl = fh.read(offset - back).rfind(b"\n")
    return back + nl + 1 if nl >= 0 else (0 if back == 0 else offset)


def scan(fh: Any, offset: int, size: int, params: dict[str, Any],
         ready_from: int = 0) -> dict[str, Any]:
    """Lines with a keyword from `offset` until a ready marker at or after `ready_from`, the
    cap, or the end. Of the lines before `ready_from`, only the last `max_lines` are kept."""
    keywords = [k.encode() for k in params.get("keywords", [])]
    starts = [k.encode() for k in params.get("start_markers", [])]
    ready = [k.encode() for k in params.get("ready_markers", [])]
    wanted = keywords + starts + ready
    max_lines = int(params.get("max_lines", 400))
    max_line = int(params.get("max_line", 65536))
    cap = int(params.get("scan_cap", 256 * 1024 * 1024))
    lines: list[list[Any]] = []
    before: collections.deque[list[Any]] = collections.deque(maxlen=max_lines)
    dropped = 0
    ready_at = None
    pos = offset
    carry = b""
    fh.seek(offset)
    limit = min(size, offset + cap)
    while pos < limit and ready_at is None:
        data = fh.read(min(CHUNK, limit - pos))
        if not data:
            break
        block_start = pos - len(carry)
        pos += len(data)
        block = carry + data
        cut = block.rfind(b"\n") + 1 if pos < limit else len(block)
        carry = block[cut:]
        block = block[:cut]
        hits = set()
        for needle in wanted:
            at = block.find(needle)
            while at >= 0:
                line_start = block.rfind(b"\n", 0, at) + 1
                hits.add(line_start)
                line_end = block.find(b"\n", at)
                at = block.find(needle, line_end) if line_end >= 0 else -1
        for line_start in sorted(hits):
            line_end = block.find(b"\n", line_start)
            raw = block[line_start:line_end if line_end >= 0 else len(block)]
            at = block_start + line_start
            text = raw[:max_line].decode("utf-8", "replace").rstrip("\r")
            if at < ready_from:
                before.append([at, text])  # the run's earlier lines, or the last run's end
                continue
            if any(r in raw for r in ready):
                ready_at = at
            if len(lines) < max_lines:
                lines.append([at, text])
            else:
                dropped += 1
            if ready_at is not None:
                break
    return {"lines": [*before, *lines], "dropped": dropped, "ready_at": ready_at,
            "scanned": pos - offset, "capped": pos >= offset + cap and pos < size}


def probe(params: dict[str, Any]) -> dict[str, Any]:
    """All the facts runtime-activation needs, from the log file or, for a server in a
    container (`container`: {"runtime", "ref", "since"}), from the container's output."""
    container = params.get("container")
    if isinstance(container, dict):
        return _container_probe(params, container)
    return _file_probe(params)


def _container_probe(params: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The current run of the container's output (`docker logs` since its start), put in a
    temporary file and read like a log file."""
    runtime, ref = str(container.get("runtime") or "docker"), str(container.get("ref") or "")
    since = container.get("since")
    label = f"{runtime} logs {ref}"
    path, why = containers.export_log(ref, since if isinstance(since, (int, float)) else None,
                                      runtime)
    if path is None:
        return {"log": {"path": label, "state": "unreadable", "error": why}}
    try:
        out = _file_probe({**params, "path": path, "pid": None})
    finally:
        os.unlink(path)
    out["log"]["path"] = label
    return out


def _file_probe(params: dict[str, Any]) -> dict[str, Any]:
    fh, state = open_log(params["path"], params.get("pid"))
    out: dict[str, Any] = {"log": state}
    if fh is None:
        return out
    with fh:
        size = state["size"]
        if not state.get("regular", True):
            out["log"]["state"] = "not-a-file"
            return out
        needles = [m.encode() for m in params.get("start_markers", [])]
        start = find_last(fh, size, needles)
        out["last_mark"] = start
        if start is None:
            # No run mark: bring back the tail, where a failed start-up would show.
            tail = int(params.get("tail_without_start", 4 * 1024 * 1024))
            out["scan_start"] = max(0, size - tail)
            out.update(scan(fh, out["scan_start"], size, params))
            out["tail_only"] = True
        else:
            out["scan_start"] = line_start(fh, max(0, start - int(params.get("lookback", 0))))
            out.update(scan(fh, out["scan_start"], size, params, ready_from=start))
        ready_at = out.get("ready_at")
        if params.get("tail_keywords") and ready_at is not None:
            begin = line_start(fh, max(ready_at, size - int(params.get("tail_bytes", 1 << 20))))
            found = scan(fh, begin, size, {**params, "keywords": params["tail_keywords"],
                                           "start_markers": [], "ready_markers": [],
                                           "max_lines": 1 << 30})
            out["tail"] = found["lines"][-int(params.get("max_lines", 400)):]
    return out


def main(argv: list[str]) -> int:
    """The `probe-log` entry point: parameters on stdin, the answer after the marker."""
    return answer(probe(read_params()))
