"""The one reader of /proc on the host: process identity, stat, command lines, environments,
trees and listening sockets (the agent, discovery and the restart step all read it here).
"""

from __future__ import annotations

import os
import pwd
import re
import time
from dataclasses import dataclass
from typing import NamedTuple

PROC = "/proc"


class Stat(NamedTuple):
    """The fields of /proc/PID/stat the console uses."""

    comm: str
    state: str
    ppid: int
    cpu_ticks: int
    """utime + stime, in clock ticks."""
    threads: int
    start: int
    """Start time in clock ticks since boot: with the pid, it names a process for good."""
    rss_pages: int


def read_bytes(path: str, limit: int = 1 << 20) -> bytes | None:
    """A /proc file's bytes (chunked, at most `limit`), or None when it is gone or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        parts = []
        size = 0
        while size < limit:
            chunk = os.read(fd, min(65536, limit - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_stat(raw: bytes) -> Stat | None:
    """/proc/PID/stat's text as a `Stat`, or None when it is not one. The command name is in
    parentheses and may itself hold spaces and parentheses: it ends at the last ')'."""
    open_at, close_at = raw.find(b"("), raw.rfind(b")")
    if open_at < 0 or close_at < 0:
        return None
    fields = raw[close_at + 2:].split()
    try:
        return Stat(raw[open_at + 1:close_at].decode("utf-8", "replace"),
                    fields[0].decode("ascii", "replace"), int(fields[1]),
                    int(fields[11]) + int(fields[12]), int(fields[17]), int(fields[19]),
                    int(fields[21]) if len(fields) > 21 else 0)
    except (IndexError, ValueError):
        return None


def pid_namespace(pid: int | str = "self") -> str | None:
    """The pid namespace `pid` runs in (`pid:[4026531836]`), or None when it cannot be told
    (gone, or another user's: reading the link needs the right to trace the process)."""
    try:
        return os.readlink(f"{PROC}/{pid}/ns/pid")
    except OSError:
        return None


def in_other_pid_namespace(pid: int, own: str | None) -> bool:
    """Whether `pid` runs in another pid namespace than this one (`own`: `pid_namespace()`):
    a container's process, whose paths are the container's, never a bare server of this host."""
    theirs = pid_namespace(pid)
    return own is not None and theirs is not None and theirs != own


def read_stat(pid: int) -> Stat | None:
    """The process `pid`'s stat now, or None when it is gone (or cannot be read)."""
    raw = read_bytes(f"{PROC}/{pid}/stat", 4096)
    return parse_stat(raw) if raw else None


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


def read_proc(pid: int) -> ProcInfo | None:
    """The process `pid` now, or None when there is none (or it cannot be read)."""
    stat = read_stat(pid)
    status = read_bytes(f"{PROC}/{pid}/status")
    if stat is None or status is None:
        return None
    uid = -1
    for line in status.decode("utf-8", "replace").splitlines():
        if line.startswith("Uid:"):
            parts = line.split()
            uid = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1
            break
    return ProcInfo(pid, stat.start, stat.ppid, stat.state, stat.comm, uid)


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


def tree_pids(pid: int) -> set[int]:
    """`pid` and its live descendants' pids (just `pid` when it is gone)."""
    root = read_proc(pid)
    return {pid} | ({d.pid for d in descendants([root])} if root is not None else set())


def cmdline(pid: int, *, errors: str = "replace", limit: int = 1 << 20) -> list[str] | None:
    """The process's command line (at most `limit` bytes of it), or None when it cannot be
    read. NUL padding at the end (a process that renamed itself) is no argument. `errors`:
    "replace" for what is shown, "surrogateescape" for what is run again byte for byte."""
    raw = read_bytes(f"{PROC}/{pid}/cmdline", limit)
    if raw is None:
        return None
    return [w.decode("utf-8", errors) for w in raw.rstrip(b"\0").split(b"\0")] if raw else []


def environ(pid: int, *, errors: str = "replace") -> dict[str, str] | None:
    """The environment the process started with (None when it cannot be read)."""
    raw = read_bytes(f"{PROC}/{pid}/environ")
    if raw is None:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", errors)] = value.decode("utf-8", errors)
    return env


def readlink(path: str) -> str:
    """Where the link points ("" when it cannot be read)."""
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
    """When the host booted, in seconds since the epoch (0 when /proc does not say).

    From the clock now less /proc/uptime (hundredths of a second), which is how the kernel
    computes `btime` too, before it truncates it to the second: a start time built on `btime`
    could be up to 1 s early and a file written just after the start look older than it."""
    now = time.time()
    uptime = (read_bytes(f"{PROC}/uptime") or b"").split()
    try:
        return now - float(uptime[0])
    except (IndexError, ValueError):
        pass
    for line in (read_bytes(f"{PROC}/stat") or b"").split(b"\n"):
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


_CONTAINER_CGROUP = re.compile(r"(?:docker|libpod|cri-containerd|crio)[-/]([0-9a-f]{64})\b")


def container_from_cgroup(pid: int) -> str:
    """The id of the container whose cgroup holds `pid` ("" when none or unreadable)."""
    try:
        with open(f"{PROC}/{pid}/cgroup", encoding="utf-8", errors="replace") as fh:
            return container_in_cgroup(fh.read())
    except OSError:
        return ""


def container_in_cgroup(text: str) -> str:
    """The container id a /proc/PID/cgroup text names: Docker's `docker-ID.scope` (systemd
    driver) or `/docker/ID` (cgroupfs), Podman's `libpod-ID.scope`, containerd's and CRI-O's
    (`cri-containerd-ID.scope`, `crio-ID.scope`); "" for none."""
    found = _CONTAINER_CGROUP.search(text)
    return found.group(1) if found else ""


def listening(port: int) -> bool:
    """Whether anything on this host listens on TCP `port` (any address, v4 or v6)."""
    return bool(listen_inodes(port))


def listen_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP `port` (v4 and v6); a process holding one has the link
    `socket:[INODE]` among its fds."""
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
