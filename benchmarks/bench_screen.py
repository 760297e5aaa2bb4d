"""The log path end to end: a host's log flooded, followed over a real sshd on loopback, to the
console's screen (the real `ConsoleApp`, headless at 160x50, its log pane's `Log` widget).

    .venv/bin/python -m benchmarks.bench_screen --rate 10000 --seconds 5 [--keys] [--local]
    .venv/bin/python -m benchmarks.bench_screen --memory     # 1M lines at 100k/s: peak RSS

A writer process appends stamped lines (`... n=I t=NS`, a busy server's access log unless
`--debug`) to the log at `--rate` lines/s. The console follows it as it follows any serve log
(`HostSession` -> `HostTelemetry` -> `TelemetryArrived` -> `LogPane.add_batch` ->
`LogPane.add_lines` -> `LogLines.append`). Hooks on the widgets (read-only wrappers) see:

- every batch written into the `Log`: lines delivered, and write-to-widget latency (a sample
  of each batch);
- every line the `Log` paints for the first time (`_render_line_strip`): write-to-screen
  latency of the lines that reach the screen (at a flood most scroll past between frames);
- each frame (`App._display`, called per frame even headless; only the terminal write is
  skipped): with `--keys`, a `tab`/`shift+tab` is sent through the driver every 0.25 s and its
  latency is the time to the first frame after focus moved.

Reported: lines/s delivered over the writer's time plus the time to catch up, how far behind
the console was when the writer stopped, latency percentiles, this process's CPU (% of a core)
and peak RSS, and the host-side follower's and sshd's CPU. The auto-run checks are off (their
probes are not the log path). Runs as root log in as a dedicated user, like the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from textual import events

from benchmarks.common import (
    ACCESS_LINE,
    DEBUG_LINE,
    CpuMeter,
    chown_to,
    cpu_s,
    find_pids,
    pct,
    peak_rss_mb,
    private_sshd,
    report,
    rss_mb,
    stamp_of,
    writer_argv,
)
from tests.sshd import Sshd
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.settings import GpuSettings, HostConfig, ServeSettings
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.transport.ssh_host import SSHHost
from vllm_console.console.tui.app import ConsoleApp

SIZE = (160, 50)
NO_SERVE = "vc-bench-no-such-serve"
DRAIN_S = 20.0  # how long the last line may take once the writer stopped (else: fell behind)
class GcMeter:
    """Time spent in the cyclic garbage collector (all generations) while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self.by_generation = [0.0, 0.0, 0.0]
        self._t = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            took = time.perf_counter() - self._t
            self.seconds += took
            self.collections[info["generation"]] += 1
            self.by_generation[info["generation"]] += took

    def __enter__(self) -> GcMeter:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


class ScreenProbe:
    """Read-only hooks on the app, the log pane and its `Log`; what they saw."""

    def __init__(self, marks: tuple[int, ...] = ()) -> None:
        self.delivered = 0           # stamped lines written into the Log
        self.last_at = 0.0           # when the last of them arrived (monotonic)
        self.widget_ms: list[float] = []
        self.painted_ms: list[float] = []
        self.key_ms: list[float] = []
        self.frames = 0
        self.batches = 0
        self._painted_n = -1
        self._key: tuple[float, Callable[[], bool]] | None = None
        self._key_kind = ""
        self.key_by_kind: dict[str, list[float]] = {}
        self.marks = list(marks)
        self.at_marks: dict[int, dict[str, float]] = {}

    def install(self, app: ConsoleApp, host: str) -> None:
        screen = app.screen_for(host)
        assert screen is not None
        pane = screen.log_pane
        log = pane.log_widget
        add_lines, render_strip = pane.add_lines, log._render_line_strip

        def on_add_lines(lines: Any, *rest: Any) -> None:
            lines = list(lines)
            add_lines(lines, *rest)
            self._delivered(lines)

        def on_render_strip(y: int, rich_style: Any) -> Any:
            if y < len(log._lines):
                stamp = stamp_of(log._lines[y])
                if stamp is not None and stamp[0] > self._painted_n:
                    self._painted_n = stamp[0]
                    self.painted_ms.append((time.time_ns() - stamp[1]) / 1e6)
            return render_strip(y, rich_style)

        pane.add_lines = on_add_lines  # type: ignore[method-assign]
        log._render_line_strip = on_render_strip  # type: ignore[method-assign]
        self.install_frames(app)

    def install_frames(self, app: ConsoleApp) -> None:
        """Count frames; finish a pending key press at the first frame after it took effect."""
        display = app._display

        def on_display(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            self.frames += 1
            if self._key is not None and self._key[1]():
                self._key_done((time.perf_counter() - self._key[0]) * 1000)

        app._display = on_display  # type: ignore[method-assign]

    def _key_done(self, ms: float) -> None:
        self.key_ms.append(ms)
        self.key_by_kind.setdefault(self._key_kind, []).append(ms)
        self._key = None

    def _delivered(self, lines: list[str]) -> None:
        now_ns = time.time_ns()
        last = None
        step = max(1, len(lines) // 50)
        for text in lines[::step]:
            stamp = stamp_of(text)
            if stamp is not None:
                self.widget_ms.append((now_ns - stamp[1]) / 1e6)
        for text in reversed(lines):
            last = stamp_of(text)
            if last is not None:
                break
        if last is None:
            return
        self.batches += 1
        self.delivered = last[0] + 1
        self.last_at = time.monotonic()
        while self.marks and self.delivered >= self.marks[0]:
            mark = self.marks.pop(0)
            self.at_marks[mark] = {"peak_rss_mb": peak_rss_mb(), "rss_mb": rss_mb()}

    def press(self, app: ConsoleApp, key: str, done: Callable[[], bool],
              kind: str = "") -> None:
        """Send `key` as the terminal driver does; its latency is taken at the first frame
        drawn once `done()` holds."""
        event = events.Key(key, None)
        event.set_sender(app)
        self._key_kind = kind or key
        self._key = (time.perf_counter(), done)
        assert app._driver is not None
        app._driver.send_message(event)

    @property
    def key_pending(self) -> bool:
        return self._key is not None


async def _until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


KeyStep = tuple[str, str, Callable[[], object]]  # kind, key, the state it changes


def host_screen_keys(app: ConsoleApp) -> list[KeyStep]:
    """What a person does on a host screen during a flood: move focus off the log and back
    (`tab` / `shift+tab`: a visible focus change; Textual restyles and the footer changes its
    keys), and pause and resume following (`F` twice: the log pane's status line)."""
    def focused() -> object:
        return app.focused

    def follow() -> object:
        screen = app.screen
        return getattr(getattr(screen, "log_pane", None), "follow", None)

    return [("focus", "tab", focused), ("focus", "shift+tab", focused),
            ("follow", "F", follow), ("follow", "F", follow)]


async def press_keys(app: ConsoleApp, probe: ScreenProbe, stop: asyncio.Event,
                     steps: list[KeyStep]) -> None:
    """One key every 0.25 s, the steps in turn, until `stop`; each done when its state
    changed (and a frame was drawn)."""
    i = 0
    while not stop.is_set():
        await asyncio.sleep(0.25)
        kind, key, read = steps[i % len(steps)]
        i += 1
        before = read()
        probe.press(app, key, lambda b=before, r=read: r() != b, kind)
        deadline = time.monotonic() + 5
        while probe.key_pending and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if probe.key_pending:  # lost (should not happen): count it as 5 s
            probe._key_done(5000.0)


def key_figures(probe: ScreenProbe) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key_p50_ms": pct(probe.key_ms, 50), "key_p95_ms": pct(probe.key_ms, 95),
        "key_max_ms": round(max(probe.key_ms), 1) if probe.key_ms else -1,
        "keys": len(probe.key_ms)}
    for kind, values in probe.key_by_kind.items():
        out[f"key_{kind}_p50_ms"] = pct(values, 50)
        out[f"key_{kind}_p95_ms"] = pct(values, 95)
    return out


def _sshd_cpu_pids(sshd: Sshd | None) -> list[int]:
    if sshd is None or sshd.proc is None:
        return []
    try:
        return [p.pid for p in psutil.Process(sshd.proc.pid).children(recursive=True)
                if p.name() == "sshd"]
    except psutil.Error:
        return []


async def flood(rate: float, seconds: float, *, keys: bool = False, local: bool = False,
                line: str = ACCESS_LINE, marks: tuple[int, ...] = (100_000,)
                ) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        sshd = None if local else stack.enter_context(private_sshd())
        if sshd is not None:
            d = sshd.user_dir("bench-screen")
        else:
            d = Path(tempfile.mkdtemp(prefix="vc-bench-screen-"))
        stack.callback(shutil.rmtree, d, True)
        log = d / "serve.log"
        log.write_bytes(b"")
        serve = ServeSettings(log=str(log), match=NO_SERVE)
        gpu = GpuSettings(nvidia_smi=str(d / "no-nvidia-smi"))
        if sshd is not None:
            chown_to(log, sshd.user)
            config = sshd.host_config(name="bench", serve=serve.model_dump(),
                                      gpu=gpu.model_dump())
            host: Any = SSHHost(config)
        else:
            config = HostConfig(name="bench", local=True, serve=serve, gpu=gpu)
            host = LocalHost("bench")
        session = HostSession(config, host)
        app = ConsoleApp([session], autostart_checks=False, export_dir=d / "exports")
        probe = ScreenProbe(marks)
        async with app.run_test(size=SIZE):
            await _until(lambda: app.screen_for("bench") is not None, 20, "the host screen")
            await _until(lambda: session.telemetry.follower is not None
                         and session.telemetry.follower.position is not None, 30,
                         "the log follower")
            probe.install(app, "bench")
            await asyncio.sleep(0.3)
            follower_pids = find_pids(b".pyz\0follow\0", str(log).encode())
            console_cpu = CpuMeter([None]).start()
            host_cpu = CpuMeter(follower_pids).start()
            sshd_cpu = CpuMeter(_sshd_cpu_pids(sshd)).start()
            stop_keys = asyncio.Event()
            key_task = asyncio.create_task(
                press_keys(app, probe, stop_keys, host_screen_keys(app))) if keys else None
            gc_meter = stack.enter_context(GcMeter())
            writer = await asyncio.create_subprocess_exec(
                *writer_argv(log, rate, seconds, line), stdout=subprocess.PIPE)
            out, _ = await writer.communicate()
            written, write_s = int(out.split()[0]), float(out.split()[1])
            stopped = time.monotonic()
            caught_up = True
            try:
                await _until(lambda: probe.delivered >= written, DRAIN_S,
                             "the last line on screen")
            except TimeoutError:
                caught_up = False
            stop_keys.set()
            if key_task is not None:
                await key_task
            behind_s = max(0.0, probe.last_at - stopped) if caught_up else -1.0
            span = (write_s + behind_s) if caught_up else time.monotonic() - stopped + write_s
            result = {
                "offered_per_s": round(written / write_s),
                "written": written,
                "delivered": probe.delivered,
                "delivered_per_s": round(probe.delivered / span),
                "caught_up": caught_up,
                "behind_s": round(behind_s, 3),
                "widget_p50_ms": pct(probe.widget_ms, 50),
                "widget_p99_ms": pct(probe.widget_ms, 99),
                "painted_p50_ms": pct(probe.painted_ms, 50),
                "painted_p99_ms": pct(probe.painted_ms, 99),
                "painted_lines": len(probe.painted_ms),
                **key_figures(probe),
                "frames_per_s": round(probe.frames / span, 1),
                "batches_per_s": round(probe.batches / span, 1),
                "console_cpu_pct": console_cpu.read(),
                "cpu_us_per_line": round((cpu_s() - console_cpu.c0)
                                         / max(1, probe.delivered) * 1e6, 2),
                "gc_pct": round(100 * gc_meter.seconds / (time.monotonic() - console_cpu.t0), 2),
                "gc_collections": list(gc_meter.collections),
                "gc_ms_by_generation": [round(1000 * t) for t in gc_meter.by_generation],
                "gc_tracked_objects": len(gc.get_objects()),
                "host_follower_cpu_pct": host_cpu.read(),
                "sshd_cpu_pct": sshd_cpu.read(),
                "peak_rss_mb": peak_rss_mb(),
                "rss_mb": rss_mb(),
                "at_marks": probe.at_marks,
                "transport": "local" if local else "ssh",
            }
            # Stop the stream before the app closes: a flood it fell behind on would
            # otherwise keep arriving while it shuts down.
            await session.close()
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=float, default=10_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--keys", action="store_true", help="measure key latency during the flood")
    p.add_argument("--local", action="store_true", help="this machine, no SSH")
    p.add_argument("--debug", action="store_true", help="DEBUG lines (parsed) instead of access")
    p.add_argument("--memory", action="store_true",
                   help="1M lines at 100k/s; peak RSS at 100k and 1M lines")
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    line = DEBUG_LINE if opts.debug else ACCESS_LINE

    if opts.memory:
        result = asyncio.run(flood(100_000, 10.0, marks=(100_000, 1_000_000), line=line))
    else:
        result = asyncio.run(flood(opts.rate, opts.seconds, keys=opts.keys, local=opts.local,
                                   line=line))
    report(result, opts.json, width=22)
    return 0


if __name__ == "__main__":
    sys.exit(main())
