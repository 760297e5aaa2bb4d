"""The `restart` entry point of the host-side bundle: `PYTHON BUNDLE restart COMMAND ...`.

    describe PID [--dir DIR [--key KEY]] [--log PATH]
                                the process's identity, tree, argv, cwd, environment, log, unit
                                (with --dir: also the lock holder, and with --key the host
                                entry's last launch; PID may be `-` for those alone; with
                                --log: what kind of file PATH is)
    last --dir DIR --key KEY    the record of the last launch this console made for an entry
    run PLAN                    the restart itself (run detached; progress to the status file)

Every answer except `run` is one JSON object after the marker line (`hostside.wire`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from .. import wire
from ..procfs import (
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
from ..vocabulary import LAST_LAUNCH_PREFIX, LAST_LAUNCH_SUFFIX, last_launch_file
from .launch import file_kind
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
    env = environ(pid, errors="surrogateescape")
    return {
        "pid": pid, "start": info.start, "started_at": start_epoch(info.start),
        "uid": info.uid, "user": user_name(info.uid), "me": os.getuid(), "comm": info.comm,
        "argv": cmdline(pid, errors="surrogateescape") or [], "cwd": readlink(f"/proc/{pid}/cwd"),
        "exe": readlink(f"/proc/{pid}/exe"), "env": env, "env_readable": env is not None,
        "stdout": stdout,
        "members": [{"pid": m.pid, "start": m.start, "ppid": m.ppid, "comm": m.comm,
                     "uid": m.uid, "argv": (cmdline(m.pid) or [])[:8]} for m in tree],
        **_unit_of(pid),
    }


def last_path(directory: str, key: str) -> str:
    return os.path.join(directory, last_launch_file(key))


def last_others(directory: str, key: str) -> list[dict[str, Any]]:
    """Who the other last-launch records belong to (entry and port only)."""
    out: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for name in names:
        if name.startswith(LAST_LAUNCH_PREFIX) and name.endswith(LAST_LAUNCH_SUFFIX) and \
                name != os.path.basename(last_path(directory, key)):
            record = read_json(os.path.join(directory, name))
            out.append({"entry": record.get("entry"), "port": record.get("port")})
    return out


def lock(directory: str) -> dict[str, Any]:
    holder = read_holder(os.path.join(directory, "restart.lock"))
    pid, start = holder.get("pid"), holder.get("start")
    if isinstance(pid, int) and isinstance(start, int) and same_process(pid, start):
        return holder
    return {}


def main(argv: list[str]) -> int:
    """The `restart` entry point (see the module's docstring)."""
    args = list(argv)
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = args[0], args[1:]
    options: dict[str, str] = {}
    for name in ("--dir", "--key", "--log"):
        if name in rest:
            i = rest.index(name)
            options[name] = rest[i + 1] if i + 1 < len(rest) else ""
            rest = rest[:i] + rest[i + 2:]
    directory, key = options.get("--dir", ""), options.get("--key", "")
    if command == "run":
        from .step import run

        return run(rest[0])
    if command == "describe":
        answer = describe(int(rest[0])) if rest and rest[0].isdigit() else {}
        if directory:
            answer["lock"] = lock(directory)
            answer["last"] = read_json(last_path(directory, key)) if key else {}
            answer["last_others"] = last_others(directory, key)
        if "--log" in options:
            answer["log_kind"] = file_kind(options["--log"])
    elif command == "last":
        answer = read_json(last_path(directory, key)) if key else {}
    else:
        print(f"unknown command {command!r}", file=sys.stderr)
        return 2
    return wire.answer(answer)
