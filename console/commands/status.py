"""`vllm-console status HOST [--json]`: one snapshot of the host.

GPUs (and where the figures come from), the serve process and its health, the engine config of
the current run, and the spec-decode figures. Exit 0, or 2 when it could not run (bad usage or
configuration, an unreachable host, no Python on it): one line on stderr, never a traceback.
`--json` prints DESIGN.md's object exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from console.commands.common import one_line
from console.connect import host_config_from_args, make_host
from console.display import safe_text
from console.host import HostError
from console.settings import ConfigError
from console.telemetry.oneshot import collect_status
from console.telemetry.snapshot import HostSnapshot


def _num(value: float | None, fmt: str = ".0f", unit: str = "") -> str:
    return "?" if value is None else f"{value:{fmt}}{unit}"


def render(snap: HostSnapshot) -> str:
    """The human form: a few aligned lines."""
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
    if serve["running"]:
        lines.append(f"serve   running, pid {serve['pid']}, {serve['health']}"
                     + (f" at {safe_text(snap.serve.url, 300)}" if snap.serve.url else ""))
        lines.append(f"        {safe_text(serve['cmdline'] or '', 400)}")
    else:
        lines.append(f"serve   not running ({serve['health']})")
    if snap.startup.state.value not in ("unknown", "not-running"):
        lines.append(f"start   {safe_text(snap.startup.text, 300)}")
    engine = data["engine"]
    spec = engine["speculative_config"]
    lines.append(f"engine  vLLM {safe_text(str(engine['version'] or '?'), 100)}, "
                 f"model {safe_text(str(engine['model'] or '?'), 400)}")
    if spec:
        lines.append(f"        speculative: {safe_text(str(spec['method'] or '?'), 100)} "
                     f"{safe_text(str(spec['model'] or '?'), 400)}, "
                     f"{spec['num_spec_tokens'] or '?'} tokens")
    lines.append(f"spec    {safe_text(snap.spec_decode.summary, 400)}")
    figures = snap.spec_decode.latest or snap.spec_decode.totals
    if figures is not None and figures.per_position:
        rates = " ".join(f"{r:.2f}" for r in figures.per_position)
        lines.append(f"        per position: {rates}")
    if snap.serve.log:
        # A file name on the host may hold anything, escape sequences included.
        lines.append(f"log     {safe_text(snap.serve.log, 1000)}")
    lines.extend(f"note    {safe_text(note, 300)}" for note in snap.notes)
    return "\n".join(lines)


async def _collect(args: argparse.Namespace) -> HostSnapshot:
    config = host_config_from_args(args)
    host = make_host(config)
    try:
        return await collect_status(host, config)
    finally:
        await host.close()


def run(args: argparse.Namespace) -> int:
    """Print one snapshot; 0, or 2 when it could not run."""
    try:
        snap = asyncio.run(_collect(args))
    except (ConfigError, HostError) as exc:
        print(f"vllm-console status: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # the contract: a one-line reason, never a traceback
        print(f"vllm-console status: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(snap.status_json(), indent=2))
    else:
        print(render(snap))
    return 0
