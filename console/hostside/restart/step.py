"""The whole restart as one host-side step: lock, stop, verify, relaunch, wait until ready.

It runs detached from the SSH session (started with setsid by the client), so a laptop that
loses its link mid-restart never leaves the server down: everything from the first signal to
the ready check happens here, and progress goes to a status file the client follows.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import traceback
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from ..containers import in_container
from ..gpu import gpu_holders
from ..procfs import (
    ProcInfo,
    container_from_cgroup,
    listen_inodes,
    listening,
    pid_namespace,
    port_holders,
    read_proc,
    same_process,
    tree_pids,
    user_name,
)
from ..vocabulary import RESTART_MARKER
from . import compose, recreate
from . import container as container_restart
from .container import ContainerFailed
from .hook_files import hook_files
from .launch import LogWatch, append_marker, file_kind, launch, wait_ready
from .status import StatusFile, take_lock, write_private
from .stop import StopFailed, describe, stop_tree, verified_tree

_UTC = timezone.utc  # noqa: UP017 (datetime.UTC is Python 3.11+; the host may have 3.9)


class StepFailed(Exception):
    """The restart cannot go on; the message is the reason shown to the person."""


@contextlib.contextmanager
def bounded(phase: str, seconds: float) -> Iterator[None]:
    """End `phase` with StepFailed after `seconds`, whatever it waits on (an open() of a FIFO,
    a hung systemctl): the step must end, release the lock and say why. SIGALRM interrupts a
    blocking call in the main thread, where the step runs."""
    def expired(_sig: int, _frame: object) -> None:
        raise StepFailed(f"the {phase} phase did not end within {seconds:g} s; the restart "
                         "step gave up there")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unit_argv(plan: dict[str, Any], *words: str) -> list[str]:
    argv = [plan.get("systemctl") or "systemctl"]
    if plan.get("user_unit"):
        argv.append("--user")
    return [*argv, *words]


def _systemctl(plan: dict[str, Any], *words: str, timeout: float = 120) -> str:
    argv = _unit_argv(plan, *words)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StepFailed(f"{shlex.join(argv)}: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
        raise StepFailed(f"{shlex.join(argv)} exited {done.returncode}: {why[:500]}")
    return done.stdout.decode("utf-8", "replace").strip()


def _unit_main_pid(plan: dict[str, Any]) -> ProcInfo | None:
    value = _systemctl(plan, "show", "-p", "MainPID", "--value", plan["unit"], timeout=30)
    return read_proc(int(value)) if value.isdigit() and int(value) > 0 else None


def answered_by(port: int, pid: int) -> str:
    """"" when the tree of `pid` holds the listening socket on `port` (or no port is known),
    else who does: a supervisor's own server, or a server that was never stopped, answers
    /health just as well, and must never make a relaunch that died look ready."""
    if not port:
        return ""
    holders = port_holders(port)
    if not holders and listen_inodes(port):
        return f"port {port} is held by a process this user cannot see"
    tree = tree_pids(pid)
    if any(h.pid in tree for h in holders):
        return ""
    who = ", ".join(f"pid {h.pid} ({h.comm})" for h in holders) or "nobody"
    return f"port {port} is answered by {who}, not by the relaunched pid {pid}"


def _wait_gpu(plan: dict[str, Any], pids: list[int], before: dict[int, int] | None,
              status: StatusFile) -> None:
    timeout = float(plan["timeouts"]["free"])
    held, source = gpu_holders(plan.get("nvidia_smi") or "nvidia-smi")
    if held is None:
        status.write("gpu-skipped", f"GPU memory not checked: {source}", note=source)
        return
    deadline = time.monotonic() + timeout
    while True:
        still = {pid: mib for pid, mib in held.items() if pid in pids}
        if not still:
            freed = sum(v for k, v in (before or {}).items() if k in pids)
            status.write("gpu-released", f"GPU memory released ({freed} MiB held by the old "
                         f"tree, source {source})", mib=freed, source=source)
            return
        if time.monotonic() >= deadline:
            raise StepFailed("GPU memory still held after the tree exited: " + ", ".join(
                f"pid {pid} {mib} MiB" for pid, mib in sorted(still.items())))
        time.sleep(0.5)
        held, source = gpu_holders(plan.get("nvidia_smi") or "nvidia-smi")
        if held is None:
            status.write("gpu-skipped", f"GPU memory not checked: {source}", note=source)
            return


def _wait_port(plan: dict[str, Any], status: StatusFile) -> None:
    port = plan.get("port")
    if not port:
        status.write("port-free", "no port to check (no server URL known)")
        return
    deadline = time.monotonic() + float(plan["timeouts"]["free"])
    while listening(int(port)):
        if time.monotonic() >= deadline:
            holders = port_holders(int(port))
            who = ", ".join(f"pid {h.pid} ({h.comm}, uid {h.uid})" for h in holders) or \
                "a process this user cannot see"
            raise StepFailed(f"port {port} is still taken after the tree exited, by {who}: "
                             "not restarting over it")
        time.sleep(0.1)
    status.write("port-free", f"port {port} is free", port=port)


def _install_hook(plan: dict[str, Any]) -> None:
    hook = plan.get("hook") or {}
    directory = hook.get("dir")
    if not directory:
        return
    try:
        files = hook_files()
    except OSError as exc:
        raise StepFailed(str(exc)) from None
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for name, source in files.items():
        target = os.path.join(directory, name)
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(source)
        os.replace(tmp, target)


def _marker(plan: dict[str, Any]) -> str:
    when = datetime.now(_UTC).astimezone().isoformat(timespec="seconds")
    trace = "on" if plan.get("hook") else "off"
    return f"{RESTART_MARKER} {when} by {plan.get('by') or user_name(os.getuid())}; " \
           f"trace={trace}"


def _preflight(plan: dict[str, Any]) -> None:
    """What would make the relaunch fail, checked before anything is stopped: a server must
    never be taken down for a start that cannot happen."""
    log = plan.get("log") or ""
    if log:
        kind = file_kind(log)
        if kind not in ("file", "missing"):
            raise StepFailed(f"nothing was stopped: the log {log} is a {kind}, not a regular "
                             "file; a relaunch writing to it could block for good")
        try:
            os.close(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK,
                             0o644))
        except OSError as exc:
            raise StepFailed(f"nothing was stopped: cannot append to the log {log}: "
                             f"{exc.strerror}") from None
    _port_preflight(plan)
    own = pid_namespace()
    for member in plan.get("members") or []:
        pid = int(member.get("pid") or 0)
        if pid and in_container(pid, own):
            raise StepFailed(f"nothing was stopped: pid {pid} is a container's process "
                             f"({container_from_cgroup(pid)[:12] or 'another pid namespace'}"
                             "): stopping it would end its container; the container is "
                             "restarted through its runtime, never by signal")
    if plan.get("mode") == "unit":
        return
    for path in plan.get("inputs") or []:
        if not os.path.exists(path):
            raise StepFailed(f"nothing was stopped: {path}, which the relaunch loads, is gone")
    cwd = plan.get("cwd") or ""
    if cwd and not os.path.isdir(cwd):
        raise StepFailed(f"nothing was stopped: the working directory {cwd} is gone")
    argv = plan.get("argv") or []
    if not argv:
        raise StepFailed("nothing was stopped: no command line to relaunch")
    program = argv[0]
    if "/" in program:
        found = os.path.join(cwd or "/", program) if not os.path.isabs(program) else program
        ok = os.path.isfile(found) and os.access(found, os.X_OK)
    else:
        ok = shutil.which(program, path=(plan.get("env") or {}).get("PATH")) is not None
    if not ok:
        raise StepFailed(f"nothing was stopped: {program} is not an executable file any more")


def _regular_log(plan: dict[str, Any], status: StatusFile) -> None:
    """A log that is a FIFO, socket or device (whose reader may be gone with the old server:
    the open would block for good) is never written to: the relaunch's output goes to a
    regular file in the private directory, and the status says where."""
    log = plan.get("log") or ""
    kind = file_kind(log) if log else "missing"
    if kind in ("file", "missing"):
        return
    fallback = os.path.join(os.path.dirname(plan["paths"]["status"]), "vllm-serve.log")
    status.write("note", f"the log {log} is a {kind}, not a regular file (a relaunch writing "
                 f"to it could block for good): the relaunch writes to {fallback}")
    plan["log"] = fallback


def _port_preflight(plan: dict[str, Any]) -> None:
    """A port held by something this restart will not stop stays held after the stop: say so
    now, before anything is stopped, instead of waiting for it to be freed."""
    port = plan.get("port")
    if not port or not listening(int(port)):
        return
    members, _notes = verified_tree(plan.get("members") or [])
    ours = {m.pid for m in members}
    holders = port_holders(int(port))
    if holders and any(h.pid in ours for h in holders):
        return
    who = ", ".join(f"pid {h.pid} ({h.comm}, uid {h.uid})" for h in holders) or \
        "a process this user cannot see"
    raise StepFailed(f"nothing was stopped: port {port} is held by {who}, which this restart "
                     "would not stop")


def _stop(plan: dict[str, Any], status: StatusFile) -> list[int]:
    members, notes = verified_tree(plan.get("members") or [])
    for note in notes:
        status.write("note", note)
    before, _ = gpu_holders(plan.get("nvidia_smi") or "nvidia-smi") if members else (None, "")
    pids = [m.pid for m in members]
    t = plan["timeouts"]
    if plan.get("mode") == "unit":
        status.write("stopping", f"systemctl stop {plan['unit']}", processes=describe(members))
        _systemctl(plan, "stop", plan["unit"], timeout=float(t["term"]) + float(t["kill"]) + 30)
        killed = stop_tree(members, 2.0, float(t["kill"]), status.write, term=False)
    elif not members:
        status.write("stopping", "the serve process is not running: nothing to stop",
                     processes=[])
        killed = []
    else:
        status.write("stopping", f"stopping {len(members)} process(es)",
                     processes=describe(members))
        killed = stop_tree(members, float(t["term"]), float(t["kill"]), status.write)
    status.write("stopped", "the old tree is gone" if members else "nothing was running",
                 pids=pids, killed=[m.pid for m in killed])
    if members:
        _wait_gpu(plan, pids, before, status)
    _wait_port(plan, status)
    return pids


def _relaunch(plan: dict[str, Any], status: StatusFile, paths: dict[str, str]) -> None:
    t = plan["timeouts"]
    marker = _marker(plan)
    log = plan.get("log") or ""
    fd: int | None = None
    offset = 0
    if log:
        try:
            fd, offset = append_marker(log, marker)
        except OSError as exc:
            raise StepFailed(f"cannot append to the log {log}: {exc.strerror or exc}") \
                from None
    proc: subprocess.Popen | None = None
    try:
        if plan.get("mode") == "unit":
            status.write("launching", f"systemctl start {plan['unit']}", marker=marker,
                         log=log, log_offset=offset)
            _systemctl(plan, "start", plan["unit"], timeout=120)
            main = _unit_main_pid(plan)
            if main is None:
                raise StepFailed(f"{plan['unit']} has no main process after start")
            pid, start = main.pid, main.start
        else:
            _install_hook(plan)
            # `shown`: the command as the console shows it (secrets redacted there, by the
            # one rule); this status file is read back and printed.
            status.write("launching", "relaunching " + str(plan.get("shown") or plan["argv"][0]),
                         marker=marker,
                         log=log, log_offset=offset)
            if fd is None:
                fd = os.open(os.devnull, os.O_WRONLY)
            try:
                proc = launch(plan["argv"], plan.get("cwd") or "", plan["env"], fd)
            except OSError as exc:
                raise StepFailed(f"cannot start {plan['argv'][0]}: {exc.strerror or exc}") \
                    from None
            info = read_proc(proc.pid)
            pid, start = proc.pid, info.start if info is not None else 0
    finally:
        if fd is not None:
            os.close(fd)
    write_private(paths["last"], {
        "entry": plan.get("entry"), "argv": plan.get("argv"), "cwd": plan.get("cwd"),
        "env": plan.get("original_env"),
        "log": log, "url": plan.get("url"), "port": plan.get("port"), "unit": plan.get("unit"),
        "user_unit": plan.get("user_unit"), "pid": pid, "start": start,
        "at": time.time(), "by": plan.get("by")})
    status.write("launched", f"new server pid {pid}", pid=pid, start=start)

    def unit_alive() -> bool:
        return same_process(pid, start) is not None

    port = int(plan.get("port") or 0)
    watch = LogWatch(log, offset) if log else None
    outcome, message, code = wait_ready(proc, unit_alive, watch, plan.get("url") or "",
                                        float(t["startup"]), lambda: answered_by(port, pid),
                                        api_key=api_key_of(plan.get("argv") or [],
                                                           plan.get("env") or {}),
                                        left=lambda: os.path.exists(paths["status"] + ".left"))
    if outcome == "ready":
        status.write("ready", message, final=True, pid=pid, start=start, ok=True)
    else:
        status.write("failed", message, final=True, pid=pid, outcome=outcome, exit_status=code,
                     ok=False)


def api_key_of(argv: list[str], env: dict[str, str]) -> str:
    """The key the relaunched server wants, where it has it: `--api-key KEY` (or `=KEY`; the
    first when several are given) on its command line, else `VLLM_API_KEY` in its environment
    (vLLM's own default). "" when neither (a unit's server)."""
    for i, word in enumerate(argv):
        if word.startswith("--api-key="):
            return word.split("=", 1)[1]
        if word == "--api-key" and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            return argv[i + 1]
    return env.get("VLLM_API_KEY", "")


def _sweep(directory: str) -> None:
    """Forget old restarts: status and output files after a week, plans never read after an
    hour (they hold a server's environment)."""
    now = time.time()
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        age = {"restart-": 7 * 86400, "plan-": 3600}.get(name.split("-", 1)[0] + "-")
        if age is None or not name.endswith((".status", ".out", ".json", ".left")):
            continue
        path = os.path.join(directory, name)
        try:
            if now - os.stat(path).st_mtime > age:
                os.unlink(path)
        except OSError:
            continue


def run(plan_path: str) -> int:
    """Carry out the plan in `plan_path` (deleted once read: it holds the environment)."""
    with open(plan_path, encoding="utf-8") as fh:
        plan = json.load(fh)
    os.unlink(plan_path)
    paths = plan["paths"]
    status = StatusFile(paths["status"])
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    me = read_proc(os.getpid())
    holder = {"pid": os.getpid(), "start": me.start if me else 0, "id": plan["id"],
              "by": plan.get("by"), "at": time.time(), "host": socket.gethostname()}
    status.write("started", f"restart {plan['id']} started on {socket.gethostname()}",
                 pid=os.getpid(), start=holder["start"])
    fd, other = take_lock(paths["lock"], holder)
    if fd is None:
        when = datetime.fromtimestamp(float(other.get("at") or 0), _UTC).astimezone()
        status.write(
            "refused", f"another restart is running on this host: pid {other.get('pid')} "
            f"started {when.isoformat(timespec='seconds')} by {other.get('by') or '?'} "
            f"(restart {other.get('id') or '?'})", final=True, holder=other, ok=False)
        return 3
    status.write("locked", "restart lock taken", lock=paths["lock"])
    _sweep(os.path.dirname(paths["status"]))
    t = plan["timeouts"]
    try:
        if plan.get("mode") == "container":
            left = lambda: os.path.exists(paths["status"] + ".left")  # noqa: E731
            key = api_key_of(plan.get("argv") or [], plan.get("env") or {})
            with bounded("container restart", container_restart.wait_s(plan)):
                box = plan.get("container") or {}
                if box.get("recreate") and box.get("compose"):
                    compose.run(plan, status, left, key, _install_hook)
                elif box.get("recreate"):
                    recreate.run(plan, status, left, key, _install_hook)
                else:
                    container_restart.run(plan, status, left, key)
            return 0
        with bounded("check", 60):
            _regular_log(plan, status)
            _preflight(plan)
        stop_s = float(t["term"]) + float(t["kill"]) + 2 * float(t["free"]) + 150
        with bounded("stop", stop_s):
            _stop(plan, status)
        with bounded("relaunch", float(t["startup"]) + 300):
            _relaunch(plan, status, paths)
        return 0
    except (StepFailed, StopFailed, ContainerFailed) as exc:
        status.write("failed", str(exc), final=True, outcome="error", ok=False)
        return 1
    except Exception as exc:  # a bug here must still end the status file with a reason
        status.write("failed", f"restart step crashed: {type(exc).__name__}: {exc}",
                     final=True, outcome="error", ok=False,
                     traceback=traceback.format_exc()[-4000:])
        return 1
    finally:
        status.close()
        os.close(fd)
