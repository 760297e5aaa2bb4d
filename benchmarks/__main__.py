"""Run every benchmark, print the table, and (for a full run) write docs/benchmarks.md.

    .venv/bin/python -m benchmarks              # everything, ~10-15 min on 2 cores
    .venv/bin/python -m benchmarks --quick      # a short run (< 3 min); prints only
    .venv/bin/python -m benchmarks --only fleet,idle
    .venv/bin/python -m benchmarks --quick --write   # also write the report

Sections (names for --only): screen, tail, toolong, local, memory (the log path; `logpath` is
all five), stream (the console's CPU while a log streams at 1k and 10k lines/s with nobody
typing: the stream's own cost, beside `screen`'s with keys pressed), frames (the screen's CPU
time alone), perline, idle, anchors (htop/btop idle,
lnav on the flood), start, url (URL-only mode beside vllm-htop on one server, and the serving
strip's cost), chain, fleet, agent, follower, discovery (one helper run for 1 and 16
servers on a host); and `real` (the console on a real
`vllm serve`: host cost under load, restart timeline), which runs only when --only names
it: it needs the real-vLLM fixture (built on first use, ~2.5 GB) and takes ~5 minutes; and
`promfleet` (the Prometheus fleet at 10, 100 and 1,000 backfilled servers, ~4 minutes). Each
measurement runs in a fresh process (`python -m benchmarks.bench_*`), so that its memory peak
is its own. Only a full run writes docs/benchmarks.md unless --write; its findings come from
benchmarks/findings.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, run_json
from benchmarks.machine import busy_processes, describe
from benchmarks.report import render

LOGPATH = ("screen", "tail", "toolong", "local", "memory")
SECTIONS = (*LOGPATH, "stream", "frames", "perline", "idle", "anchors", "start", "url",
            "chain", "fleet", "agent", "follower", "discovery")
ON_REQUEST = ("real", "promfleet")  # not in the default run: only when --only names them


@dataclass(frozen=True)
class Plan:
    quick: bool

    @property
    def rates(self) -> tuple[int, ...]:
        return (10_000, 100_000) if self.quick else (1_000, 10_000, 50_000, 100_000)

    @property
    def seconds(self) -> float:
        return 2.0 if self.quick else 6.0

    @property
    def ceiling(self) -> bool:
        """Also a run with the writer as fast as it goes (~600k lines/s here)."""
        return not self.quick


CEILING_RATE = 1_000_000
CEILING_SECONDS = 1.0


def _label(rate: int) -> str:
    return f"{rate // 1000}k"


def _floods(plan: Plan, module: str, extra: list[str], rates: tuple[int, ...] | None = None,
            ceiling: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rate in rates or plan.rates:
        out[_label(rate)] = run_json(module, ["--rate", str(rate), "--seconds",
                                              str(plan.seconds), *extra], timeout=240)
        _progress(f"  {module} {' '.join(extra)} {_label(rate)}: {_brief(out[_label(rate)])}")
    if plan.ceiling and ceiling:
        out["max"] = run_json(module, ["--rate", str(CEILING_RATE), "--seconds",
                                       str(CEILING_SECONDS), *extra], timeout=240)
        _progress(f"  {module} {' '.join(extra)} max: {_brief(out['max'])}")
    return out


def _brief(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"ERROR {result['error'][:200]}"
    keys = ("delivered_per_s", "behind_s", "painted_p99_ms", "key_p95_ms", "peak_rss_mb")
    return " ".join(f"{k}={result[k]}" for k in keys if k in result)


def run_screen(plan: Plan) -> dict[str, Any]:
    return _floods(plan, "bench_screen", ["--keys"])


def run_stream(plan: Plan) -> dict[str, Any]:
    """The flood of `screen` at the CPU target's rates, nobody typing: what the stream itself
    costs (`screen` presses a key every 0.25 s, ~26 ms of CPU each)."""
    return _floods(plan, "bench_screen", [], rates=(1_000, 10_000), ceiling=False)


def run_tail(plan: Plan) -> dict[str, Any]:
    return _floods(plan, "bench_tail", [])


def run_toolong(plan: Plan) -> dict[str, Any]:
    out = _floods(plan, "bench_toolong", ["--keys"])
    if not plan.quick:
        out["memory"] = run_json("bench_toolong", ["--memory"], timeout=240)
        _progress(f"  toolong memory: {_brief(out['memory'])}")
    return out


def run_local(plan: Plan) -> dict[str, Any]:
    return _floods(plan, "bench_screen", ["--local", "--keys"], rates=(100_000,))


def run_memory(plan: Plan) -> dict[str, Any]:
    if plan.quick:
        return {"skipped": "quick run: the 100k mark of the 100k lines/s run stands in"}
    return run_json("bench_screen", ["--memory"], timeout=300)


def run_frames(plan: Plan) -> dict[str, Any]:
    return {_label(rate): run_json("bench_frames", ["--rate", str(rate), "--seconds",
                                                    str(plan.seconds)], timeout=120)
            for rate in (1_000, 10_000, 100_000)}


def run_perline(plan: Plan) -> dict[str, Any]:
    return run_json("bench_perline", ["--repeats", "3" if plan.quick else "7"], timeout=120)


def run_idle(plan: Plan) -> dict[str, Any]:
    args = ["--settle", "8", "--seconds", "10"] if plan.quick else \
        ["--settle", "15", "--seconds", "30"]
    return run_json("bench_idle", args, timeout=300)


def run_anchors(plan: Plan) -> dict[str, Any]:
    """htop and btop idle, lnav on the flood (each skipped, and said so, when absent)."""
    seconds = "10" if plan.quick else "20"
    out = {tool: run_json("bench_anchors", ["--idle", tool, "--seconds", seconds], timeout=120)
           for tool in ("htop", "btop")}
    for rate in (1_000, 10_000) if plan.quick else (1_000, 10_000, 100_000):
        out[_label(rate)] = run_json("bench_anchors", ["--lnav", "--rate", str(rate),
                                                       "--seconds", str(plan.seconds)],
                                     timeout=240)
        _progress(f"  lnav {_label(rate)}: {_brief(out[_label(rate)])}")
    return out


def run_start(plan: Plan) -> dict[str, Any]:
    return run_json("bench_start", ["--runs", "1" if plan.quick else "3"], timeout=300)


def run_url(plan: Plan) -> dict[str, Any]:
    args = ["--runs", "1", "--settle", "3", "--seconds", "6"] if plan.quick else \
        ["--runs", "5", "--settle", "10", "--seconds", "30"]
    return run_json("bench_url", args, timeout=400)


def run_chain(plan: Plan) -> dict[str, Any]:
    return run_json("bench_chain", ["--runs", "1" if plan.quick else "3"], timeout=400)


def run_fleet(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sizes = (1, 8) if plan.quick else (1, 8, 32)
    timing = ["--settle", "3", "--seconds", "6"] if plan.quick else \
        ["--settle", "5", "--seconds", "15"]
    for n in sizes:
        out[str(n)] = run_json("bench_fleet", ["--hosts", str(n), *timing], timeout=400)
        _progress(f"  fleet {n}: {_brief(out[str(n)])}")
    return out


def run_agent(plan: Plan) -> dict[str, Any]:
    if plan.quick:
        return {"skipped": "quick run"}
    return run_json("bench_agent", ["--seconds", "10"], timeout=200)


def run_follower(plan: Plan) -> dict[str, Any]:
    if plan.quick:
        return {"skipped": "quick run"}
    return run_json("bench_follower", ["--seconds", "3"], timeout=300)


def run_discovery(plan: Plan) -> dict[str, Any]:
    return run_json("bench_discovery", ["--servers", "1,16", "--runs",
                                        "3" if plan.quick else "7"], timeout=400)


def run_real(plan: Plan) -> dict[str, Any]:
    args = ["--rounds", "1", "--baseline", "10", "--loaded", "15", "--idle", "10",
            "--restarts", "1"] if plan.quick else ["--rounds", "3", "--restarts", "3"]
    return run_json("bench_real_vllm", args, timeout=1500)


def run_promfleet(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in (10, 100) if plan.quick else (10, 100, 1000):
        out[str(n)] = run_json("bench_prom_fleet", ["--servers", str(n), "--seconds",
                                                    "10" if plan.quick else "30"], timeout=900)
        _progress(f"  promfleet {n}: {_brief(out[str(n)])}")
    return out


RUNNERS: dict[str, Callable[[Plan], dict[str, Any]]] = {
    "screen": run_screen, "stream": run_stream, "tail": run_tail, "toolong": run_toolong,
    "local": run_local, "memory": run_memory, "frames": run_frames, "perline": run_perline,
    "idle": run_idle, "anchors": run_anchors, "start": run_start, "url": run_url,
    "chain": run_chain, "fleet": run_fleet, "agent": run_agent, "follower": run_follower,
    "discovery": run_discovery,
    "real": run_real, "promfleet": run_promfleet,
}


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _commit() -> str:
    """HEAD, and the tracked files changed in the working tree (what was measured); for a
    copy without git (a snapshot of a busy tree), what VC_BENCH_COMMIT says."""
    if not (ROOT / ".git").exists():
        return os.environ.get("VC_BENCH_COMMIT", "unknown (no git here)")
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    changed = [line[3:] for line in status.splitlines()
               if not line[3:].startswith(("benchmarks/", "docs/"))]
    return (head or "unknown") + (f" + uncommitted changes to {', '.join(changed)}"
                                  if changed else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks",
                                description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a short run (< 3 min)")
    p.add_argument("--only", metavar="NAME[,NAME]",
                   help=f"only these sections: {', '.join((*SECTIONS, *ON_REQUEST))}, "
                        "logpath")
    p.add_argument("--write", action="store_true",
                   help="write docs/benchmarks.md even for --quick / --only")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"),
                   help="where the report goes (default docs/benchmarks.md)")
    p.add_argument("--json", metavar="PATH", help="also save the raw results as JSON")
    opts = p.parse_args(argv)
    names = list(SECTIONS)
    if opts.only:
        wanted = [n.strip() for n in opts.only.split(",") if n.strip()]
        wanted = [x for n in wanted for x in (LOGPATH if n == "logpath" else (n,))]
        unknown = [n for n in wanted if n not in RUNNERS]
        if unknown:
            p.error(f"unknown section(s) {', '.join(unknown)}; one of "
                    f"{', '.join((*SECTIONS, *ON_REQUEST))}, logpath")
        names = [n for n in (*SECTIONS, *ON_REQUEST) if n in wanted]
    plan = Plan(quick=opts.quick)
    toolong = ""
    if "toolong" in names:
        from benchmarks.bench_toolong import version

        try:
            toolong = version()
        except (OSError, RuntimeError) as exc:
            toolong = f"unavailable: {exc}"
    machine = describe(toolong)
    commit_at_start = _commit()
    results: dict[str, Any] = {}
    started = time.monotonic()
    for name in names:
        t = time.monotonic()
        load = os.getloadavg()[0]
        _progress(f"[{time.monotonic() - started:5.0f} s] {name} (load {load:.2f})")
        results[name] = RUNNERS[name](plan)
        results[name + "@"] = {"seconds": round(time.monotonic() - t, 1), "load": round(load, 2)}
    elapsed = time.monotonic() - started
    load = os.getloadavg()
    machine["Load average at end"] = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    machine["Other processes busy at end (> 20% of a core)"] = busy_processes()
    commit = _commit()
    if commit != commit_at_start:  # the tree changed under the run: say which part saw what
        commit = f"{commit_at_start} at the start, {commit} at the end"
    meta = {"commit": commit, "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "quick": plan.quick, "elapsed_s": round(elapsed), "sections": names}
    text = render(results, machine, meta)
    print(text)
    if opts.json:
        Path(opts.json).write_text(json.dumps({"meta": meta, "machine": machine,
                                               "results": results}, indent=2))
    if opts.write or (not opts.quick and not opts.only):
        out = Path(opts.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        _progress(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
