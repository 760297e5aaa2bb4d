"""`vllm-console fleet`: every vLLM server a Prometheus scrapes, one row each, no SSH.

`--json` prints one refresh (README: schema) and exits 0, or 2 when there is no table at all
(Prometheus unreachable, the `up` query refused); the object is printed either way. Without it,
the fleet table refreshes every 5 s; Enter on a row opens the full console (SSH), the URL-only
view or the Prometheus-only view of that server, and leaving it comes back to the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from console.commands.common import CommandError, one_line
from console.commands.tui import check_theme
from console.settings import ConfigError, FleetSettings, HostsFile, load_hosts_file


def fleet_settings(args: argparse.Namespace, hosts: HostsFile) -> FleetSettings:
    """The `[fleet]` table with the command line's options over it. Raises ConfigError."""
    updates = {k: v for k, v in (("prometheus", args.prometheus), ("selector", args.selector),
                                 ("host_label", args.host_label)) if v}
    fleet = hosts.fleet.model_copy(update=updates)
    if not fleet.prometheus:
        raise ConfigError("no Prometheus: give --prometheus URL, or `prometheus = \"URL\"` in "
                          "the hosts file's [fleet] table")
    return fleet


def run(args: argparse.Namespace) -> int:
    from console.sources.fleet_hosts import hosts_by_label
    from console.sources.fleet_query import query_fleet
    from console.sources.prometheus import PromError, Prometheus, check_selector

    check_theme(args.theme)
    path = Path(args.config).expanduser() if args.config else None
    hosts = load_hosts_file(path, required=path is not None)
    fleet = fleet_settings(args, hosts)
    try:
        selector = check_selector(fleet.selector)
        prom = Prometheus(fleet.prometheus)
    except PromError as exc:  # cli.main says it on one line, exit 2
        raise CommandError(str(exc)) from None
    if args.json:
        report = asyncio.run(query_fleet(prom, selector=selector, host_label=fleet.host_label,
                                         profile=fleet.profile))
        mapped = hosts_by_label(hosts, [s.key for s in report.servers])
        report = report.with_hosts(mapped)
        print(json.dumps(report.to_json(), indent=2))
        if report.error:
            print(f"vllm-console: {one_line(report.error)}", file=sys.stderr)
            return 2
        return 0
    from console.fleet_app import run_fleet

    return run_fleet(prom, fleet, selector, hosts, args)
