"""Link faults, repeated: how long the console takes to notice a dead link and to recover.

    .venv/bin/python -m benchmarks.bench_faults [--rounds 5] [--json]

A private OpenSSH sshd on loopback (as the tests start it), reached through the tests' TCP proxy;
`HostTelemetry` runs with the console's defaults (keepalive 2 s x 3, agent every 1 s) on a log
that a writer appends to all along. Each round injects one fault and measures, from the fault:

- freeze: the proxy stops passing packets (a dead path): link noticed lost; then, from the heal,
  link back, first agent sample, log caught up (every line written meanwhile received once);
- cut: every connection reset: noticed, link back, first sample, log caught up;
- sshd killed: the server and its sessions die; restarted 2 s later: noticed; from the restart,
  link back, first sample, log caught up.

Every round also checks that no log line was lost or duplicated. Prints median and worst.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fault_support import NumberedWriter, Recorder, assert_exactly_once  # noqa: E402
from tests.sshd import Sshd, start_sshd  # noqa: E402
from tests.tcp_proxy import TcpProxy, proxied_config  # noqa: E402
from vllm_console.console.telemetry import (  # noqa: E402
    GpuSampled,
    HostTelemetry,
    LinkChanged,
    TelemetryOptions,
)
from vllm_console.console.transport.host import ConnectionState  # noqa: E402
from vllm_console.console.transport.ssh_host import SSHHost  # noqa: E402


def _link(state: ConnectionState):  # type: ignore[no-untyped-def]
    return lambda e: isinstance(e, LinkChanged) and e.link.state is state


async def _caught_up(rec: Recorder, writer: NumberedWriter, timeout: float = 60) -> float:
    target = writer.written
    await rec.until(lambda e: len(rec.numbered()) >= target, timeout)
    return time.monotonic()


async def one_kind(sshd: Sshd, kind: str, rounds: int) -> list[dict[str, float]]:
    proxy = TcpProxy(sshd.port).start()
    log = sshd.user_dir(f"bench-{kind}") / "serve.log"
    log.write_bytes(b"")
    base = proxied_config(sshd, proxy) if kind != "sshd-kill" else sshd.host_config()
    config = base.model_copy(update={"serve": base.serve.model_copy(update={
        "match": f"vllm serve /nonexistent-{uuid.uuid4().hex}/", "log": str(log)})})
    host = SSHHost(config)  # the console's defaults: keepalive 2 s x 3, connect timeout 10 s
    telemetry = HostTelemetry(host, config, TelemetryOptions(gpu_source="none",
                                                             log_start="begin"))
    rec = Recorder()
    writer = NumberedWriter(log)
    task = asyncio.create_task(telemetry.run(rec))
    writing = asyncio.create_task(writer.run())
    results: list[dict[str, float]] = []
    try:
        await rec.until(lambda e: isinstance(e, GpuSampled), 30)
        for _ in range(rounds):
            await asyncio.sleep(1.0)
            mark = rec.mark()
            fault_at = time.monotonic()
            if kind == "freeze":
                proxy.freeze()
            elif kind == "cut":
                proxy.cut()
            else:
                sshd.kill()
            noticed, _ = await rec.until(_link(ConnectionState.RECONNECTING), 30, after=mark)
            if kind == "freeze":
                await asyncio.sleep(1.0)
                healed_at = time.monotonic()
                proxy.resume()
            elif kind == "sshd-kill":
                await asyncio.sleep(2.0)
                healed_at = time.monotonic()
                sshd.start()
            else:
                healed_at = fault_at
            back, _ = await rec.until(_link(ConnectionState.CONNECTED), 60, after=mark)
            sampled, _ = await rec.until(lambda e: isinstance(e, GpuSampled), 60,
                                         after=rec.mark())
            caught = await _caught_up(rec, writer)
            results.append({"noticed_s": noticed - fault_at, "link_back_s": back - healed_at,
                            "samples_back_s": sampled - healed_at,
                            "log_caught_up_s": caught - healed_at})
        writer.stop()
        await writing
        await _caught_up(rec, writer)
    finally:
        writer.stop()
        await writing
        telemetry.stop()
        await task
        await host.close()
        proxy.close()
        if sshd.proc is None:
            sshd.start()
        shutil.rmtree(log.parent, ignore_errors=True)
    assert_exactly_once(rec.numbered(), writer.written)
    return results


def summarise(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {key: {"median": statistics.median(r[key] for r in rows),
                  "worst": max(r[key] for r in rows)} for key in rows[0]}


async def run(rounds: int) -> dict[str, Any]:
    sshd = start_sshd()
    try:
        return {kind: summarise(await one_kind(sshd, kind, rounds))
                for kind in ("freeze", "cut", "sshd-kill")}
    finally:
        sshd.kill()
        shutil.rmtree(sshd.directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    figures = asyncio.run(run(args.rounds))
    if args.json:
        print(json.dumps({"rounds": args.rounds, "faults": figures}, indent=2))
        return 0
    print(f"link faults, {args.rounds} rounds each, keepalive 2 s x 3 "
          f"({time.monotonic() - started:.0f} s); every round: no line lost or duplicated")
    print(f"{'fault':<10} {'measure':<16} {'median':>8} {'worst':>8}")
    for kind, measures in figures.items():
        for key, value in measures.items():
            print(f"{kind:<10} {key:<16} {value['median']:>7.2f}s {value['worst']:>7.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
