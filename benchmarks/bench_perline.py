"""What each line costs on its way to the screen, stage by stage, without I/O: CPU time per
line of the console's own code (and of Textual's `Log` bookkeeping), the minimum of several
repeats so that other work on a shared machine does not count.

    .venv/bin/python -m benchmarks.bench_perline [--lines 20000] [--repeats 7]

Stages, in the order a line meets them (the real functions, fed 256 KiB chunks of a busy
server's access log as the host follower sends them):
- follower: `LogFollower._data` (UTF-8 decode, line split, escape strip, the batch and the ring);
- telemetry: `RunLog.feed_texts` (what the panes learn from the log), making the batch's keys
  (`LogBatch.keys`) as the app does;
- display: `LogBatch.display_lines` (which lines need secret redaction, `safe_text` or the width
  cut, by those keys; the lines come display-safe to the pane, which does not check them again);
- log width: the pane's `Log` measuring a batch (`LogLines._update_size`: the batch's length when
  it is printable ASCII, each line's cell width otherwise; stock Textual did the latter for
  every line, in a thread per batch).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import ACCESS_LINE, report
from vllm_console.console.hostclient.follower import LogBatch, LogFollower
from vllm_console.console.telemetry.run_log import RunLog
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.widgets.log_lines import LogLines


def _chunks(lines: int) -> list[bytes]:
    data = "".join(f"{ACCESS_LINE}n={i} t={time.time_ns()}\n" for i in range(lines)).encode()
    size = 256 * 1024
    return [data[i:i + size] for i in range(0, len(data), size)]


def _per_line(fn: Callable[[], Any], lines: int, repeats: int) -> float:
    """Best of `repeats` runs, in microseconds per line (collector on, as in the app)."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return round(best / lines * 1e6, 3)


def bench(lines: int, repeats: int) -> dict[str, float]:
    chunks = _chunks(lines)
    host = LocalHost("bench")

    def follower() -> LogFollower:
        f = LogFollower(host, "/dev/null", max_lines=100_000)
        off = 0
        for chunk in chunks:
            f._data({"t": "data", "off": off, "n": len(chunk)}, chunk)
            off += len(chunk)
        return f

    sample = follower()
    texts = tuple(sample._pending)
    batch = LogBatch(texts)
    shown = batch.display_lines()
    log = LogLines(100_000, {})
    # As in the app, the telemetry made each batch's keys before the screen shows it (and the
    # screen lets them go): one batch per repeat, its keys made beforehand.
    shows = [LogBatch(texts) for _ in range(repeats)]
    for ready in shows:
        assert ready.keys is not None
    out = {
        "follower": _per_line(follower, lines, repeats),
        "telemetry": _per_line(lambda: RunLog().feed_texts(texts, None, LogBatch(texts).keys),
                               lines, repeats),
        "display": _per_line(lambda: shows.pop().display_lines(), lines, repeats),
        "textual_log_width": _per_line(lambda: log._update_size(0, shown), lines, repeats),
    }
    stages = ("follower", "telemetry", "display", "textual_log_width")
    out["total"] = round(sum(out[s] for s in stages), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lines", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    report(bench(opts.lines, opts.repeats), opts.json, unit="µs/line")
    return 0


if __name__ == "__main__":
    sys.exit(main())
