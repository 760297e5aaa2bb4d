"""The log follower over a real OpenSSH sshd on loopback: throughput, latency, memory.

    .venv/bin/python -m benchmarks.bench_follower [--seconds 5] [--json]

A writer process appends vLLM-format lines (120-150 bytes, each stamped with its write time) to
a log at a fixed rate; `LogFollower` follows it through `SSHHost` and every batch goes through the
same parsing as the TUI's (`RunLog.feed_texts`: prefix, classification, trackers), except in the
"follower only" row. Two floods: a busy server's access log (per-request lines, which the
telemetry skips unparsed) and DEBUG logging (every line parsed). Reported:

- sustained: lines/s offered vs parsed, and how far behind the follower is when the writer stops
  (targets: >= 100k lines/s offered without falling behind);
- latency at 10k lines/s: write-to-parsed time per line, p50 / p99 / max (target p99 <= 50 ms);
- memory: this process's RSS after a million lines through a 100k-line cap (target <= 100 MB),
  measured first, while the process is fresh (later rows show the high-water mark);
- the host-side follower's CPU while busy and once the log is quiet.

Needs OpenSSH's sshd (as `make test` installs it); run as root it logs in as a dedicated user,
like the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from benchmarks.bench_agent import cpu_s  # noqa: E402
from benchmarks.output import report_each  # noqa: E402
from tests.follower_support import running  # noqa: E402
from tests.sshd import Sshd, chown_to, start_sshd  # noqa: E402
from vllm_console.console.hostclient.follower import LogBatch, LogFollower  # noqa: E402
from vllm_console.console.telemetry.run_log import RunLog  # noqa: E402
from vllm_console.console.transport.ssh_host import SSHHost  # noqa: E402

# What floods a serve log: the access log of a busy server (one line per request, skipped
# unparsed by the telemetry), and DEBUG logging (every line parsed and classified).
FLOODS = {
    "access": '(APIServer pid=11739) INFO:     127.0.0.1:42860 - "POST /v1/chat/completions '
              'HTTP/1.1" 200 OK ',
    "debug": "(EngineCore_DP0 pid=7) DEBUG 05-14 10:02:03 [core.py:123] EngineCore step: "
             "scheduled 3 requests, 1 waiting, KV blocks 1234/55082 ",
}

WRITER = r"""
import sys, time
path, rate, seconds, head = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
tick = 0.002
per_tick = max(1, int(rate * tick))
n = 0
start = time.monotonic()
with open(path, "ab", buffering=0) as fh:
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds:
            break
        due = int(rate * elapsed) + per_tick
        if n < due:
            stamp = time.time_ns()
            fh.write("".join(f"{head}n={i} t={stamp}\n" for i in range(n, due)).encode())
            n = due
        else:
            time.sleep(tick / 2)
print(n, time.monotonic() - start)
"""


class Consumer:
    """Parses every batch as the telemetry does; keeps the latency of stamped lines."""

    def __init__(self, parse: bool) -> None:
        self.parse = parse
        self.run_log = RunLog()
        self.lines = 0
        self.latencies: list[float] = []
        self.last_at = 0.0

    def __call__(self, batch: LogBatch) -> None:
        texts = batch.texts
        if self.parse:
            self.run_log.feed_texts(texts)
        now = time.time_ns()
        for text in texts[:: max(1, len(texts) // 50)]:  # a sample of each batch
            idx = text.rfind(" t=")
            if idx >= 0:
                self.latencies.append((now - int(text[idx + 3:])) / 1e6)
        self.lines += len(texts)
        self.last_at = time.monotonic()


def host_follower(log: Path) -> int | None:
    """The pid of the host-side follower (`BUNDLE follow`) of `log`, found in /proc (its
    arguments, the log among them, are in its environment)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if argv[1:2] and argv[1].endswith(b".pyz") and argv[2:3] == [b"follow"] and \
                        str(log).encode() in (entry / "environ").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    return None


def remote_cpu_s(pid: int | None) -> float:
    return cpu_s(pid) if pid is not None else 0.0


async def follow(sshd: Sshd, log: Path, rate: float, seconds: float, flood: str, *,
                 parse: bool = True, max_lines: int = 100_000,
                 idle_s: float = 0.0) -> dict[str, float]:
    log.write_bytes(b"")
    host = SSHHost(sshd.host_config())
    consumer = Consumer(parse)
    follower = LogFollower(host, str(log), start="end", max_lines=max_lines)
    async with running(follower, consumer):
        async with asyncio.timeout(20):
            while follower.position is None:
                await asyncio.sleep(0.01)
        remote = host_follower(log)
        cpu0, t0 = remote_cpu_s(remote), time.monotonic()
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WRITER, str(log), str(rate), str(seconds), FLOODS[flood],
            stdout=subprocess.PIPE)
        out, _ = await writer.communicate()
        written, write_s = int(out.split()[0]), float(out.split()[1])
        stopped = time.monotonic()
        async with asyncio.timeout(120):
            while consumer.lines < written:
                await asyncio.sleep(0.005)
        behind_s = max(0.0, consumer.last_at - stopped)
        busy_cpu = 100 * (remote_cpu_s(remote) - cpu0) / (time.monotonic() - t0)
        idle_cpu = -1.0
        if idle_s:
            cpu1, t1 = remote_cpu_s(remote), time.monotonic()
            await asyncio.sleep(idle_s)
            idle_cpu = 100 * (remote_cpu_s(remote) - cpu1) / (time.monotonic() - t1)
    lat = sorted(consumer.latencies)
    return {"offered_lines_per_s": round(written / write_s),
            "parsed_lines_per_s": round(written / (write_s + behind_s)),
            "behind_at_end_s": round(behind_s, 3),
            "latency_p50_ms": round(statistics.median(lat), 2) if lat else -1,
            "latency_p99_ms": round(lat[int(len(lat) * 0.99) - 1], 2) if lat else -1,
            "latency_max_ms": round(lat[-1], 2) if lat else -1,
            "kept_lines": len(follower.recent()),
            "host_follower_cpu_pct": round(busy_cpu, 2),
            "host_follower_idle_cpu_pct": round(idle_cpu, 3),
            "rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1)}


async def bench(seconds: float) -> dict[str, dict[str, float]]:
    sshd = start_sshd()
    try:
        d = sshd.user_dir("bench-follow")
        log = d / "serve.log"
        log.write_bytes(b"")
        chown_to(log, sshd.user)
        results = {}
        # First, while this process is fresh: a million lines through the 100k-line cap.
        results["memory: 1M lines, 100k cap"] = await follow(sshd, log, 200_000,
                                                             1_000_000 / 200_000, "access")
        for flood in FLOODS:
            for rate in (100_000, 150_000):
                results[f"{flood} flood {rate // 1000}k/s"] = await follow(
                    sshd, log, rate, seconds, flood)
        results["follower only, debug 150k/s"] = await follow(sshd, log, 150_000, seconds,
                                                               "debug", parse=False)
        results["latency, debug 10k/s"] = await follow(sshd, log, 10_000, seconds, "debug",
                                                       idle_s=5.0)
        return results
    finally:
        sshd.kill()
        with contextlib.suppress(OSError):
            subprocess.run(["rm", "-rf", str(sshd.directory)], check=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=5.0, help="per rate (default 5)")
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    results = asyncio.run(bench(opts.seconds))
    report_each(results, opts.json, "log follower over sshd on loopback, lines parsed as the "
                f"TUI does ({os.cpu_count()} CPUs)", lambda name, r: (
                    f"  {name:<28} offered {r['offered_lines_per_s']:>8,}/s  parsed "
                    f"{r['parsed_lines_per_s']:>8,}/s  behind {r['behind_at_end_s']:.3f} s  "
                    f"latency p50 {r['latency_p50_ms']:.1f} p99 {r['latency_p99_ms']:.1f} "
                    f"max {r['latency_max_ms']:.1f} ms  RSS {r['rss_mb']:.0f} MB "
                    f"(kept {r['kept_lines']:,} lines)  host follower "
                    f"{r['host_follower_cpu_pct']:.1f}% CPU"
                    + (f", {r['host_follower_idle_cpu_pct']:.2f}% idle"
                       if r["host_follower_idle_cpu_pct"] >= 0 else "")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
