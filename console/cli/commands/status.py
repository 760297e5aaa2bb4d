"""`vllm-console status HOST [--json]`: one snapshot of the host.

GPUs (and where the figures come from, or why there are none), the serve process, its health,
state and uptime, the engine config of the current run, the spec-decode figures, the load (and
whether the log or `/metrics` gave it) and the current run's errors. Exit 0, or 2 when it could
not run (bad usage or configuration, an unreachable host, no Python on it): one line on stderr,
never a traceback. `--json` prints docs/design.md's object exactly; the text says the same.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from vllm_console.console.cli.commands.common import emit, emit_json
from vllm_console.console.hostclient.container_log import describe as describe_container_log
from vllm_console.console.hostclient.discovery import several_line
from vllm_console.console.output.display import safe_text
from vllm_console.console.settings import HostEntry, load_hosts_file
from vllm_console.console.telemetry.oneshot import collect_status
from vllm_console.console.telemetry.snapshot import HostSnapshot
from vllm_console.console.telemetry.startup import format_duration
from vllm_console.console.transport.connect import host_config_from_args, make_host


def _num(value: float | None, fmt: str = ".0f", unit: str = "") -> str:
    return "?" if value is None else f"{value:{fmt}}{unit}"


def render(snap: HostSnapshot, *, url_only: bool = False) -> str:
    """The human form: a few aligned lines (`url_only`: what a URL alone tells)."""
    data = snap.status_json()
    lines = [f"{snap.host}  (GPU figures: {data['gpu_source']})"]
    for gpu in snap.sample.gpus if snap.sample is not None else ():
        lines.append(
            f"  GPU {gpu.index}  {safe_text(gpu.name, 40)}  util {_num(gpu.util_pct, '.0f', '%')}"
            f"  mem {_num(gpu.mem_used_mib)}/{_num(gpu.mem_total_mib)} MiB"
            f"  {_num(gpu.temp_c, '.0f', '°C')}  {_num(gpu.power_w, '.0f', ' W')}")
    if data["gpu_source"] == "none":
        lines.append(f"  no GPU telemetry: {safe_text(snap.agent.detail or '?', 300)}")
    serve = data["serve"]
    if url_only:
        why = "" if snap.readiness.ready or not snap.readiness.detail else \
            f" ({safe_text(snap.readiness.detail, 200)})"
        lines.append(f"serve   {serve['health']}{why} at {safe_text(snap.serve.url or '?', 300)} "
                     "(URL only: the process, its log and the engine config need SSH)")
    elif serve["running"]:
        lines.append(f"serve   running, pid {serve['pid']}, {serve['health']}"
                     + (f" at {safe_text(snap.serve.url, 300)}" if snap.serve.url else ""))
        lines.append(f"        {safe_text(serve['cmdline'] or '', 400)}")
    else:
        lines.append(f"serve   not running ({serve['health']})")
    lines.append(f"state   {_state(serve)}")
    line = several_line(snap.servers)
    if line:
        lines.append(f"servers {safe_text(line, 600)}")
    if snap.startup.state.value not in ("unknown", "not-running"):
        lines.append(f"start   {safe_text(snap.startup.text, 300)}")
    engine = data["engine"]
    spec = engine["speculative_config"]
    model = engine["model"] or ", ".join(snap.readiness.models) or "?"
    lines.append(f"engine  vLLM {safe_text(str(engine['version'] or '?'), 100)}, "
                 f"model {safe_text(str(model), 400)}")
    if spec:
        lines.append(f"        speculative: {safe_text(str(spec['method'] or '?'), 100)} "
                     f"{safe_text(str(spec['model'] or '?'), 400)}, "
                     f"{spec['num_spec_tokens'] or '?'} tokens")
    aux = engine["aux_layers"]
    lines.append(f"        max model len {_num(engine['max_model_len'])}, "
                 f"TP {_num(engine['tensor_parallel_size'])}, "
                 f"DP {_num(engine['data_parallel_size'])}, "
                 f"aux layers {tuple(aux) if aux is not None else '?'}")
    lines.append(f"spec    {safe_text(snap.spec_decode.summary, 400)}")
    figures = snap.spec_decode.latest or snap.spec_decode.totals
    if figures is not None and figures.per_position:
        rates = " ".join(f"{r:.2f}" for r in figures.per_position)
        lines.append(f"        per position: {rates}")
    lines.append(f"load    {_load(data['throughput'])}")
    lines.append(f"serving {serve['engine']}: {safe_text(serve['engine_reason'], 300)}")
    for engine in serve["engines"] or ():
        slow = " (slow: under half the busiest engine's rate)" if engine["slow"] else ""
        lines.append(f"        engine {safe_text(engine['engine'], 20)}: {engine['state']}{slow}, "
                     f"{_num(engine['running'])} running, {_num(engine['waiting'])} waiting, "
                     f"{_num(engine['generation_tps'])} tok/s, TTFT p99 "
                     f"{_num(engine['ttft_p99_s'])} s")
    lines.append(f"latency {_latency(data['latency'])}")
    requests = data["requests"]
    if requests["finished"] is not None or requests["preemptions_total"] is not None:
        finished = ", ".join(f"{safe_text(k, 40)} {v}" for k, v in
                             (requests["finished"] or {}).items())
        lines.append(f"reqs    finished {finished or '?'}; preemptions "
                     f"{_num(requests['preemptions_total'])} (since start-up)")
    errors = data["errors"]
    if not errors:
        lines.append("errors  none in the current run")
    lines.extend(f"error   {e['kind']}: {safe_text(e['line'], 300)}" for e in errors)
    container = serve["container"]
    if container is not None:
        lines.append(f"where   {container['runtime']} container "
                     f"{safe_text(container['name'] or container['id'], 200)} (image "
                     f"{safe_text(container['image'] or '?', 200)}, restart policy "
                     f"{safe_text(container['restart_policy'], 40)})")
    if snap.serve.log:
        # A file name on the host may hold anything, escape sequences included.
        lines.append(f"log     {safe_text(snap.serve.log, 1000)}")
    elif snap.serve.container is not None:
        lines.append(f"log     {safe_text(describe_container_log(snap.serve.container), 300)}")
    lines.extend(f"note    {safe_text(note, 300)}" for note in snap.notes)
    return "\n".join(lines)


def _state(serve: dict[str, Any]) -> str:
    """"ready, up 5m02s (since 2026-12-03T05:41:01Z)", "starting (loading-weights), up 40s",
    "failed (started 2026-...)"."""
    text = serve["state"] + (f" ({serve['phase']})" if serve["phase"] else "")
    if serve["uptime_s"] is not None:
        text += f", up {format_duration(serve['uptime_s'])}"
        return text + (f" (since {serve['started_at']})" if serve["started_at"] else "")
    return text + (f" (started {serve['started_at']})" if serve["started_at"] else "")


def _whence(source: str) -> str:
    return f"(from {'the log' if source == 'log' else '/metrics'})"


def _load(load: dict[str, Any]) -> str:
    """Each figure once, with where it came from: the rates from the stat line, the gauges
    from it too or from the /metrics scrape the engine's state was judged from."""
    if load["source"] is None:
        return "unknown (no stat line in the log, no /metrics)"
    rates = (f"prompt {_num(load['prompt_tps'], '.1f', ' tokens/s')}, "
             f"generation {_num(load['generation_tps'], '.1f', ' tokens/s')}")
    gauges = (f"running {_num(load['running'])}, waiting {_num(load['waiting'])}, "
              f"KV cache {_num(load['kv_cache_usage_pct'], '.1f', '%')}")
    prefix = f"prefix cache hit {_num(load['prefix_cache_hit_rate_pct'], '.1f', '%')}"
    if load["rates_source"] in (None, load["source"]):
        return f"{rates}, {gauges}, {prefix} {_whence(load['source'])}"
    return f"{gauges} {_whence(load['source'])}; {rates}, {prefix} " \
           f"{_whence(load['rates_source'])}"


_LATENCY_NAMES = {"ttft_s": "TTFT", "itl_s": "ITL", "e2e_s": "e2e", "queue_s": "queue"}


def _latency(latency: dict[str, Any]) -> str:
    """"TTFT p50 0.21 s, p99 0.80 s; e2e ... (over the last 2.0 s, /metrics)", or "(since
    the server's start: no request finished in the last 2.5 s, /metrics)"."""
    if latency["source"] is None:
        return "unknown (no two /metrics scrapes)"
    parts = [f"{name} p50 {figures['p50']:.3g} s, p99 {figures['p99']:.3g} s"
             for key, name in _LATENCY_NAMES.items() if (figures := latency[key]) is not None]
    if latency.get("since_start"):
        window = "since the server's start: no request finished while status looked, /metrics"
    else:
        window = f"over the last {latency['window_s']:g} s, /metrics"
    return f"{'; '.join(parts)} ({window})" if parts else f"no request finished ({window})"


# A URL-only entry's status: two rounds this far apart, so that rates and the latency window
# have an interval to speak of (a single scrape gives totals since start-up only).
URL_ROUNDS_S = 2.0


def _url_only(args: argparse.Namespace) -> HostEntry | None:
    """The hosts-file entry HOST names when it has a `url` and no `ssh` (nor `local`)."""
    path = Path(args.config).expanduser() if getattr(args, "config", None) else None
    entry = load_hosts_file(path, required=path is not None).hosts.get(args.host)
    if entry is None or not entry.url or entry.ssh or entry.local or getattr(args, "local",
                                                                             False):
        return None
    return entry


async def _collect_url(name: str, entry: HostEntry, window_s: float | None) -> HostSnapshot:
    """What the URL alone tells (the console's URL-only source): health, model, version,
    every /metrics figure; the rest is said to need SSH. The latency as `collect_status`
    gives it: over `window_s`, else over the two rounds or since the server's start."""
    from vllm_console.console.sources.url import url_session

    session = url_session(name, entry.url, entry)
    telemetry = session.url_telemetry
    if await telemetry.poll():
        await asyncio.sleep(window_s or URL_ROUNDS_S)
        await telemetry.poll()
    snap = session.snapshot
    last = telemetry.last_scrape
    if window_s is None and last is not None:
        snap = replace(snap, serving=snap.serving.with_latency_since_start(last.serving))
    return snap


async def _collect(args: argparse.Namespace) -> HostSnapshot:
    entry = _url_only(args)
    if entry is not None:
        return await _collect_url(args.host, entry, getattr(args, "window", None))
    config = host_config_from_args(args)
    host = make_host(config)
    try:
        return await collect_status(host, config, window_s=getattr(args, "window", None))
    finally:
        await host.close()


def run(args: argparse.Namespace) -> int:
    """Print one snapshot; 0 (`cli.main` says why, with 2, when it could not run)."""
    snap = asyncio.run(_collect(args))
    if getattr(args, "json", False):
        emit_json(snap.status_json())
    else:
        emit(render(snap, url_only=_url_only(args) is not None))
    return 0
