"""`vllm-console [HOST]`: the console on one host, or on every host of the hosts file."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.commands.common import CommandError
from console.connect import host_config_from_args, make_host
from console.settings import default_hosts_path, load_hosts_file


def check_theme(name: str | None) -> None:
    """Refuse a theme the console does not have, naming those it has (Textual would fall back
    to the default without a word)."""
    from themes import THEMES

    if name is not None and name not in THEMES:
        raise CommandError(f"unknown theme {name!r}; one of: {', '.join(THEMES)}")


def run(args: argparse.Namespace) -> int:
    from console.app import ConsoleApp
    from console.session import HostSession

    check_theme(args.theme)
    if args.host:
        configs = [host_config_from_args(args)]
    else:
        path = Path(args.config).expanduser() if args.config else default_hosts_path()
        hosts = load_hosts_file(path, required=args.config is not None)
        if not hosts.hosts:
            said = "has no hosts" if path.exists() else "does not exist"
            raise CommandError(f"no HOST given and the hosts file {path} {said}: "
                               f"`vllm-console init` writes a commented one to fill in, "
                               f"`vllm-console HOST` opens one host, `vllm-console demo` "
                               f"tries it offline")
        configs = [host_config_from_args(args, name) for name in hosts.hosts]
    sessions = [HostSession(c, make_host(c)) for c in configs]
    app = ConsoleApp(sessions, theme=args.theme)
    app.run()
    return app.return_code or 0
