"""Anchors run on this machine beside the console: what a terminal tool people keep open costs.

    .venv/bin/python -m benchmarks.bench_anchors --idle htop [--seconds 20]
    .venv/bin/python -m benchmarks.bench_anchors --lnav --rate 10000 --seconds 5

- `--idle TOOL` (htop, btop): the tool in tmux at 160x50 for `--seconds`, nobody typing; its
  CPU (% of one core) and RSS. The class the console's idle figure is held against.
- `--lnav`: lnav (Debian's) in tmux at 160x50 showing the same flood the console follows,
  read over the same loopback sshd (`ssh HOST tail -n0 -F LOG | lnav -q`): lnav's CPU and the
  ssh client's, and when the last line written was on lnav's screen (`behind`: seconds after
  the writer stopped; tmux's screen polled every 50 ms).

A tool that is not installed is skipped and the result says so (`skipped`).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.bench_tail import ssh_argv
from benchmarks.common import CpuMeter, chown_to, private_sshd, report, rss_mb, writer_argv
from tests.tmux import Terminal, app_env

DRAIN_S = 20.0


def _tool_pid(term: Terminal, name: str) -> int | None:
    out = subprocess.run(["tmux", "-L", term.socket, "display-message", "-p", "-t", "main",
                          "#{pane_pid}"], capture_output=True, text=True).stdout.strip()
    if not out.isdigit():
        return None
    root = psutil.Process(int(out))
    for proc in [root, *root.children(recursive=True)]:
        if proc.name() == name:
            return proc.pid
    return None


def idle(tool: str, seconds: float) -> dict[str, Any]:
    path = shutil.which(tool)
    if path is None:
        return {"skipped": f"{tool} is not installed (apt-get install {tool})"}
    with tempfile.TemporaryDirectory(prefix="vc-bench-anchor-") as tmp:
        env = app_env() | {"HOME": tmp}  # no user config: the tools' defaults
        term = Terminal([path], env=env).start()
        try:
            time.sleep(3)  # drawn, settled
            pid = _tool_pid(term, tool)
            if pid is None:
                return {"skipped": f"{tool} did not start: {term.screen()[:200]!r}"}
            meter = CpuMeter([pid]).start()
            time.sleep(seconds)
            return {"tool": tool, "cpu_pct": meter.read(), "rss_mb": rss_mb(pid),
                    "seconds": seconds}
        finally:
            term.stop()


def _last_shown(screen: str) -> int:
    """The highest stamp (`n=I`) on lnav's screen, -1 when none."""
    best = -1
    for word in screen.split():
        if word.startswith("n=") and word[2:].isdigit():
            best = max(best, int(word[2:]))
    return best


def lnav(rate: float, seconds: float) -> dict[str, Any]:
    path = shutil.which("lnav")
    if path is None:
        return {"skipped": "lnav is not installed (apt-get install lnav)"}
    with private_sshd() as sshd, tempfile.TemporaryDirectory(prefix="vc-bench-lnav-") as tmp:
        d = sshd.user_dir("bench-lnav")
        try:
            log = d / "serve.log"
            log.write_bytes(b"")
            chown_to(log, sshd.user)
            ssh = shlex.join(ssh_argv(sshd, "tail", "-n", "0", "-F", str(log)))
            env = app_env() | {"HOME": tmp}
            term = Terminal(["sh", "-c", f"{ssh} | {shlex.quote(path)} -q"], env=env).start()
            try:
                time.sleep(3)
                lnav_pid, ssh_pid = _tool_pid(term, "lnav"), _tool_pid(term, "ssh")
                if lnav_pid is None or ssh_pid is None:
                    return {"skipped": f"lnav did not start: {term.screen()[:200]!r}"}
                meters = [CpuMeter([lnav_pid]).start(), CpuMeter([ssh_pid]).start()]
                writer = subprocess.run(writer_argv(Path(log), rate, seconds),
                                        capture_output=True, text=True, check=True)
                written, write_s = int(writer.stdout.split()[0]), float(writer.stdout.split()[1])
                stopped = time.monotonic()
                shown = -1
                while shown + 1 < written and time.monotonic() < stopped + DRAIN_S:
                    shown = max(shown, _last_shown(term.screen()))
                    time.sleep(0.05)
                behind = time.monotonic() - stopped
                lnav_cpu, ssh_cpu = (m.read() for m in meters)
                rss = rss_mb(lnav_pid)
            finally:
                term.stop()
        finally:
            shutil.rmtree(d, ignore_errors=True)
    caught_up = shown + 1 >= written
    return {"offered_per_s": round(written / write_s), "written": written,
            "last_on_screen": shown + 1, "caught_up": caught_up,
            "behind_s": round(behind, 2) if caught_up else -1.0,
            "lnav_cpu_pct": lnav_cpu, "ssh_client_cpu_pct": ssh_cpu, "lnav_rss_mb": rss}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--idle", metavar="TOOL", help="htop or btop")
    p.add_argument("--lnav", action="store_true")
    p.add_argument("--rate", type=float, default=10_000)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    result = idle(opts.idle, opts.seconds) if opts.idle else lnav(opts.rate, opts.seconds)
    report(result, opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
