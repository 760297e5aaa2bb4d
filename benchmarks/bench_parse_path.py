"""The log-line hot path, stage by stage, before and after its fast paths: lines/s on one core.

    .venv/bin/python -m benchmarks.bench_parse_path [--mib 4] [--rounds 5] [--baseline REV]

Each workload is a few MiB of log cut into 256 KiB chunks, as the host follower sends them, and
goes through the real functions:

- split: `LineAssembler.feed` (decode, split into lines);
- follower: `LogFollower._data` (the same, escapes stripped, `LogEntry`s, the ring);
- parse_line / classify: one call per line (on the follower's lines);
- feed_texts: `RunLog.feed_texts` on each chunk's lines (what the TUI's telemetry does);
- full: `LogFollower._data` then `RunLog.feed_texts` on the batch, the app's path to the panes;
- split+feed_texts: `LineAssembler.feed` then `RunLog.feed_texts`, without the follower's ring.

Workloads: `debug`, a DEBUG flood (bench_follower's line, numbered and stamped); `mixed`, a busy
server at DEBUG level (engine steps, scheduler and output lines, access and request log lines,
a throughput and a SpecDecoding line now and then, warnings); `colour`, the same with vLLM's
coloured process tag (`\\x1b[1;36m(APIServer pid=1)\\x1b[0;0m`, as in real serve logs); and
`startup`, an engine starting (so progress bars count) whose tqdm bars redraw with a bare `\\r`;
`unique`, DEBUG lines that each name another request (hex ids: no two alike even with their
numbers left out, the sieve's cache never helps).

`--baseline REV` runs the same stages on the tree of commit REV (its `console/` exported to a
temporary folder) in alternation with this tree, `--rounds` times each, and keeps the best
round of each stage: other work on a shared machine only ever slows a round down. Both trees
must give the same lines, fields, events and run state: a digest of all of them is compared.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The tree before the fast paths (the commit this benchmark was written on).
BASELINE = "ecf40e053622eea26502da62d2dde6ecfef62c2c"
CHUNK = 256 * 1024
STAGES = ("split", "follower", "parse_line", "classify", "feed_texts", "full",
          "split+feed_texts")
WORKLOADS = ("debug", "mixed", "colour", "startup", "unique")
TAG = {"engine": "(EngineCore_DP0 pid=7)", "api": "(APIServer pid=1)"}


def _lines(workload: str, count: int) -> list[str]:
    """`count` log lines of the workload, with their endings."""
    out: list[str] = []

    def tag(proc: str) -> str:
        if workload == "colour":
            return f"\x1b[1;36m{TAG[proc]}\x1b[0;0m "
        return TAG[proc] + " "

    if workload == "startup":
        out.append(f"{tag('engine')}INFO 05-14 10:00:00 [core.py:66] Initializing a V1 LLM "
                   "engine (v0.11.0) with config: model='/m/Qwen3-8B', "
                   "speculative_config=None, tokenizer='/m/Qwen3-8B'\n")
        out.append(f"{tag('engine')}INFO 05-14 10:00:01 [gpu_model_runner.py:66] Starting "
                   "to load model /m/Qwen3-8B...\n")
    stamp = 1_715_680_923_000_000_000
    for i in range(count - len(out)):
        s = 3 + i // 20_000  # the clock moves on: ~20k lines per second
        ts = f"05-14 10:{s // 60 % 60:02d}:{s % 60:02d}"
        if workload == "unique":  # no two alike, even with the numbers left out
            out.append(f"{tag('engine')}DEBUG {ts} [v1/core/sched/scheduler.py:700] Request "
                       f"chatcmpl-{i * 2654435761 % 2**64:016x} scheduled: {i % 4096} prompt "
                       f"tokens, {i % 7} computed blocks\n")
            continue
        if workload == "debug":
            out.append(f"{tag('engine')}DEBUG {ts} [core.py:123] EngineCore step: scheduled 3 "
                       f"requests, 1 waiting, KV blocks 1234/55082 n={i} t={stamp + i}\n")
            continue
        if workload == "startup" and i % 50 == 49:
            pct = i * 100 // count
            out.append(f"Loading safetensors checkpoint shards: {pct:3d}% Completed | "
                       f"{pct // 10}/11 [00:{s % 60:02d}<00:07, 1.52it/s]\r")
            continue
        k = i % 10
        if i % 1000 == 999:
            out.append(f"{tag('api')}INFO {ts} [loggers.py:123] Engine 000: Avg prompt "
                       f"throughput: {i % 997}.0 tokens/s, Avg generation throughput: 19.0 "
                       "tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
                       "Prefix cache hit rate: 36.2%\n")
        elif i % 1000 == 500:
            out.append(f"{tag('api')}INFO {ts} [metrics.py:53] SpecDecoding metrics: Mean "
                       "acceptance length: 2.63, Accepted throughput: 76.80 tokens/s, Drafted "
                       "throughput: 235.49 tokens/s, Accepted: 768 tokens, Drafted: 2355 "
                       "tokens, Per-position acceptance rate: 0.726, 0.467, 0.240, Avg Draft "
                       "acceptance rate: 32.6%\n")
        elif i % 5000 == 2500:
            out.append(f"{tag('engine')}WARNING {ts} [scheduler.py:301] Sequence group "
                       f"{i} is preempted by PreemptionMode.RECOMPUTE mode because there is "
                       "not enough KV cache space.\n")
        elif k < 4:
            out.append(f"{tag('engine')}DEBUG {ts} [core.py:123] EngineCore step: scheduled "
                       f"{i % 7} requests, {i % 3} waiting, KV blocks {i % 55082}/55082\n")
        elif k < 6:
            out.append(f"{tag('engine')}DEBUG {ts} [v1/core/sched/scheduler.py:612] "
                       f"Scheduled {i % 5} new, {i % 11} cached requests; {i % 4096} tokens "
                       f"(chunked prefill {i % 2})\n")
        elif k == 6:
            out.append(f"{tag('api')}DEBUG {ts} [v1/engine/async_llm.py:412] Output "
                       f"processed for {i % 9} requests in {i % 1000 / 100:.2f} ms\n")
        elif k == 7:
            out.append(f"{tag('api')}INFO:     127.0.0.1:{40000 + i % 20000} - \"POST "
                       "/v1/chat/completions HTTP/1.1\" 200 OK\n")
        elif k == 8:
            out.append(f"{tag('api')}INFO {ts} [logger.py:43] Received request "
                       f"chatcmpl-{i * 2654435761 % 2**64:016x}: prompt: 'Summarise the "
                       "attached report in three bullet points.', params: SamplingParams(n=1, "
                       "temperature=0.7, top_p=0.95, max_tokens=512)\n")
        else:
            out.append(f"{tag('engine')}DEBUG {ts} [v1/worker/gpu_model_runner.py:2190] "
                       f"Batch {i}: {i % 64} decode, {i % 3} prefill, {i % 8192} tokens\n")
    return out


def _chunks(workload: str, mib: float) -> list[bytes]:
    per_line = len("".join(_lines(workload, 200)).encode()) / 200
    data = "".join(_lines(workload, int(mib * 1024 * 1024 / per_line))).encode()
    return [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def worker(mib: float, workloads: tuple[str, ...] = WORKLOADS) -> dict[str, Any]:
    """One round of every stage on every workload, with the tree on sys.path; lines/s and a
    digest of what came out."""
    from vllm_console.console.hostclient.follower import LogFollower
    from vllm_console.console.parsers.classifier import classify
    from vllm_console.console.parsers.lines import LineAssembler
    from vllm_console.console.parsers.prefix import parse_line
    from vllm_console.console.telemetry.logclock import LogClock
    from vllm_console.console.telemetry.run_log import RunLog
    from vllm_console.console.transport.local_host import LocalHost

    host = LocalHost("bench")

    def measure(chunks: list[bytes]) -> dict[str, Any]:
        def run_log() -> RunLog:
            return RunLog(LogClock(tz_offset_s=0.0))

        def split() -> list[list[str]]:
            asm = LineAssembler()
            return [asm.feed(chunk) for chunk in chunks]

        def follower(feed: RunLog | None = None) -> list[Any]:
            f = LogFollower(host, "/dev/null", max_lines=100_000)
            off, out = 0, []
            for chunk in chunks:
                f._data({"t": "data", "off": off, "n": len(chunk)}, chunk)
                off += len(chunk)
                texts = [e.text for e in f._pending]
                f._pending = []
                out.append(feed.feed_texts(texts, 1.7e9) if feed is not None else texts)
            return out

        def split_feed(feed: RunLog) -> list[Any]:
            asm = LineAssembler()
            return [feed.feed_texts(asm.feed(chunk), 1.7e9) for chunk in chunks]

        t_split, raw = _timed(split)
        t_follow, batches = _timed(follower)
        texts = [t for batch in batches for t in batch]
        t_parse, parsed = _timed(lambda: [parse_line(t) for t in texts])
        t_classify, events = _timed(lambda: [classify(line) for line in parsed])
        log_a, log_b, log_c = run_log(), run_log(), run_log()
        t_feed, fed = _timed(lambda: [log_a.feed_texts(b, 1.7e9) for b in batches])
        t_full, full = _timed(lambda: follower(log_b))
        t_split_feed, split_fed = _timed(lambda: split_feed(log_c))
        n = len(texts)
        digest = hashlib.sha256()
        for part in (raw, batches, parsed, [(e.kind, e.payload) for e in events], fed, full,
                     [log.info for log in (log_a, log_b)],
                     [log.startup.status(1.8e9, True) for log in (log_a, log_b)]):
            digest.update(repr(part).encode())
        # Without the follower the escapes reach feed_texts: same events, other raw texts.
        digest.update(repr([(i, e.kind, e.payload) for b in split_fed for i, e in b[0]]).encode())
        return {
            "lines": n,
            "digest": digest.hexdigest()[:16],
            "rate": {name: n / t for name, t in zip(STAGES, (
                t_split, t_follow, t_parse, t_classify, t_feed, t_full, t_split_feed),
                strict=True)},
        }

    return {workload: measure(_chunks(workload, mib)) for workload in workloads}


def _export(rev: str, into: Path) -> None:
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "console"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")


def _round(tree: Path, mib: float, workloads: tuple[str, ...]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--worker", str(tree), "--mib", str(mib),
                          "--only", ",".join(workloads)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"worker on {tree} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _best(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    best: dict[str, Any] = {}
    for workload in rounds[0]:
        first = rounds[0][workload]
        best[workload] = {
            "lines": first["lines"],
            "digests": sorted({r[workload]["digest"] for r in rounds}),
            "rate": {s: max(r[workload]["rate"][s] for r in rounds) for s in STAGES},
        }
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=float, default=4.0, help="log per workload (default 4 MiB)")
    p.add_argument("--rounds", type=int, default=5, help="rounds per tree; best kept")
    p.add_argument("--baseline", default=BASELINE,
                   help="commit to compare with ('none': this tree only)")
    p.add_argument("--only", default=",".join(WORKLOADS),
                   help=f"workloads, comma-separated (default: {','.join(WORKLOADS)})")
    p.add_argument("--json", action="store_true")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    workloads = tuple(w for w in opts.only.split(",") if w)
    if unknown := set(workloads) - set(WORKLOADS):
        p.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    if opts.worker:
        sys.path.insert(0, opts.worker)
        print(json.dumps(worker(opts.mib, workloads)))
        return 0

    trees: dict[str, Path] = {"after": ROOT}
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as tmp:
        if opts.baseline != "none":
            try:
                _export(opts.baseline, Path(tmp))
                trees = {"before": Path(tmp), "after": ROOT}
            except subprocess.CalledProcessError:
                print(f"(baseline {opts.baseline} not found: this tree only)", file=sys.stderr)
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(opts.rounds):
            for name, tree in trees.items():
                rounds[name].append(_round(tree, opts.mib, workloads))
    best = {name: _best(r) for name, r in rounds.items()}
    if opts.json:
        print(json.dumps(best, indent=1))
        return 0
    names = list(trees)
    for workload in workloads:
        lines = best["after"][workload]["lines"]
        digests = {name: best[name][workload]["digests"] for name in names}
        same = len({d for ds in digests.values() for d in ds}) == 1
        note = ("results identical" if same else f"RESULTS DIFFER: {digests}") \
            if len(names) > 1 else f"digest {digests['after']}"
        print(f"\n{workload}: {lines} lines, best of {opts.rounds} rounds; {note}")
        head = "".join(f"{name:>14}" for name in names)
        print(f"  {'stage':<18}{head}{'speed-up':>10}" if len(names) > 1 else
              f"  {'stage':<18}{head}")
        for stage in STAGES:
            rates = [best[name][workload]["rate"][stage] for name in names]
            cells = "".join(f"{r / 1000:>12.0f}k/s" for r in rates)
            ratio = f"{rates[-1] / rates[0]:>9.1f}x" if len(names) > 1 else ""
            print(f"  {stage:<18}{cells}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
