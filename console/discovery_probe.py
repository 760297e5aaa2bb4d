"""Serve-process discovery, run on the host with `python3` (stdlib only, Python 3.8+).

One pass over /proc: every process of the login user whose command line matches the `match`
words (each word a substring of a distinct argv element, in order), keeping the top-most ones
(whose parent does not match — forked children share the parent's command line). For those:
ppid, start time, uid, argv, cwd, exe, the interpreter that runs it, environment, where fd 1/2
point, and the whole process tree below (EngineCore children rename themselves, so they are
found by parentage, with their `comm`). Other users' processes are never reported.

stdin: {"match": ["vllm", "serve"]}; stdout: a marker line, then one JSON object.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import sys
from typing import Any

MARKER = "@@vllm-console-json@@"


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def parse_stat(raw: bytes) -> tuple[str, int, int] | None:
    """(comm, ppid, starttime in clock ticks) from /proc/PID/stat."""
    text = raw.decode("utf-8", "replace")
    open_at, close_at = text.find("("), text.rfind(")")
    if open_at < 0 or close_at < 0:
        return None
    fields = text[close_at + 2:].split()
    try:
        return text[open_at + 1:close_at], int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def matches(argv: list[str], words: list[str]) -> bool:
    """Each word is a substring of a distinct argv element, in order."""
    at = 0
    for word in words:
        while at < len(argv) and word not in argv[at]:
            at += 1
        if at >= len(argv):
            return False
        at += 1
    return True


def _which(name: str, env: dict[str, str], cwd: str | None) -> str | None:
    if "/" in name:
        path = name if os.path.isabs(name) else os.path.join(cwd or "/", name)
        return os.path.normpath(path) if os.access(path, os.X_OK) else None
    for folder in (env.get("PATH") or "/usr/local/bin:/usr/bin:/bin").split(":"):
        if not folder:
            continue
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _shebang(path: str) -> list[str]:
    head = _read(path)
    if not head or not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def interpreter(argv: list[str], env: dict[str, str], cwd: str | None,
                exe: str | None) -> tuple[str | None, str]:
    """The Python that runs the process, as named (a venv's bin/python, not the file it
    links to: /proc/PID/exe resolves links and would lose the venv)."""
    if argv:
        first = os.path.basename(argv[0])
        if first.startswith("python"):
            found = _which(argv[0], env, cwd)
            if found:
                return found, "argv[0]"
        script = _which(argv[0], env, cwd)
        if script:
            words = _shebang(script)
            if words and os.path.basename(words[0]) == "env" and len(words) > 1:
                words = [w for w in words[1:] if not w.startswith("-")]
                found = _which(words[0], env, cwd) if words else None
            else:
                found = words[0] if words else None
            if found and os.path.basename(found).startswith("python"):
                return found, f"shebang of {script}"
    return exe, "/proc/PID/exe"


def _fd_target(pid: int, fd: int) -> dict[str, Any] | None:
    link = f"/proc/{pid}/fd/{fd}"
    target = _readlink(link)
    if target is None:
        return None
    out: dict[str, Any] = {"target": target}
    try:
        out["regular"] = stat.S_ISREG(os.stat(link).st_mode)
    except OSError:
        out["regular"] = False
    out["deleted"] = target.endswith(" (deleted)")
    return out


def _boot_time() -> float:
    raw = _read("/proc/stat") or b""
    for line in raw.splitlines():
        if line.startswith(b"btime "):
            return float(line.split()[1])
    return 0.0


def probe(params: dict[str, Any]) -> dict[str, Any]:
    """The matching serve processes of this user, top-most first by start time."""
    words = [w for w in params.get("match", []) if w]
    uid = os.getuid()
    me = {os.getpid(), os.getppid()}
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    btime = _boot_time()
    procs: dict[int, tuple[str, int, int]] = {}
    owned: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        raw = _read(f"/proc/{pid}/stat")
        parsed = parse_stat(raw) if raw else None
        if parsed is None:
            continue
        procs[pid] = parsed
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                owned.add(pid)
        except OSError:
            pass
    argvs: dict[int, list[str]] = {}
    matched: set[int] = set()
    for pid in owned - me:
        raw = _read(f"/proc/{pid}/cmdline")
        if not raw:
            continue
        argv = [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]
        argvs[pid] = argv
        if words and matches(argv, words):
            matched.add(pid)
    top = [pid for pid in matched if procs[pid][1] not in matched]
    top.sort(key=lambda p: procs[p][2])
    children: dict[int, list[int]] = {}
    for pid, (_comm, ppid, _start) in procs.items():
        children.setdefault(ppid, []).append(pid)

    def tree(root: int) -> list[dict[str, Any]]:
        out, stack = [], list(children.get(root, []))
        while stack:
            pid = stack.pop(0)
            comm, ppid, _start = procs[pid]
            raw = _read(f"/proc/{pid}/cmdline") or b""
            cmd = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")[:300]
            out.append({"pid": pid, "ppid": ppid, "comm": comm, "cmdline": cmd})
            stack.extend(children.get(pid, []))
        return out

    serves = []
    for pid in top:
        comm, ppid, start = procs[pid]
        argv = argvs[pid]
        env_raw = _read(f"/proc/{pid}/environ") or b""
        env = {}
        for item in env_raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep:
                env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        cwd = _readlink(f"/proc/{pid}/cwd")
        exe = _readlink(f"/proc/{pid}/exe")
        python, python_from = interpreter(argv, env, cwd, exe)
        serves.append({
            "pid": pid, "ppid": ppid, "comm": comm,
            "start_time": btime + start / float(ticks) if btime else None,
            "uid": uid, "argv": argv, "cwd": cwd, "exe": exe,
            "python": python, "python_from": python_from, "environ": env,
            "stdout": _fd_target(pid, 1), "stderr": _fd_target(pid, 2),
            "children": tree(pid),
        })
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    return {"uid": uid, "user": user, "matched": len(matched), "serves": serves}


def main() -> None:
    params = json.load(sys.stdin)
    sys.stdout.write(MARKER + "\n" + json.dumps(probe(params)) + "\n")


if __name__ == "__main__":
    main()
