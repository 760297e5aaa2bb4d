"""`vllm-console stacks HOST [--json] [--native] [--pid PID]`: where each vLLM process is.

`py-spy dump` of every process of the chosen server's tree (API server, EngineCore, workers),
on the host, labelled by role (`console.hostclient.stacks`). Exit 0 every process dumped; 1 some
not (each says why); 2 it could not run: no py-spy (one line: how to install it into the
serving environment), not allowed to trace (one line: what to grant), an unreachable host.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from vllm_console.console.cli.commands.common import emit, emit_json
from vllm_console.console.hostclient.stacks import StacksReport, collect_stacks
from vllm_console.console.hostclient.stacks_text import render_stacks
from vllm_console.console.transport.connect import host_config_from_args, make_host


async def _collect(args: argparse.Namespace) -> StacksReport:
    config = host_config_from_args(args)
    host = make_host(config)
    try:
        await host.connect()
        return await collect_stacks(host, config.serve, native=bool(args.native),
                                    pids=list(args.pid or ()))
    finally:
        await host.close()


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(_collect(args))
    if args.json:
        emit_json(report.as_json())
    elif not report.problem:
        emit("\n".join(render_stacks(report, fold=False)))
    if report.problem:
        emit(f"vllm-console stacks: {report.problem}", sys.stderr)
    return report.exit_status
