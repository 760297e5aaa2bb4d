"""Stopping the serve tree safely: SIGTERM, wait, SIGKILL what remains, verify it is gone.

Every signal goes to a process named by (pid, start time) and owned by this user, re-checked
right before sending (through a pidfd where the kernel has them, so that a pid recycled between
the check and the signal cannot be hit). Nothing outside the tree is ever signalled.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from ..procfs import ProcInfo, descendants, same_process

Report = Callable[..., None]


def send(member: ProcInfo, sig: int) -> str:
    """Signal `member` if it is still that process and ours. Returns "" when sent, else why not
    (`gone`, `not ours`, an OS error)."""
    pidfd: int | None = None
    open_pidfd = getattr(os, "pidfd_open", None)
    send_pidfd = getattr(signal, "pidfd_send_signal", None)
    if open_pidfd is not None and send_pidfd is not None:
        try:
            pidfd = open_pidfd(member.pid)
        except ProcessLookupError:
            return "gone"
        except OSError:
            pidfd = None
    try:
        # Checked after the pidfd is open: the pidfd names that very process from here on.
        now = same_process(member.pid, member.start)
        if now is None:
            return "gone"
        if now.uid != os.getuid() or member.uid != os.getuid():
            return "not ours"
        try:
            if pidfd is not None and send_pidfd is not None:
                send_pidfd(pidfd, sig)
            else:
                os.kill(member.pid, sig)
        except ProcessLookupError:
            return "gone"
        except OSError as exc:
            return exc.strerror or str(exc)
        return ""
    finally:
        if pidfd is not None:
            os.close(pidfd)


def alive(members: list[ProcInfo]) -> list[ProcInfo]:
    return [m for m in members if same_process(m.pid, m.start) is not None]


def wait_gone(members: list[ProcInfo], timeout: float, step: float = 0.05) -> list[ProcInfo]:
    """Wait until none of `members` runs, at most `timeout` s; returns those still running."""
    deadline = time.monotonic() + timeout
    left = alive(members)
    while left and time.monotonic() < deadline:
        time.sleep(step)
        left = alive(left)
    return left


def verified_tree(listed: list[dict[str, int]]) -> tuple[list[ProcInfo], list[str]]:
    """The processes of the discovered tree that are still the same processes and ours, plus
    their current descendants (a worker started after discovery is part of the tree too).
    Returns (members, notes on those left out)."""
    me = os.getuid()
    notes: list[str] = []
    members: list[ProcInfo] = []
    for item in listed:
        info = same_process(int(item["pid"]), int(item["start"]))
        if info is None:
            continue
        if info.uid != me:
            notes.append(f"pid {info.pid} ({info.comm}) belongs to uid {info.uid}: left alone")
            continue
        members.append(info)
    for child in descendants(members):
        if child.uid != me:
            notes.append(f"pid {child.pid} ({child.comm}) belongs to uid {child.uid}: left alone")
        else:
            members.append(child)
    return members, notes


def describe(members: list[ProcInfo]) -> list[dict[str, object]]:
    return [{"pid": m.pid, "comm": m.comm} for m in members]


class StopFailed(Exception):
    """The tree did not go away; the message says which processes remain."""


def stop_tree(members: list[ProcInfo], term_timeout: float, kill_timeout: float,
              report: Report, *, term: bool = True) -> list[ProcInfo]:
    """SIGTERM every member (root first), wait, SIGKILL what remains, verify. Returns the
    processes that were killed with SIGKILL. Raises StopFailed when something survives."""
    if term:
        skipped = {}
        for member in members:
            why = send(member, signal.SIGTERM)
            if why and why != "gone":
                skipped[member.pid] = why
        report("term-sent", f"SIGTERM sent to {len(members) - len(skipped)} process(es); "
               f"waiting up to {term_timeout:g} s",
               pids=[m.pid for m in members if m.pid not in skipped],
               skipped={str(k): v for k, v in skipped.items()})
    left = wait_gone(members, term_timeout)
    killed: list[ProcInfo] = []
    if left:
        # New children may have appeared while the tree shut down: they go too.
        left = left + [c for c in descendants(left) if c.uid == os.getuid()
                       and all(c.pid != m.pid for m in left)]
        for member in left:
            if send(member, signal.SIGKILL) == "":
                killed.append(member)
        names = ", ".join(f"{m.comm} {m.pid}" for m in left)
        report("kill-sent", f"still running {term_timeout:g} s after SIGTERM: {names}; "
               "SIGKILL sent", processes=describe(left))
        left = wait_gone(left, kill_timeout)
    if left:
        raise StopFailed("still running after SIGKILL: " + ", ".join(
            f"pid {m.pid} ({m.comm})" for m in left))
    return killed
