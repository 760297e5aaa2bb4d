"""What showing a streaming log costs the screen alone, in CPU time: comparable across loads.

    .venv/bin/python -m benchmarks.bench_frames --rate 1000 [--seconds 6]

The recorded incident screen (tests/snapshot_support.py: every pane filled, 160x50, headless)
gets `--rate` lines/s as 40 batches a second of access-log lines, posted as the telemetry
worker posts them (`TelemetryArrived(LogLinesReceived)`): no SSH, no follower, no parser, so
the figure is the screen's own (the log pane, Textual's frames). Reported: the process's CPU
time over the wall time (% of one core) and frames drawn per second. On a machine shared with
other work the wall-clock figures of `bench_screen` (latency, and CPU % while the process waits
for a core) swing with the load; CPU time used for the same input does far less, so a before /
after comparison of the same input holds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from benchmarks.common import ACCESS_LINE, report
from tests.snapshot_support import HOST, replay_app
from vllm_console.console.hostclient.follower import LogBatch
from vllm_console.console.telemetry import events as ev
from vllm_console.console.tui.app import TelemetryArrived

BATCHES_PER_S = 40


async def frames(rate: int, seconds: float) -> dict[str, Any]:
    app = replay_app()
    drawn = [0]
    display = app._display

    def on_display(screen: Any, renderable: Any) -> None:
        drawn[0] += 1
        display(screen, renderable)

    per = max(1, rate // BATCHES_PER_S)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.5)
        app._display = on_display  # type: ignore[method-assign]
        n, cpu0, t0 = 0, time.process_time(), time.monotonic()
        for i in range(int(seconds * BATCHES_PER_S)):
            batch = LogBatch(tuple(f"{ACCESS_LINE} n={n + j}" for j in range(per)),
                             first_seq=n)
            n += per
            app.post_message(TelemetryArrived(HOST, ev.LogLinesReceived(HOST, batch, ())))
            await asyncio.sleep(max(0.0, t0 + (i + 1) / BATCHES_PER_S - time.monotonic()))
        await pilot.pause(0.3)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    return {"rate": rate, "screen_cpu_pct": round(100 * cpu / wall, 1),
            "frames_per_s": round(drawn[0] / wall, 1), "seconds": round(wall, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    report(asyncio.run(frames(opts.rate, opts.seconds)), opts.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
