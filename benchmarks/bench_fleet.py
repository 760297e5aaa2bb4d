"""Fleet: the console (the real `ConsoleApp`, headless at 160x50) on N simulated hosts, each
its own simulated server behind one real sshd on loopback, each its own SSH connection, agent
and log follower, as N real hosts would be.

    .venv/bin/python -m benchmarks.bench_fleet --hosts 8 [--settle 20] [--seconds 20]

The servers have low traffic (1 GPU, no access log, a throughput line every 5 s) so that 32 of
them fit on a small machine. The console starts as a person would start it (checks run on every
host); after every host is connected and has been checked, and `--settle` seconds more, over
`--seconds`: the console's CPU (% of one core) and memory (resident now and peak), and key
latency: with several hosts, `down`/`up` in the fleet table (done when the cursor moved), with
one host `tab`/`shift+tab` on its screen; each to the first frame after it took effect. The
host side (every sshd, agent, follower, nvidia-smi loop) runs on the same cores: its CPU is
reported too, as the load the console shared the machine with.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from textual.widgets import DataTable

from benchmarks.bench_screen import ScreenProbe, host_screen_keys, key_figures, press_keys
from benchmarks.common import CpuMeter, peak_rss_mb, private_sshd, report, rss_mb
from benchmarks.simhosts import sim_hosts
from tests.sshd import Sshd
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.transport.host import ConnectionState
from vllm_console.console.transport.ssh_host import SSHHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.fleet import FleetScreen

SIZE = (160, 50)


def host_side_pids(sshd: Sshd) -> list[int]:
    assert sshd.proc is not None
    try:
        return [p.pid for p in psutil.Process(sshd.proc.pid).children(recursive=True)]
    except psutil.Error:
        return []


async def fleet(n: int, settle: float, seconds: float) -> dict[str, Any]:
    with private_sshd() as sshd, sim_hosts(sshd, n, gpus=1, metrics_interval_s=5.0,
                                           access_log=False) as hosts:
        sessions = [HostSession(hosts.host_config(i), SSHHost(hosts.host_config(i)))
                    for i in range(n)]
        app = ConsoleApp(sessions, export_dir=Path(hosts.base) / "exports")
        probe = ScreenProbe()
        t0 = time.monotonic()
        async with app.run_test(size=SIZE):
            probe.install_frames(app)
            while n > 1 and not isinstance(app.screen, FleetScreen):
                await asyncio.sleep(0.01)
            deadline = t0 + 120
            while time.monotonic() < deadline:
                connected = sum(s.host.link.state is ConnectionState.CONNECTED
                                and s.snapshot.sample is not None for s in sessions)
                checked = sum(s.last_report is not None for s in sessions)
                if connected == n and checked == n:
                    break
                await asyncio.sleep(0.1)
            ready_s = time.monotonic() - t0
            await asyncio.sleep(settle)
            frames0 = probe.frames
            cpu = CpuMeter([None]).start()
            host_cpu = CpuMeter(host_side_pids(sshd)).start()
            stop = asyncio.Event()
            if n > 1:
                table = app.screen.query_one(DataTable)
                def row() -> object:
                    return table.cursor_row

                keys = press_keys(app, probe, stop, [("cursor", "down", row),
                                                     ("cursor", "up", row)])
            else:
                keys = press_keys(app, probe, stop, host_screen_keys(app))
            task = asyncio.create_task(keys)
            await asyncio.sleep(seconds)
            stop.set()
            await task
            wall = time.monotonic() - cpu.t0
            result = {
                "hosts": n, "connected": connected, "checked": checked,
                "ready_s": round(ready_s, 1),
                "console_cpu_pct": cpu.read(), "host_side_cpu_pct": host_cpu.read(),
                "rss_mb": rss_mb(), "peak_rss_mb": peak_rss_mb(),
                **key_figures(probe),
                "frames_per_s": round((probe.frames - frames0) / wall, 1),
                "screen": type(app.screen).__name__,
            }
            for session in sessions:
                await session.close()
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=8)
    p.add_argument("--settle", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    result = asyncio.run(fleet(opts.hosts, opts.settle, opts.seconds))
    report(result, opts.json, width=18)
    return 0


if __name__ == "__main__":
    sys.exit(main())
