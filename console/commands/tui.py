"""`vllm-console [HOST]`: the console on one host, or on every host of the hosts file;
`vllm-console --url URL`: the console on a server's URL alone (no SSH)."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.commands.common import EXPECTED, fail
from console.connect import host_config_from_args, make_host
from console.settings import ConfigError, HostsFile, load_hosts_file


def run(args: argparse.Namespace) -> int:
    from console.app import ConsoleApp
    from console.session import HostSession
    from console.sources.url import url_session

    def session(name: str, hosts: HostsFile) -> HostSession:
        entry = hosts.hosts.get(name)
        if entry is not None and entry.url and not entry.ssh and not entry.local:
            return url_session(name, entry.url, entry)  # URL-only: no SSH
        config = host_config_from_args(args, name)
        return HostSession(config, make_host(config))

    try:
        path = Path(args.config).expanduser() if args.config else None
        hosts = load_hosts_file(path, required=path is not None)
        if args.host:
            sessions = [session(args.host, hosts)]
        elif args.url:
            sessions = [url_session(args.url, args.url)]
        else:
            if not hosts.hosts:
                raise ConfigError("no HOST given and no hosts in the hosts file "
                                  "(see `vllm-console --help`; try `vllm-console demo`)")
            sessions = [session(name, hosts) for name in hosts.hosts]
    except EXPECTED as exc:
        return fail(str(exc))
    app = ConsoleApp(sessions, theme=args.theme)
    app.run()
    return app.return_code or 0
