"""What the host-side restart step reads from /proc: process identity, trees, listeners.

Stdlib only, Python 3.9+: the `host` package runs on the serving host as a zipapp (see
`console.restart.bundle`), so nothing here imports from the console.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from dataclasses import asdict, dataclass

PROC = "/proc"


@dataclass(frozen=True)
class ProcInfo:
    """One process as /proc shows it now. `start` (clock ticks since boot) and `pid` together
    name a process for good: a recycled pid has another start time."""

    pid: int
    start: int
    ppid: int
    state: str
    comm: str
    uid: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def read_proc(pid: int) -> ProcInfo | None:
    """The process `pid` now, or None when there is none (or it cannot be read)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("utf-8", "replace")
        with open(f"{PROC}/{pid}/status", "rb") as fh:
            status = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm is in parentheses and may itself hold spaces and parentheses: cut at the last ')'.
    left, right = stat.find("("), stat.rfind(")")
    if left < 0 or right < 0:
        return None
    fields = stat[right + 2:].split()
    uid = -1
    for line in status.splitlines():
        if line.startswith("Uid:"):
            parts = line.split()
            uid = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1
            break
    try:
        return ProcInfo(pid, int(fields[19]), int(fields[1]), fields[0], stat[left + 1:right],
                        uid)
    except (IndexError, ValueError):
        return None


def is_live(info: ProcInfo | None) -> bool:
    """A process that still runs (a zombie has finished: only its parent's wait is missing)."""
    return info is not None and info.state not in ("Z", "X", "x")


def same_process(pid: int, start: int) -> ProcInfo | None:
    """The process `pid` if it is still the one that started at `start` and still runs."""
    info = read_proc(pid)
    if info is None or info.start != start or not is_live(info):
        return None
    return info


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir(PROC) if name.isdigit()]


def children_map() -> dict[int, list[ProcInfo]]:
    """Every live process by its parent's pid."""
    out: dict[int, list[ProcInfo]] = {}
    for pid in all_pids():
        info = read_proc(pid)
        if info is not None and is_live(info):
            out.setdefault(info.ppid, []).append(info)
    return out


def descendants(roots: list[ProcInfo], kids: dict[int, list[ProcInfo]] | None = None
                ) -> list[ProcInfo]:
    """The live descendants of `roots` (not the roots themselves), parents before children."""
    kids = children_map() if kids is None else kids
    seen = {r.pid for r in roots}
    out: list[ProcInfo] = []
    queue = list(roots)
    while queue:
        parent = queue.pop(0)
        for child in kids.get(parent.pid, []):
            if child.pid not in seen:
                seen.add(child.pid)
                out.append(child)
                queue.append(child)
    return out


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return [w.decode("utf-8", "surrogateescape") for w in raw.split(b"\0")[:-1]] if raw else []


def environ(pid: int) -> dict[str, str] | None:
    """The environment the process started with (None when it cannot be read)."""
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            key, _, value = item.partition(b"=")
            env[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return env


def readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def boot_time() -> float:
    with contextlib.suppress(OSError), open(f"{PROC}/stat", "rb") as fh:
        for line in fh:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    return 0.0


def start_epoch(start_ticks: int) -> float:
    """A process start time (clock ticks since boot) as seconds since the epoch."""
    return boot_time() + start_ticks / os.sysconf("SC_CLK_TCK")


def service_from_cgroup(pid: int) -> tuple[str, bool]:
    """The systemd service whose cgroup holds `pid` (see `service_in_cgroup`)."""
    try:
        with open(f"{PROC}/{pid}/cgroup", encoding="utf-8", errors="replace") as fh:
            return service_in_cgroup(fh.read())
    except OSError:
        return "", False


def service_in_cgroup(text: str) -> tuple[str, bool]:
    """The service named by a /proc/PID/cgroup text (`""` when none) and whether it is a user
    unit (`systemctl --user`). The per-user manager itself (`user@N.service`) is no unit of
    the serve process; scopes (login sessions) are none either."""
    for line in text.splitlines():
        _hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if not (line.startswith("0::") or "name=systemd" in controllers):
            continue
        parts = [p for p in path.split("/") if p]
        user = any(p.startswith("user@") and p.endswith(".service") for p in parts)
        for part in reversed(parts):
            if part.endswith(".service") and not part.startswith("user@"):
                return part, user
    return "", False


def listening(port: int) -> bool:
    """Whether anything on this host listens on TCP `port` (any address, v4 or v6)."""
    return bool(listen_inodes(port))


def listen_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP `port`."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{PROC}/net/{table}", encoding="ascii", errors="replace") as fh:
                next(fh, None)
                for line in fh:
                    parts = line.split()
                    if len(parts) > 9 and parts[3] == "0A" and \
                            int(parts[1].rsplit(":", 1)[-1], 16) == port:
                        found.add(parts[9])
        except (OSError, ValueError):
            continue
    return found


def port_holders(port: int) -> list[ProcInfo]:
    """The processes (that this user may look into) holding a listening socket on `port`."""
    inodes = {f"socket:[{inode}]" for inode in listen_inodes(port)}
    holders = []
    for pid in all_pids() if inodes else []:
        try:
            fds = os.listdir(f"{PROC}/{pid}/fd")
        except OSError:
            continue
        if any(readlink(f"{PROC}/{pid}/fd/{fd}") in inodes for fd in fds):
            info = read_proc(pid)
            if info is not None:
                holders.append(info)
    return holders
