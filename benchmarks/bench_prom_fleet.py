"""The Prometheus fleet at scale: N vLLM servers' series backfilled into a real Prometheus
(`promtool tsdb create-blocks-from openmetrics`, then Prometheus serving those blocks), and the
real `fleet` TUI (`FleetApp`, headless at 200x50) on it.

    .venv/bin/python -m benchmarks.bench_prom_fleet --servers 1000 [--seconds 30]

Backfilled, not live: 1,000 live targets would be 1,000 HTTP servers on this 2-core machine,
which would measure the machine, not the console. The blocks hold 15 s samples from 3 minutes
before the run to 15 minutes after it (so "now" always has a last minute of counters), for every
series the fleet queries: `up`, requests running/waiting, KV usage, the generation and
spec-decode counters, the TTFT and end-to-end latency histograms (two engines on every tenth
server), and dcgm-exporter's three GPU gauges
for every other host. One server in 20 is down (`up` 0, no vLLM series); one in 7 has the
broken drafter's acceptance (~1.2). Figures:

- `first_table_s`: from the app's start to the first table drawn (all rows);
- refresh every 5 s for `--seconds`: `refresh_ms` (the queries, p50/max) and key latency while
  refreshing (`down`/`up` in the table, to the first frame after the cursor moved);
- the console's RSS (now and peak);
- the queries' cost on Prometheus: per query, its evaluation time and samples touched
  (`stats=all`), and Prometheus's CPU and RSS over the refreshes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psutil
from textual.widgets import DataTable

from benchmarks.bench_screen import ScreenProbe, key_figures, press_keys
from benchmarks.common import CpuMeter, emit, pct, peak_rss_mb, rss_mb
from tests.prometheus import running_prometheus
from vllm_console.console.settings import FleetSettings, HostsFile
from vllm_console.console.sources.fleet_query import queries
from vllm_console.console.sources.prometheus import Prometheus

STEP_S = 15
BEFORE_S = 3 * 60
AFTER_S = 15 * 60
SIZE = (200, 50)
BUCKETS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, None)
"""Upper bounds (times each histogram's scale; None: +Inf) of the backfilled histograms."""
SHARES = (0.2, 0.5, 0.8, 0.92, 0.97, 0.99, 1.0)
"""The share of requests at or under each bound."""


def server_address(i: int) -> str:
    return f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"


def openmetrics(n: int, now: int) -> str:
    """Every series of `n` servers as OpenMetrics text, 15 s apart over the window."""
    stamps = list(range(now - BEFORE_S, now + AFTER_S, STEP_S))
    families: dict[str, tuple[str, list[str]]] = {}

    def add(name: str, kind: str, labels: str, values: list[float]) -> None:
        key = f"{name}-{kind.split('-')[1]}" if kind.startswith("histogram-") else name
        lines = families.setdefault(key, (kind, []))[1]
        lines += [f"{name}{{{labels}}} {v:g} {t}" for v, t in zip(values, stamps, strict=True)]

    k = len(stamps)
    for i in range(n):
        host = server_address(i)
        inst = f'instance="{host}:8000",job="vllm"'
        down = i % 20 == 19
        add("up", "gauge", inst, [0.0 if down else 1.0] * k)
        if i % 2 == 0:
            add("up", "gauge", f'instance="{host}:9400",job="dcgm"', [1.0] * k)
            for g in range(2):
                gpu = f'gpu="{g}",instance="{host}:9400",job="dcgm",modelName="NVIDIA H200"'
                add("DCGM_FI_DEV_GPU_UTIL", "gauge", gpu, [90.0 + (i + j) % 9 for j in range(k)])
                add("DCGM_FI_DEV_FB_USED", "gauge", gpu, [128000.0] * k)
                add("DCGM_FI_DEV_FB_FREE", "gauge", gpu, [15771.0] * k)
        if down:
            continue
        model = 'model_name="Qwen/Qwen3.6-27B"'
        accept = 0.2 if i % 7 == 3 else 5.4  # accepted tokens per draft
        for engine in range(2 if i % 10 == 0 else 1):
            labels = f'{inst},{model},engine="{engine}"'
            add("vllm:num_requests_running", "gauge", labels, [float(4 + i % 5)] * k)
            add("vllm:num_requests_waiting", "gauge", labels, [float(i % 3)] * k)
            add("vllm:kv_cache_usage_perc", "gauge", labels, [0.1 + (i % 50) / 100] * k)
            drafts = [40.0 * STEP_S * j for j in range(k)]
            add("vllm:generation_tokens", "counter", labels,
                [d * (1 + accept) for d in drafts])
            add("vllm:spec_decode_num_drafts", "counter", labels, drafts)
            add("vllm:spec_decode_num_draft_tokens", "counter", labels, [d * 15 for d in drafts])
            add("vllm:spec_decode_num_accepted_tokens", "counter", labels,
                [d * accept for d in drafts])
            # The latency histograms the serving columns read (TTFT, end-to-end): 2 requests
            # a second, spread over the buckets as a loaded server's are.
            requests = [2.0 * STEP_S * j for j in range(k)]
            for family, scale in (("vllm:time_to_first_token_seconds", 0.1),
                                  ("vllm:e2e_request_latency_seconds", 4.0)):
                for bound, share in zip(BUCKETS, SHARES, strict=True):
                    le = "+Inf" if bound is None else f"{bound * scale:g}"
                    add(family, "histogram", f'{labels},le="{le}"',
                        [r * share for r in requests])
                add(family, "histogram-count", labels, requests)
                add(family, "histogram-sum", labels, [r * scale for r in requests])
    out = []
    for name, (kind, lines) in families.items():
        if kind.startswith("histogram-"):
            continue  # written with their family, below
        out.append(f"# TYPE {name} {kind}")
        if kind == "counter":
            lines = [line.replace("{", "_total{", 1) for line in lines]
        elif kind == "histogram":
            lines = [line.replace("{", "_bucket{", 1) for line in lines]
            for part in ("count", "sum"):
                lines += [line.replace("{", f"_{part}{{", 1)
                          for line in families[f"{name}-{part}"][1]]
        out += lines
    return "\n".join(out) + "\n# EOF\n"


def backfill(n: int, storage: Path) -> dict[str, Any]:
    now = int(time.time())
    text = openmetrics(n, now)
    source = storage.parent / "fleet.om"
    source.write_text(text)
    t = time.monotonic()
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source),
                    str(storage)], check=True, capture_output=True, timeout=1200)
    return {"series_lines": text.count("\n"), "openmetrics_mb": round(len(text) / 2**20, 1),
            "backfill_s": round(time.monotonic() - t, 1)}


def query_stats(url: str, expr: str) -> dict[str, Any]:
    qs = urllib.parse.urlencode({"query": expr, "stats": "all"})
    t = time.perf_counter()
    with urllib.request.urlopen(f"{url}/api/v1/query?{qs}", timeout=60) as r:
        body = json.loads(r.read())
    wall = (time.perf_counter() - t) * 1000
    stats = body.get("data", {}).get("stats", {})
    timings, samples = stats.get("timings", {}), stats.get("samples", {})
    return {"wall_ms": round(wall, 1),
            "eval_ms": round(1000 * timings.get("evalTotalTime", -0.001), 1),
            "samples": samples.get("totalQueryableSamples"),
            "series": len(body.get("data", {}).get("result", []))}


async def measure(url: str, n: int, seconds: float, prom_pid: int) -> dict[str, Any]:
    from vllm_console.console.tui.fleet_app import FleetApp

    fleet = FleetSettings(prometheus=url)
    app = FleetApp(Prometheus(url, timeout_s=60), fleet, "", HostsFile(), refresh_s=5.0)
    probe = ScreenProbe()
    refresh_ms: list[float] = []
    t0 = time.monotonic()
    async with app.run_test(size=SIZE):
        probe.install_frames(app)  # type: ignore[arg-type]
        table = app.table.query_one(DataTable)
        while table.row_count < n - (n // 20) or app.refreshes < 1:
            await asyncio.sleep(0.01)
            if time.monotonic() - t0 > 300:
                raise TimeoutError(f"no table within 300 s ({table.row_count} rows)")
        first_table_s = time.monotonic() - t0
        rows = table.row_count
        report = app.table.report
        refresh_ms.append(report.took_s * 1000 if report else -1)
        seen = app.refreshes
        prom_cpu = CpuMeter([prom_pid]).start()
        stop = asyncio.Event()

        def cursor() -> object:
            return table.cursor_row

        task = asyncio.create_task(press_keys(app, probe, stop,  # type: ignore[arg-type]
                                              [("cursor", "down", cursor),
                                               ("cursor", "up", cursor)]))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(0.1)
            if app.refreshes > seen and app.table.report is not None:
                seen = app.refreshes
                refresh_ms.append(app.table.report.took_s * 1000)
        stop.set()
        await task
        servers = app.table.report.servers if app.table.report else ()
        low = sum(1 for s in servers if s.low_acceptance)
        ttft = sum(1 for s in servers if s.ttft_p99_s is not None)
    return {"servers": n, "rows": rows, "low_flagged": low, "ttft_p99_shown": ttft,
            "first_table_s": round(first_table_s, 2), "refreshes": len(refresh_ms),
            "refresh_p50_ms": pct(refresh_ms, 50), "refresh_max_ms": round(max(refresh_ms), 1),
            **key_figures(probe), "rss_mb": rss_mb(), "peak_rss_mb": peak_rss_mb(),
            "prometheus_cpu_pct": prom_cpu.read(),
            "prometheus_rss_mb": rss_mb(prom_pid)}


def run(n: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vc-bench-prom-") as tmp:
        storage = Path(tmp) / "data"
        storage.mkdir()
        # In a process of its own: the 90 MB of OpenMetrics text for 1,000 servers must not
        # count in the console's peak RSS.
        made = json.loads(subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_prom_fleet", "--servers", str(n),
             "--backfill", str(storage)], check=True, capture_output=True, text=True,
            timeout=1200).stdout)
        with running_prometheus([], storage=storage,
                                extra=["--storage.tsdb.retention.time=30d"]) as prom:
            # The blocks are loaded at start; wait until a query sees every server.
            prom.wait_for("count(up)", lambda v: bool(v) and float(v[0]["value"][1]) >= n,
                          timeout=300)
            per_query = {name: query_stats(prom.url, expr)
                         for name, expr in queries("", "instance").items()}
            result = asyncio.run(measure(prom.url, n, seconds, prom.proc.pid))
            result["prometheus_cpu_s_total"] = round(sum(psutil.Process(prom.proc.pid)
                                                         .cpu_times()[:2]), 1)
    return {**made, **result, "queries": per_query,
            "queries_eval_ms_total": round(sum(q["eval_ms"] for q in per_query.values()), 1),
            "queries_samples_total": sum(q["samples"] or 0 for q in per_query.values())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--backfill", metavar="DIR", help="only write the blocks into DIR")
    opts = p.parse_args(argv)
    if opts.backfill:
        emit(backfill(opts.servers, Path(opts.backfill)))
        return 0
    result = run(opts.servers, opts.seconds)
    if opts.json:
        emit(result)
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
