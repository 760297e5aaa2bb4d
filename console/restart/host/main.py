"""Entry point of the host-side restart bundle.

    describe PID [--dir DIR]    the process's identity, tree, argv, cwd, environment, log, unit
                                (with --dir: also the lock holder and the last launch; PID may
                                be `-` for those alone)
    find WORDS                  candidate serve processes of this user (fallback discovery)
    last --dir DIR              the record of the last launch this console made
    lock --dir DIR              who holds the restart lock now ({} when nobody)
    run PLAN                    the restart itself (run detached; progress to the status file)

Every answer except `run` is one JSON object on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from .procfs import (
    ProcInfo,
    all_pids,
    children_map,
    cmdline,
    descendants,
    environ,
    read_proc,
    readlink,
    same_process,
    service_from_cgroup,
    start_epoch,
    user_name,
)
from .status import read_holder, read_json

SHELLS = ("sh", "bash", "dash", "zsh")


def _unit_of(pid: int) -> dict[str, Any]:
    """The systemd service the process runs under, when the unit really is its own: the unit's
    MainPID is the process, or a shell wrapper that is its parent. A process started from an
    SSH session on a host without pam_systemd sits in ssh.service's cgroup: that is no unit of
    the server and must never be restarted."""
    unit, user = service_from_cgroup(pid)
    if not unit:
        return {"unit": "", "user_unit": False}
    argv = ["systemctl"] + (["--user"] if user else []) + ["show", "-p", "MainPID", "--value",
                                                           unit]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"unit": "", "user_unit": False, "cgroup_unit": unit,
                "unit_note": f"cgroup names {unit}, but systemctl cannot be asked: {exc}"}
    main = done.stdout.decode().strip()
    info = read_proc(pid)
    ok = main.isdigit() and int(main) == pid
    if not ok and main.isdigit() and info is not None and int(main) == info.ppid:
        parent = read_proc(info.ppid)
        ok = parent is not None and parent.comm in SHELLS
    if ok:
        return {"unit": unit, "user_unit": user}
    return {"unit": "", "user_unit": False, "cgroup_unit": unit,
            "unit_note": f"cgroup names {unit} (MainPID {main or '?'}), which is not the serve "
                         "process's own unit"}


def describe(pid: int) -> dict[str, Any]:
    info = read_proc(pid)
    if info is None:
        return {"error": f"no process {pid}"}
    tree = [info, *descendants([info])]
    stdout = readlink(f"/proc/{pid}/fd/1")
    stdout_file = stdout.startswith("/") and not stdout.endswith(" (deleted)") and \
        os.path.isfile(stdout)
    env = environ(pid)
    return {
        "pid": pid, "start": info.start, "started_at": start_epoch(info.start),
        "uid": info.uid, "user": user_name(info.uid), "me": os.getuid(), "comm": info.comm,
        "argv": cmdline(pid), "cwd": readlink(f"/proc/{pid}/cwd"),
        "exe": readlink(f"/proc/{pid}/exe"), "env": env, "env_readable": env is not None,
        "stdout": stdout, "stdout_is_file": stdout_file,
        "members": [{"pid": m.pid, "start": m.start, "ppid": m.ppid, "comm": m.comm,
                     "uid": m.uid, "argv": cmdline(m.pid)[:8]} for m in tree],
        **_unit_of(pid),
    }


def find(words: list[str]) -> dict[str, Any]:
    """This user's processes whose command line holds `words` in order, roots only (a match
    whose parent also matches is part of that parent's tree)."""
    me, skip = os.getuid(), {os.getpid(), os.getppid()}
    found: dict[int, ProcInfo] = {}
    for pid in all_pids():
        if pid in skip:
            continue
        info = read_proc(pid)
        if info is None or info.uid != me or info.state in ("Z", "X"):
            continue
        if _holds_in_order(cmdline(pid), words):
            found[pid] = info
    roots = [p for p in found.values() if p.ppid not in found]
    kids = children_map()
    return {"candidates": [
        {"pid": p.pid, "start": p.start, "argv": cmdline(p.pid),
         "engine": any(c.comm.startswith("VLLM::") or "EngineCore" in c.comm
                       for c in descendants([p], kids))}
        for p in sorted(roots, key=lambda p: p.start)]}


def _holds_in_order(argv: list[str], words: list[str]) -> bool:
    """Each word is a substring of a distinct argv element, in order (as discovery matches)."""
    at = 0
    for word in words:
        while at < len(argv) and word not in argv[at]:
            at += 1
        if at >= len(argv):
            return False
        at += 1
    return bool(words)


def lock(directory: str) -> dict[str, Any]:
    holder = read_holder(os.path.join(directory, "restart.lock"))
    pid, start = holder.get("pid"), holder.get("start")
    if isinstance(pid, int) and isinstance(start, int) and same_process(pid, start):
        return holder
    return {}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = args[0], args[1:]
    directory = ""
    if "--dir" in rest:
        i = rest.index("--dir")
        directory = rest[i + 1]
        rest = rest[:i] + rest[i + 2:]
    if command == "run":
        from .step import run

        return run(rest[0])
    if command == "describe":
        answer = describe(int(rest[0])) if rest and rest[0].isdigit() else {}
        if directory:
            answer["lock"] = lock(directory)
            answer["last"] = read_json(os.path.join(directory, "last-launch.json"))
    elif command == "find":
        answer = find(rest)
    elif command == "last":
        answer = read_json(os.path.join(directory, "last-launch.json"))
    elif command == "lock":
        answer = lock(directory)
    else:
        print(f"unknown command {command!r}", file=sys.stderr)
        return 2
    json.dump(answer, sys.stdout)
    sys.stdout.write("\n")
    return 0
