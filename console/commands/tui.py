"""`vllm-console [HOST]`: the console on one host, or on every host of the hosts file."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.commands.common import EXPECTED, fail
from console.connect import host_config_from_args, make_host
from console.settings import ConfigError, load_hosts_file


def run(args: argparse.Namespace) -> int:
    from console.app import ConsoleApp
    from console.session import HostSession

    try:
        if args.host:
            configs = [host_config_from_args(args)]
        else:
            path = Path(args.config).expanduser() if args.config else None
            hosts = load_hosts_file(path, required=path is not None)
            if not hosts.hosts:
                raise ConfigError("no HOST given and no hosts in the hosts file "
                                  "(see `vllm-console --help`; try `vllm-console demo`)")
            configs = [host_config_from_args(args, name) for name in hosts.hosts]
        sessions = [HostSession(c, make_host(c)) for c in configs]
    except EXPECTED as exc:
        return fail(str(exc))
    app = ConsoleApp(sessions, theme=args.theme)
    app.run()
    return app.return_code or 0
