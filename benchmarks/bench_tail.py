"""The floor: plain `ssh HOST tail -F LOG` (the OpenSSH client, the test key, strict known_hosts)
reading the same flood the console follows, lines counted as they come out of the pipe.

    .venv/bin/python -m benchmarks.bench_tail --rate 100000 --seconds 5

No parsing, no screen: what the link and `tail` deliver. Latency is write-to-pipe (a sample of
each chunk). The lines/s it reaches is what the console's figures are divided by.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import (
    CpuMeter,
    chown_to,
    pct,
    private_sshd,
    report,
    stamp_of,
    writer_argv,
)
from tests.sshd import Sshd


def ssh_argv(sshd: Sshd, *command: str) -> list[str]:
    return ["ssh", "-T", "-i", str(sshd.client_key), "-p", str(sshd.port),
            "-o", f"UserKnownHostsFile={sshd.known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-F", "/dev/null",
            f"{sshd.user}@127.0.0.1", *command]


async def tail(rate: float, seconds: float) -> dict[str, Any]:
    with private_sshd() as sshd:
        d = sshd.user_dir("bench-tail")
        try:
            log = d / "serve.log"
            log.write_bytes(b"")
            chown_to(log, sshd.user)
            proc = await asyncio.create_subprocess_exec(
                *ssh_argv(sshd, "tail", "-n", "0", "-F", str(log)),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert proc.stdout is not None
            await asyncio.sleep(1.0)  # logged in, tail running
            latencies: list[float] = []
            state = {"lines": 0, "last_at": 0.0, "n": -1}

            async def read() -> None:
                assert proc.stdout is not None
                rest = b""
                while True:
                    chunk = await proc.stdout.read(256 * 1024)
                    if not chunk:
                        return
                    now = time.time_ns()
                    lines = (rest + chunk).split(b"\n")
                    rest = lines.pop()
                    if not lines:
                        continue
                    for raw in lines[:: max(1, len(lines) // 50)]:
                        stamp = stamp_of(raw.decode(errors="replace"))
                        if stamp is not None:
                            latencies.append((now - stamp[1]) / 1e6)
                    last = stamp_of(lines[-1].decode(errors="replace"))
                    if last is not None:
                        state["n"] = last[0]
                    state["lines"] += len(lines)
                    state["last_at"] = time.monotonic()

            reader = asyncio.create_task(read())
            cpu = CpuMeter([proc.pid]).start()
            writer = await asyncio.create_subprocess_exec(*writer_argv(log, rate, seconds),
                                                          stdout=subprocess.PIPE)
            out, _ = await writer.communicate()
            written, write_s = int(out.split()[0]), float(out.split()[1])
            stopped = time.monotonic()
            deadline = stopped + max(30.0, 2 * seconds)
            while state["n"] + 1 < written and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            caught_up = state["n"] + 1 >= written
            client_cpu = cpu.read()
            proc.terminate()
            reader.cancel()
            await proc.wait()
        finally:
            shutil.rmtree(d, ignore_errors=True)
    behind = max(0.0, state["last_at"] - stopped)
    return {"offered_per_s": round(written / write_s), "written": written,
            "delivered": state["n"] + 1,
            "delivered_per_s": round((state["n"] + 1) / (write_s + behind)),
            "caught_up": caught_up, "behind_s": round(behind, 3),
            "pipe_p50_ms": pct(latencies, 50), "pipe_p99_ms": pct(latencies, 99),
            "ssh_client_cpu_pct": client_cpu}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=float, default=100_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    result = asyncio.run(tail(opts.rate, opts.seconds))
    report(result, opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
