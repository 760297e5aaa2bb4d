"""The report's Prometheus fleet section (`--only promfleet`): how the fleet table grows from
10 to 1,000 servers, and what its queries cost Prometheus."""

from __future__ import annotations

from typing import Any

HEADING = "### Fleet from Prometheus: 10 to 1,000 servers"


def _ok(r: Any) -> bool:
    return isinstance(r, dict) and "error" not in r and "skipped" not in r


def prom_fleet_section(results: dict[str, Any]) -> list[str]:
    """The section from this run's results, else the one the report had (carried over)."""
    from benchmarks.report import carried_over

    runs = results.get("promfleet")
    if not isinstance(runs, dict):
        return carried_over(HEADING, "promfleet")
    sizes = [runs[k] for k in sorted(runs, key=int) if _ok(runs[k])]
    out = [f"{HEADING} (`bench_prom_fleet`, `--only promfleet`)", "",
           "Backfilled, not live: `promtool tsdb create-blocks-from openmetrics` writes 15 s "
           "samples of every series the fleet queries (vLLM's gauges and counters, two engines "
           "on every tenth server, dcgm-exporter's GPU gauges for every other host, one server "
           "in 20 down, one in 7 with the broken drafter's acceptance) from 3 minutes before the "
           "run to 15 after; Debian's Prometheus 2.42 serves those blocks on the same cores. The "
           "real `fleet` app (`FleetApp`, headless, 200x50) refreshes every 5 s while `down`/"
           "`up` are pressed every 0.25 s. Targets at 1,000 servers: first table <= 2 s, key "
           "p95 <= 100 ms while refreshing, console RSS <= 200 MB.", "",
           "| servers | first table | refresh p50 / max (queries + assembly) | key p50 / p95 / "
           "max | console RSS now / peak | Prometheus per refresh: eval, samples | Prometheus "
           "CPU / RSS |",
           "|---|---|---|---|---|---|---|"]
    for r in sizes:
        out.append(
            f"| {r['servers']:,} | {r['first_table_s']:.2f} s | {r['refresh_p50_ms']:.0f} / "
            f"{r['refresh_max_ms']:.0f} ms | {r['key_p50_ms']:.1f} / {r['key_p95_ms']:.1f} / "
            f"{r['key_max_ms']:.0f} ms | {r['rss_mb']:.0f} / {r['peak_rss_mb']:.0f} MB | "
            f"{r['queries_eval_ms_total']:.0f} ms, {r['queries_samples_total']:,} | "
            f"{r['prometheus_cpu_pct']:.1f} % / {r['prometheus_rss_mb']:.0f} MB |")
    failed = [f"{k}: {runs[k].get('error', '')[:200]}" for k in runs if not _ok(runs[k])]
    out += [""] + ([f"Failed: {'; '.join(failed)}", ""] if failed else [])
    if sizes:
        big = sizes[-1]
        out += [f"Each query at {big['servers']:,} servers (`stats=all`: Prometheus's own "
                "evaluation time and the samples it touched; wall is the HTTP round trip and "
                "JSON here):", "", "| query | eval | samples | series | wall |",
                "|---|---|---|---|---|"]
        for name, q in big["queries"].items():
            out.append(f"| `{name}` | {q['eval_ms']:.1f} ms | {q['samples']:,} | "
                       f"{q['series']:,} | {q['wall_ms']:.0f} ms |")
        out.append("")
    return out
