"""Start-up, in a real terminal (tmux, 160x50): time to the first frame, and to the first live
data, for `vllm-console demo` (local simulated host) and for `vllm-console HOST` over a real sshd
on loopback (a simulated server already up and serving on the host).

    .venv/bin/python -m benchmarks.bench_start [--runs 3]

The clock starts just before `tmux new-session` runs the command; the screen is polled with
`capture-pane` (each poll takes a few ms: that is the resolution). Marks:
- first frame: the header (`vllm-console`) is on the screen;
- first GPU sample: `GPU0` in the GPU pane (the agent's first sample reached the screen);
- first log line: a serve-log line (`pid=`) in the log pane.
For the demo the simulated server starts with the console (its log begins ~1 s later), so its
first-log mark is the server's start-up more than the console's.

Also the cost of one Tab where a host name goes: the shell runs `vllm-console completion hosts`
(a hosts file of 8 entries), CPU (user + system, the process's own) and wall, median of runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, emit, private_sshd
from benchmarks.simhosts import sim_hosts
from tests.tmux import Terminal, app_env

CONSOLE = str(ROOT / ".venv" / "bin" / "vllm-console") \
    if (ROOT / ".venv" / "bin" / "vllm-console").exists() else None
MARKS = {
    "first_frame_s": lambda s: "vllm-console" in s,
    "first_gpu_s": lambda s: "GPU0" in s,
    "first_log_s": lambda s: any("pid=" in line for line in s.splitlines()[28:-2]),
}


def console_argv(*args: str) -> list[str]:
    return [CONSOLE, *args] if CONSOLE else [sys.executable, "-m", "vllm_console", *args]


Marks = dict[str, Callable[[str], bool]]


def time_marks(argv: list[str], tmp: Path, timeout: float = 30.0,
               marks: Marks | None = None) -> dict[str, float]:
    """Seconds from the command's start to each mark's first screen (-1.0: never seen)."""
    marks = MARKS if marks is None else marks
    env = app_env()
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(tmp / name.lower())
    env["TMPDIR"] = str(tmp)
    env["PYTHONPATH"] = str(ROOT)
    term = Terminal(argv, env=env)
    found: dict[str, float] = {}
    t0 = time.perf_counter()
    term.start()
    try:
        deadline = t0 + timeout
        while len(found) < len(marks) and time.perf_counter() < deadline:
            screen = term.screen()
            now = time.perf_counter() - t0
            for name, seen in marks.items():
                if name not in found and seen(screen):
                    found[name] = round(now, 3)
            time.sleep(0.005)
        term.quit()
    finally:
        term.stop()
    return {name: found.get(name, -1.0) for name in marks}


def median_marks(runs: list[dict[str, float]], marks: Marks | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in MARKS if marks is None else marks:
        values = [r[name] for r in runs if r[name] >= 0]
        out[name] = round(statistics.median(values), 3) if values else -1.0
        out[name.replace("_s", "_all")] = [r[name] for r in runs]
    return out


def tab_cost(tmp: Path, runs: int) -> dict[str, Any]:
    """One host-name completion, as the shell runs it at a Tab."""
    hosts = tmp / "tab-hosts.toml"
    hosts.write_text("".join(f'[hosts.gpu{i}]\nssh = "u@10.0.0.{i}"\n' for i in range(8)))
    env = {**os.environ, "HOME": str(tmp), "PYTHONPATH": str(ROOT)}
    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(console_argv("completion", "hosts", "--config", str(hosts)),
                              env=env, capture_output=True, text=True, timeout=30, check=True)
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        assert done.stdout.split() == [f"gpu{i}" for i in range(8)], done.stdout
    return {"cpu_s": round(statistics.median(cpu), 3), "wall_s": round(statistics.median(wall), 3),
            "cpu_all": [round(c, 3) for c in cpu], "runs": runs}


def bench(runs: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="vc-bench-start-") as tmp:
        result["tab"] = tab_cost(Path(tmp), max(5, 3 * runs))
        demo = [time_marks(console_argv("demo"), Path(tmp)) for _ in range(runs)]
        time.sleep(1.0)  # the last demo's simulated host is gone
        result["demo"] = median_marks(demo)
        with private_sshd() as sshd, sim_hosts(sshd, 1) as hosts:
            config = hosts.hosts_file()
            ssh = [time_marks(console_argv(hosts.name(0), "--config", str(config)),
                              Path(tmp)) for _ in range(runs)]
        result["ssh"] = median_marks(ssh)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    result = bench(opts.runs)
    if opts.json:
        emit(result)
    else:
        for where, marks in result.items():
            print(where, marks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
