"""URL-only mode side by side with vllm-htop (the peer terminal monitor vLLM operators use), on
the same server in one run, and the serving strip's own cost.

    .venv/bin/python -m benchmarks.bench_url [--runs 5] [--settle 10] [--seconds 30]

The server: the simulated `vllm serve` (incident scenario: a DFlash drafter at 1.17, traffic
flowing), serving the `/metrics` text real vLLM 0.32 prints (latency histograms included), on
loopback. vllm-htop 0.5.0 runs from a venv of its own (`VLLM_HTOP_VENV`, default
/tmp/vc-bench-vllm-htop-venv, `pip install vllm-htop==0.5.0`), with its defaults (a 2 s
refresh); the console with its own (`/health` every 2 s, `/metrics` every 5 s once healthy).
Both in tmux at 160x50, the clock started just before `tmux new-session`, the screen polled
with `capture-pane` (a few ms a poll):

- `first_screen_s`: the tool's frame is up (our header, vllm-htop's `vLLM Monitor` title);
- `first_load_s`: a live figure from `/metrics` (our serving strip's `running N`, vllm-htop's
  `Running : N`);
- `first_acceptance_s`: the acceptance length (ours only: vllm-htop reads no spec-decode series);
- idle, after `--settle` s, over `--seconds`: CPU (% of one core) and RSS of the tool's process.

And per refresh, in this process, on one scrape of that server: what the serving picture adds
(`serving_*`): reading its series out of the `/metrics` text (the parse with and without the
serving families), `ServingWatch.feed` (engine state, windowed percentiles) and drawing the
strip (`ServingStrip.render`, 160 columns). At 1,000 servers the strip is not drawn per server:
the fleet's serving columns are PromQL (`bench_prom_fleet`'s per-query table).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.bench_start import Marks, console_argv, time_marks
from benchmarks.common import CpuMeter, peer_python, rss_mb
from benchmarks.output import report_each
from tests.tmux import Terminal, app_env

HTOP = "vllm-htop==0.5.0"
VENV = Path(os.environ.get("VLLM_HTOP_VENV", "/tmp/vc-bench-vllm-htop-venv"))
_DIGIT = re.compile(r"running \d")
OURS: Marks = {
    "first_screen_s": lambda s: "vllm-console" in s,
    "first_load_s": lambda s: _DIGIT.search(s) is not None,
    "first_acceptance_s": lambda s: re.search(r"acceptance length \d", s) is not None,
}
PEER: Marks = {
    "first_screen_s": lambda s: "vLLM Monitor" in s,
    "first_load_s": lambda s: re.search(r"Running\s+:\s+\d", s) is not None,
}


def htop_argv(url: str) -> list[str]:
    return [str(peer_python(VENV, HTOP, "vllm_htop").parent / "vllm-htop"), "--url", url]


def htop_version() -> str:
    out = subprocess.run([str(peer_python(VENV, HTOP, "vllm_htop")), "-c",
                          "import importlib.metadata as m; print(m.version('vllm-htop'))"],
                         capture_output=True, text=True)
    return f"vllm-htop {out.stdout.strip() or '?'}"


@contextmanager
def server() -> Iterator[str]:
    """The simulated server on a free loopback port, traffic flowing; its URL."""
    from tests.fleet_support import start_sim, wait_http
    from tests.prometheus import free_port
    from vllm_console.console.sim import materialise, stop

    tree = materialise("incident", Path(tempfile.mkdtemp(prefix="vc-bench-url-")) / "h",
                       port=free_port(), startup_s=0.5)
    proc = start_sim(tree, "127.0.0.1")
    try:
        wait_http(f"{tree.url}/health")
        time.sleep(3.0)  # a few requests through: counters and histograms have samples
        yield tree.url
    finally:
        stop(proc, timeout=5)
        stop(tree, timeout=5)


def _env(tmp: Path) -> dict[str, str]:
    env = app_env()
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(tmp / name.lower())
    return env


def starts(argv: list[str], marks: Marks, runs: int, tmp: Path) -> dict[str, Any]:
    """Each mark's median, min and max over `runs` starts (-1.0: never seen)."""
    seen = [time_marks(argv, tmp, marks=marks) for _ in range(runs)]
    out: dict[str, Any] = {}
    for name in marks:
        values = [r[name] for r in seen if r[name] >= 0]
        out[name] = round(statistics.median(values), 3) if values else -1.0
        out[name.removesuffix("_s") + "_range"] = [min(values), max(values)] if values else None
    return out


def idle(argv: list[str], ready: Marks, settle: float, seconds: float, tmp: Path
         ) -> dict[str, Any]:
    env = _env(tmp)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    term = Terminal(argv, env=env)
    term.start()
    try:
        term.wait_for(lambda s: all(seen(s) for seen in ready.values()), timeout=30)
        pid = int(subprocess.run(["tmux", "-L", term.socket, "display-message", "-p", "-t",
                                  "main", "#{pane_pid}"], capture_output=True,
                                 text=True).stdout)
        time.sleep(settle)
        meter = CpuMeter([pid]).start()
        time.sleep(seconds)
        cpu = meter.read()
        rss = rss_mb(pid)
        term.quit()
    finally:
        term.stop()
    return {"idle_cpu_pct": cpu, "rss_mb": rss}


def strip_cost(url: str, scrapes: int = 200) -> dict[str, Any]:
    """What the serving picture costs per refresh for one server (ms), on that server's text."""
    from vllm_console.console.parsers.metrics import parse_metrics
    from vllm_console.console.telemetry.serving import ServingWatch

    body = subprocess.run(["curl", "-s", f"{url}/metrics"], capture_output=True,
                          text=True, check=True).stdout
    families = ("vllm:time_to_first_token", "vllm:inter_token", "vllm:e2e_request",
                "vllm:request_queue", "vllm:request_success", "vllm:num_preemptions",
                "vllm:request_time_per_output", "vllm:request_prefill", "vllm:request_decode",
                "vllm:request_inference", "vllm:time_per_output", "vllm:request_params",
                "vllm:request_prompt", "vllm:request_generation", "vllm:iteration_tokens",
                "vllm:request_max_num_generation")
    without = "\n".join(line for line in body.splitlines()
                        if not any(f in line for f in families))

    def per_call(fn: Any, n: int = scrapes) -> float:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t) * 1000 / n

    full_ms, bare_ms = per_call(lambda: parse_metrics(body)), per_call(
        lambda: parse_metrics(without))
    snapshot = parse_metrics(body)
    watch = ServingWatch()
    at = [1000.0]

    def feed() -> None:
        at[0] += 5.0
        watch.feed(snapshot.serving, at[0])

    feed_ms = per_call(feed)
    status = watch.feed(snapshot.serving, at[0] + 5.0)
    return {"metrics_lines": body.count("\n"),
            "serving_lines": body.count("\n") - without.count("\n"),
            "parse_ms": round(full_ms, 3), "parse_without_serving_ms": round(bare_ms, 3),
            "serving_parse_ms": round(full_ms - bare_ms, 3), "serving_feed_ms": round(feed_ms, 3),
            "serving_render_ms": round(asyncio.run(_render_ms(status, snapshot)), 3)}


async def _render_ms(status: Any, snapshot: Any, n: int = 200) -> float:
    """The strip at 160 columns with every line it has there (trends included)."""
    from textual.app import App

    from vllm_console.widgets.serving_strip import ServingStrip, ServingView

    view = ServingView(
        engine=status.progress.value, engine_reason=status.reason, running=snapshot.running,
        waiting=snapshot.waiting, kv_cache_usage_pct=snapshot.kv_cache_usage_pct,
        prefix_cache_hit_pct=31.0, prompt_tps=650.0, generation_tps=112.0,
        load_source="metrics", load_age_s=2, latency=status.latency, window_s=status.window_s,
        requests=status.requests, serving_age_s=2,
        trends=tuple((name, tuple(float(i % 7) for i in range(60)))
                     for name in ("generation tok/s", "running", "TTFT p99 s")))
    app: App[None] = App()
    async with app.run_test(size=(160, 50)) as pilot:
        strip = ServingStrip()
        await app.mount(strip)
        strip.rows = 4
        strip.view = view
        await pilot.pause()
        t = time.perf_counter()
        for _ in range(n):
            strip.render()
        return (time.perf_counter() - t) * 1000 / n


def bench(runs: int, settle: float, seconds: float) -> dict[str, dict[str, Any]]:
    """`ours` and `peer` (vllm-htop) on the same server, then `strip` (the serving picture's
    cost per refresh)."""
    with tempfile.TemporaryDirectory(prefix="vc-bench-url-") as tmp, server() as url:
        ours, peer = console_argv("--url", url), htop_argv(url)
        return {
            "ours": {**starts(ours, OURS, runs, Path(tmp)),
                     **idle(ours, OURS, settle, seconds, Path(tmp)),
                     "refresh": "/health 2 s, /metrics 5 s"},
            "peer": {"tool": htop_version(), **starts(peer, PEER, runs, Path(tmp)),
                     **idle(peer, PEER, settle, seconds, Path(tmp)), "refresh": "2 s"},
            "strip": strip_cost(url)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--settle", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    report_each(bench(opts.runs, opts.settle, opts.seconds), opts.json,
                "URL-only mode beside vllm-htop (ours, peer) and the serving strip's cost",
                lambda name, r: f"{name}: {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
