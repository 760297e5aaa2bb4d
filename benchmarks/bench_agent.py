"""What the host agent costs the host: CPU % of one core at one sample per second.

    .venv/bin/python -m benchmarks.bench_agent [--seconds 30] [--interval 1] [--json]

Runs the agent (`console/hostside/agent.py`) as a host would (`/usr/bin/python3 BUNDLE agent`,
stdlib only) in three set-ups: no GPU source, the simulated host's `nvidia-smi` loops, and the same
with a simulated `vllm serve` tree to track. The agent's own CPU time (/proc schedstat, after its
first sample, so start-up is not counted) over the wall time is the figure; its nvidia-smi children
are reported apart (the simulated nvidia-smi is a Python script: its cost says nothing of the real
one's). Run as root, every process on the machine is the agent's user's, so the /proc scan does
its most work: the worst case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.output import report_each  # noqa: E402
from tests.hostside.bundle import entry_argv  # noqa: E402
from tests.sshd import free_port  # noqa: E402
from vllm_console.console.sim.runner import start_background, stop, wait_ready  # noqa: E402
from vllm_console.console.sim.tree import materialise  # noqa: E402

PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
CLK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """CPU seconds the process ran: /proc/PID/schedstat (nanoseconds), else stat's ticks."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return out


def measure(args: list[str], seconds: float) -> dict[str, float]:
    proc = subprocess.Popen(entry_argv(PYTHON, "agent", *args), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        hello = json.loads(proc.stdout.readline())
        proc.stdout.readline()  # the first sample: start-up done
        kids = children(proc.pid)
        t0, c0 = time.monotonic(), cpu_s(proc.pid)
        k0 = sum(cpu_s(k) for k in kids)
        samples = 0
        deadline = t0 + seconds
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            samples += 1
        wall = time.monotonic() - t0
        agent = cpu_s(proc.pid) - c0
        kid = sum(cpu_s(k) for k in kids) - k0
    finally:
        proc.terminate()
        proc.wait(5)
    return {"gpu_source": hello["gpu_source"], "samples": samples, "wall_s": round(wall, 2),
            "agent_cpu_pct": round(100 * agent / wall, 3),
            "children_cpu_pct": round(100 * kid / wall, 3),
            "processes": sum(1 for e in Path("/proc").iterdir() if e.name.isdigit())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    common = ["--interval", f"{opts.interval:g}", "--nvml-lib", "libnvidia-ml-none.so"]
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="vc-bench-agent-") as tmp:
        tree = materialise("incident", Path(tmp) / "sim", port=free_port(), startup_s=0.5)
        smi = ["--nvidia-smi", str(tree.nvidia_smi)]
        results["no GPU source"] = measure([*common, "--gpu-source", "none"], opts.seconds)
        results["nvidia-smi loops"] = measure([*common, *smi, "--match", "nothing-matches-x"],
                                              opts.seconds)
        server = start_background(tree)
        try:
            wait_ready(tree, server, timeout=30)
            results["nvidia-smi + serve tree"] = measure(
                [*common, *smi, "--match", f"vllm serve {tree.root}/"], opts.seconds)
        finally:
            stop(server, timeout=5)
    report_each(results, opts.json, f"agent at one sample every {opts.interval:g} s, "
                f"{opts.seconds:g} s each (target: < 1% of a core)", lambda name, r: (
                    f"  {name:<26} agent {r['agent_cpu_pct']:6.3f}% of a core   "
                    f"children {r['children_cpu_pct']:6.3f}%   ({r['samples']} samples, "
                    f"{r['processes']} processes on the machine, source {r['gpu_source']})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
