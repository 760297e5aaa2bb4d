"""Log probe: the current run of a serve log, read on the host (stdlib only, python3).

A serve log can be gigabytes and hold many runs. This never reads it line by line from the
start: it searches backwards in big chunks (`bytes.rfind`, C speed) for the last start marker
(`Initializing a V1 LLM engine` = the current run), then reads forward from there — only as far
as the end of start-up (the ready marker) or the scan cap — and brings back the lines that
carry a keyword, bounded in number and length.

A log rotated away while the server runs still has a name in /proc: when `path` is gone and
`pid` is given, /proc/PID/fd/1 (or /2) is read instead, and said so.

stdin: {"path", "pid": int|null, "start_markers": [...], "ready_markers": [...],
        "keywords": [...], "max_lines": int, "max_line": int, "scan_cap": int}
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any

CHUNK = 8 * 1024 * 1024
MARKER = "@@vllm-console-json@@"


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


def scan(fh: Any, offset: int, size: int, params: dict[str, Any]) -> dict[str, Any]:
    """Lines with a keyword from `offset` until a ready marker, the cap, or the end."""
    keywords = [k.encode() for k in params.get("keywords", [])]
    starts = [k.encode() for k in params.get("start_markers", [])]
    ready = [k.encode() for k in params.get("ready_markers", [])]
    wanted = keywords + starts + ready
    max_lines = int(params.get("max_lines", 400))
    max_line = int(params.get("max_line", 65536))
    cap = int(params.get("scan_cap", 256 * 1024 * 1024))
    lines: list[list[Any]] = []
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
            if any(r in raw for r in ready):
                ready_at = block_start + line_start
            if len(lines) < max_lines:
                text = raw[:max_line].decode("utf-8", "replace").rstrip("\r")
                lines.append([block_start + line_start, text])
            else:
                dropped += 1
            if ready_at is not None:
                break
    return {"lines": lines, "dropped": dropped, "ready_at": ready_at,
            "scanned": pos - offset, "capped": pos >= offset + cap and pos < size}


def probe(params: dict[str, Any]) -> dict[str, Any]:
    """All the facts runtime-activation needs."""
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
        out["run_start"] = start
        if start is None:
            # No start marker: bring back the tail, where a failed start-up would show.
            tail = int(params.get("tail_without_start", 4 * 1024 * 1024))
            out.update(scan(fh, max(0, size - tail), size, params))
            out["tail_only"] = True
        else:
            out.update(scan(fh, start, size, params))
    return out


def main() -> None:
    params = json.load(sys.stdin)
    sys.stdout.write(MARKER + "\n" + json.dumps(probe(params)) + "\n")


if __name__ == "__main__":
    main()
