"""toolong following a flooded file, headless: the peer the console's log path is compared with.

Runs with toolong's own interpreter (a separate venv: toolong pins a Textual the console cannot
share), so it imports nothing of this project but the stdlib-only `benchmarks/stamps.py`,
and prints one JSON line:

    VENV/bin/python benchmarks/toolong_driver.py WRITER_PY LOG RATE SECONDS LINE [--keys]
        [--marks 100000,1000000]

toolong indexes line breaks as the file grows and reads only the lines it paints. Measured as
for the console: lines indexed (its `line_count`) against lines written, how far behind it was
when the writer stopped, write-to-screen latency of each line painted for the first time (text
taken from the rendered strip), key latency (`ctrl+l`, line numbers on/off, to the first frame
after it took effect), CPU (% of a core, all its threads) and peak RSS.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from textual import events
from toolong.log_lines import LogLines
from toolong.log_view import LogView
from toolong.ui import UI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for benchmarks/stamps.py
from benchmarks.stamps import pct, stamp_of  # noqa: E402


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(writer_py: str, log: str, rate: float, seconds: float, line: str, keys: bool,
              marks: list[int]) -> dict[str, Any]:
    app = UI([log])
    seen: dict[str, Any] = {"count": 0, "last_at": 0.0, "painted_n": -1, "frames": 0,
                            "key": None}
    painted: list[float] = []
    key_ms: list[float] = []
    at_marks: dict[int, dict[str, float]] = {}
    async with app.run_test(size=(160, 50)):
        deadline = time.monotonic() + 20
        while not app.screen.query(LogLines) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        lines = app.screen.query_one(LogLines)
        view = app.screen.query_one(LogView)
        while lines.loading and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the initial scan done, tailing
        update_count, render_line, display = lines.update_line_count, lines.render_line, \
            app._display

        def on_update_count() -> None:
            update_count()
            seen["count"] = lines._line_count
            seen["last_at"] = time.monotonic()
            while marks and seen["count"] >= marks[0]:
                at_marks[marks.pop(0)] = {"peak_rss_mb": peak_rss_mb()}

        def on_render_line(y: int) -> Any:
            strip = render_line(y)
            stamp = stamp_of("".join(segment.text for segment in strip))
            if stamp is not None and stamp[0] > seen["painted_n"]:
                seen["painted_n"] = stamp[0]
                painted.append((time.time_ns() - stamp[1]) / 1e6)
            return strip

        def on_display(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            seen["frames"] += 1
            key = seen["key"]
            if key is not None and key[1]():
                key_ms.append((time.perf_counter() - key[0]) * 1000)
                seen["key"] = None

        lines.update_line_count = on_update_count
        lines.render_line = on_render_line
        app._display = on_display
        stop = asyncio.Event()

        async def press() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.25)
                before = view.show_line_numbers
                event = events.Key("ctrl+l", None)
                event.set_sender(app)
                seen["key"] = (time.perf_counter(), lambda b=before: view.show_line_numbers != b)
                app._driver.send_event(event)
                wait_until = time.monotonic() + 5
                while seen["key"] is not None and time.monotonic() < wait_until:
                    await asyncio.sleep(0.01)
                if seen["key"] is not None:
                    key_ms.append(5000.0)
                    seen["key"] = None

        cpu0 = cpu_s()
        t0 = time.monotonic()
        key_task = asyncio.create_task(press()) if keys else None
        base = 0
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-c", Path(writer_py).read_text(), log, str(rate), str(seconds), line,
            stdout=subprocess.PIPE)
        out, _ = await writer.communicate()
        written, write_s = int(out.split()[0]), float(out.split()[1])
        stopped = time.monotonic()
        deadline = stopped + 20.0  # as for the console: then it fell behind
        while seen["count"] - base < written and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        caught_up = seen["count"] - base >= written
        stop.set()
        if key_task is not None:
            await key_task
        cpu_used = cpu_s() - cpu0
        cpu = 100 * cpu_used / (time.monotonic() - t0)
    delivered = min(written, seen["count"] - base)
    behind = max(0.0, seen["last_at"] - stopped) if caught_up else -1.0
    span = write_s + behind if caught_up else write_s + time.monotonic() - stopped
    return {"offered_per_s": round(written / write_s), "written": written,
            "delivered": delivered, "delivered_per_s": round(delivered / span),
            "caught_up": caught_up, "behind_s": round(behind, 3),
            "painted_p50_ms": pct(painted, 50), "painted_p99_ms": pct(painted, 99),
            "painted_lines": len(painted),
            "key_p50_ms": pct(key_ms, 50), "key_p95_ms": pct(key_ms, 95), "keys": len(key_ms),
            "frames_per_s": round(seen["frames"] / span, 1), "cpu_pct": round(cpu, 2),
            "cpu_us_per_line": round(cpu_used / max(1, delivered) * 1e6, 2),
            "peak_rss_mb": peak_rss_mb(), "at_marks": at_marks, "transport": "local"}


def main() -> int:
    writer_py, log, rate, seconds, line = sys.argv[1:6]
    keys = "--keys" in sys.argv[6:]
    marks: list[int] = []
    if "--marks" in sys.argv:
        marks = [int(m) for m in sys.argv[sys.argv.index("--marks") + 1].split(",")]
    result = asyncio.run(run(writer_py, log, float(rate), float(seconds), line, keys, marks))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
