"""Idle cost: the console in a real terminal (tmux, 160x50) on one simulated host over a real
sshd on loopback, every pane live (agent samples at 1 Hz, the serve log followed, `/metrics`
every 5 s, the sim's traffic on, demo-like: 2 GPUs, the incident scenario), nobody typing.

    .venv/bin/python -m benchmarks.bench_idle [--settle 15] [--seconds 30]

After `--settle` seconds (start-up and the first checks done), over `--seconds`:
- the console process's CPU (% of one core) and resident memory;
- on the host: the agent (`BUNDLE agent`), its `nvidia-smi` loop (the simulated one is a Python
  script: its cost says nothing of the real one's, so it is reported apart), the log follower
  (`BUNDLE follow`) and sshd's session processes;
- bytes per second on the SSH link, both ways (the client socket's `bytes_sent` /
  `bytes_received` as the kernel counts them, `ss -ti`: TCP payload, SSH framing included).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.bench_start import console_argv
from benchmarks.common import ROOT, CpuMeter, private_sshd, report, rss_mb
from benchmarks.simhosts import SimHosts, sim_hosts
from tests.sshd import Sshd
from tests.tmux import Terminal, app_env


def link_bytes(port: int) -> tuple[int, int]:
    """(sent, received) by the client sockets connected to `port` on loopback."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True).stdout
    sent = sum(int(m) for m in re.findall(r"bytes_sent:(\d+)", out))
    received = sum(int(m) for m in re.findall(r"bytes_received:(\d+)", out))
    return sent, received


def host_processes(sshd: Sshd, hosts: SimHosts) -> dict[str, list[int]]:
    """The console's processes on the host, by role (servers excluded)."""
    roles: dict[str, list[int]] = {"agent": [], "nvidia-smi": [], "follower": [], "sshd": [],
                                   "other": []}
    assert sshd.proc is not None
    smi = [str(t.nvidia_smi) for t in hosts.trees]
    for proc in psutil.Process(sshd.proc.pid).children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        name = proc.name()
        if name == "sshd":
            roles["sshd"].append(proc.pid)
        elif name.startswith("python") and cmd.endswith(".pyz agent"):
            roles["agent"].append(proc.pid)
        elif name.startswith("python") and cmd.endswith(".pyz follow"):
            roles["follower"].append(proc.pid)
        elif any(s in cmd for s in smi):
            roles["nvidia-smi"].append(proc.pid)
        else:
            roles["other"].append(proc.pid)  # the shells around them, `cat`s
    return roles


def console_pid(term: Terminal) -> int:
    out = subprocess.run(["tmux", "-L", term.socket, "display-message", "-p", "-t", "main",
                          "#{pane_pid}"], capture_output=True, text=True).stdout.strip()
    pid = int(out)
    proc = psutil.Process(pid)
    if "python" in proc.name() or "vllm-console" in " ".join(proc.cmdline()):
        return pid
    return next(p.pid for p in proc.children(recursive=True) if "python" in p.name())


def bench(settle: float, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vc-bench-idle-") as tmp, private_sshd() as sshd, \
            sim_hosts(sshd, 1) as hosts:
        env = app_env()
        for name in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
            env[name] = str(Path(tmp) / name.lower())
        env["PYTHONPATH"] = str(ROOT)
        term = Terminal(console_argv(hosts.name(0), "--config", str(hosts.hosts_file())),
                        env=env)
        term.start()
        try:
            term.wait_for("GPU0", timeout=30)
            time.sleep(settle)
            screen = term.screen()
            pid = console_pid(term)
            roles = host_processes(sshd, hosts)
            meters = {"console": CpuMeter([pid]).start()}
            meters.update({role: CpuMeter(pids).start() for role, pids in roles.items()})
            sent0, recv0 = link_bytes(sshd.port)
            t0 = time.monotonic()
            time.sleep(seconds)
            wall = time.monotonic() - t0
            sent1, recv1 = link_bytes(sshd.port)
            cpu = {role: meter.read() for role, meter in meters.items()}
            rss = rss_mb(pid)
            term.quit()
        finally:
            term.stop()
    return {"console_cpu_pct": cpu["console"], "agent_cpu_pct": cpu["agent"],
            "nvidia_smi_cpu_pct": cpu["nvidia-smi"], "follower_cpu_pct": cpu["follower"],
            "sshd_cpu_pct": cpu["sshd"], "other_host_cpu_pct": cpu["other"],
            "console_rss_mb": rss, "up_bytes_per_s": round((sent1 - sent0) / wall),
            "down_bytes_per_s": round((recv1 - recv0) / wall), "seconds": round(wall, 1),
            "processes": {role: len(pids) for role, pids in roles.items()},
            "screen_ok": "acceptance length" in screen and "GPU0" in screen}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--settle", type=float, default=15.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    result = bench(opts.settle, opts.seconds)
    report(result, opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
