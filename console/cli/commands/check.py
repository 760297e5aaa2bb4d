"""`vllm-console check HOST [--json]`: the verification chain, headless.

Exit status, the monitoring-plugin convention (Nagios, Icinga, Sensu, Zabbix): 0 OK, every link
passed; 1 WARNING, no link failed but one is `unknown` or `error`; 2 CRITICAL, a link failed;
3 UNKNOWN, it could not run (bad usage or configuration, an unknown or unreadable profile or
reference, an unreachable host). Human output: one line per link (status, id, summary), then
the broken link and root cause, then the hints; colour only on a terminal (and never with
NO_COLOR). `--json`: docs/design.md's object.
Never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TextIO

from vllm_console.checks import (
    ChainReport,
    ProfileError,
    Reference,
    Status,
    load_profile,
    load_reference_file,
    run_chain,
)
from vllm_console.checks.models import EXIT_UNKNOWN
from vllm_console.checks.restart_hint import HowToRestart
from vllm_console.console.cli.commands.common import EXPECTED as COMMON_EXPECTED
from vllm_console.console.cli.commands.common import emit, emit_json, host_words
from vllm_console.console.output.display import safe_text
from vllm_console.console.transport.connect import host_config_from_args, make_host

# `cli.main` reports these on one line with exit 3: UNKNOWN, the chain could not run.
COULD_NOT_RUN = EXIT_UNKNOWN
EXPECTED = (*COMMON_EXPECTED, ProfileError)

_COLOURS = {Status.PASS: "32", Status.FAIL: "31", Status.UNKNOWN: "33", Status.ERROR: "35"}


def _paint(text: str, status: Status, colour: bool) -> str:
    return f"\x1b[{_COLOURS[status]}m{text}\x1b[0m" if colour else text


def render(report: ChainReport, *, colour: bool = False) -> str:
    """The human table: links, then broken link and root cause, then hints."""
    width = max(len(link.id) for link in report.links)
    lines = [f"{report.host}: {report.profile} chain"]
    lines += [safe_text(warning, 600) for warning in report.warnings]
    for link in report.links:
        status = _paint(f"{link.status.value.upper():<7}", link.status, colour)
        lines.append(f"  {status}  {link.id:<{width}}  {safe_text(link.summary, 400)}")
    lines.append("")
    if report.broken_link is None:
        lines.append("every link passed")
    else:
        cause = report.root_cause or "none proven (no link failed with its prerequisites " \
                                     "passing)"
        lines.append(f"broken link: {report.broken_link}    root cause: {cause}")
    hints = [(link.id, link.hint) for link in report.links
             if link.hint and link.status is not Status.PASS]
    hints += [(link.id, link.hint) for link in report.links
              if link.hint and link.status is Status.PASS]
    if hints:
        lines.append("hints:")
        lines += [f"  {link_id}: {safe_text(hint, 600)}" for link_id, hint in hints]
    return "\n".join(lines)


def _use_colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR") and \
        os.environ.get("TERM") != "dumb"


async def _check(args: argparse.Namespace) -> ChainReport:
    config = host_config_from_args(args)
    profile = load_profile(config.checks.profile)
    reference: Reference | None = None
    if config.checks.reference:
        reference = load_reference_file(config.checks.reference)
    host = make_host(config)
    try:
        await host.connect()
        report = await run_chain(host, config.serve, profile=profile, reference=reference,
                                 host_label=config.name,
                                 restart=HowToRestart.for_host(host_words(args, args.host)))
    finally:
        await host.close()
    return report


def run(args: argparse.Namespace) -> int:
    """Run the chain and print the result; the exit status per docs/design.md."""
    report = asyncio.run(_check(args))
    if getattr(args, "json", False):
        emit_json(report.to_json())
    else:
        emit(render(report, colour=_use_colour(sys.stdout)))
    return report.exit_code
