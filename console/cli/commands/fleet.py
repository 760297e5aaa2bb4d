"""`vllm-console fleet`: every vLLM server a Prometheus scrapes, one row each, no SSH.

`--json` prints one refresh (README: schema) and exits 0, or 2 when there is no table at all
(Prometheus unreachable, the `up` query refused); the object is printed either way. Without it,
the fleet table refreshes every 5 s; Enter on a row opens the full console (SSH), the URL-only
view or the Prometheus-only view of that server, and leaving it comes back to the table.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_console.console.cli.commands.common import (
    EXPECTED,
    CommandError,
    emit,
    emit_json,
    one_line,
)
from vllm_console.console.cli.commands.tui import check_theme
from vllm_console.console.settings import ConfigError, FleetSettings, HostsFile, load_hosts_file

if TYPE_CHECKING:
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.sources.fleet_hosts import OpenTarget
    from vllm_console.console.sources.prometheus import Prometheus


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
    from vllm_console.console.sources.fleet_hosts import hosts_by_label
    from vllm_console.console.sources.fleet_query import query_fleet
    from vllm_console.console.sources.prometheus import PromError, Prometheus, check_selector

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
        emit_json(report.to_json())
        if report.error:
            emit(f"vllm-console: {one_line(report.error)}", sys.stderr)
            return 2
        return 0
    return run_fleet(prom, fleet, selector, hosts, args)


def run_fleet(prom: Prometheus, fleet: FleetSettings, selector: str, hosts: HostsFile,
              args: argparse.Namespace) -> int:
    """The table until `q`; each Enter runs that server's console, then the table again."""
    from vllm_console.console.tui import hangup
    from vllm_console.console.tui.app import ConsoleApp
    from vllm_console.console.tui.fleet_app import FleetApp, TableState

    state = TableState()
    while True:
        app = FleetApp(prom, fleet, selector, hosts, state=state, theme=args.theme)
        status = hangup.run(app)
        if status:  # the terminal went away, or SIGTERM
            return status
        target, state = app.return_value, app.state
        if target is None:
            return 0
        try:
            session = _session(target, hosts, args)
        except EXPECTED as exc:
            state.notice = f"{target.name}: {one_line(exc)}"
            continue
        status = hangup.run(ConsoleApp([session], theme=args.theme))
        if status:
            return status


def _session(target: OpenTarget, hosts: HostsFile, args: argparse.Namespace) -> HostSession:
    from vllm_console.console.sources.fleet_hosts import OpenKind
    from vllm_console.console.sources.url import url_session

    if target.kind is OpenKind.URL:
        return url_session(target.name, target.url, hosts.hosts.get(target.name))
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.transport.connect import host_config_from_args, make_host

    config = host_config_from_args(argparse.Namespace(**{**vars(args), "host": target.name}),
                                   target.name)
    return HostSession(config, make_host(config))
