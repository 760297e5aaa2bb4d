"""`vllm-console [HOST]`: the console on one host, or on every host of the hosts file;
`vllm-console --url URL`: the console on a server's URL alone (no SSH)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_console.console.cli.commands.common import CommandError, host_words

if TYPE_CHECKING:
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.session.pending import PendingSession
    from vllm_console.console.settings import HostEntry, HostsFile


def check_theme(name: str | None) -> None:
    """Refuse a theme the console does not have, naming those it has (Textual would fall back
    to the default without a word). No theme asked for: nothing to import (the themes are
    Textual's: 0.2 s that a `--json` run never needs)."""
    if name is None:
        return
    from vllm_console.themes import THEMES

    if name not in THEMES:
        raise CommandError(f"unknown theme {name!r}; one of: {', '.join(THEMES)}")


def url_pending(name: str, url: str, entry: HostEntry | None = None) -> PendingSession:
    """A URL-only session, made after the console's first frame (its module imports the host
    session, the telemetry and the checks: ~0.08 s); the URL and the key are checked now, so
    that a mistake is one line on stderr, not a screen."""
    from vllm_console.console.session.pending import PendingSession
    from vllm_console.console.sources.api_key import url_settings

    name, key, profile = url_settings(name, url, entry)

    async def open_session() -> HostSession:
        from vllm_console.console.sources.url import UrlSession, UrlSource

        return UrlSession(name, UrlSource(url, key), profile=profile)

    return PendingSession(name, open_session, readonly=True, url_only=True)


def run(args: argparse.Namespace) -> int:
    from vllm_console.console.tui import hangup
    from vllm_console.console.tui.app import ConsoleApp

    check_theme(args.theme)
    sessions: list[HostSession | PendingSession]
    if args.url and not args.host and not args.config:
        # A server's URL alone: no hosts file to read, and its models (pydantic) not loaded
        # before the first frame.
        sessions = [url_pending(args.url, args.url)]
    else:
        sessions = hosts_sessions(args)
    app = ConsoleApp(sessions, theme=args.theme)
    return hangup.run(app) or app.return_code or 0


def hosts_sessions(args: argparse.Namespace) -> list[HostSession | PendingSession]:
    """The sessions the command line and the hosts file ask for: HOST, a hosts file's
    `--url`, or every host of the hosts file."""
    from vllm_console.console.session.pending import PendingSession
    from vllm_console.console.settings import default_hosts_path, load_hosts_file
    from vllm_console.console.transport.connect import host_config_from_args, make_host

    def session(name: str | None, hosts: HostsFile) -> HostSession | PendingSession:
        """A session on the hosts-file entry `name`, or on the HOST typed (None). An SSH or
        local one is made after the console's first frame (`PendingSession`); its settings are
        checked now, so that a mistake is one line on stderr, not a screen."""
        key = name or args.host
        entry = hosts.hosts.get(key)
        if entry is not None and entry.url and not entry.ssh and not entry.local:
            return url_pending(key, entry.url, entry)  # URL-only: no SSH
        config = host_config_from_args(args, name)
        words = host_words(args, key)

        async def open_session() -> HostSession:
            from vllm_console.console.session.host_session import HostSession

            return HostSession(config, make_host(config), restart_words=words)

        return PendingSession(config.name, open_session, readonly=config.readonly)

    path = Path(args.config).expanduser() if args.config else default_hosts_path()
    hosts = load_hosts_file(path, required=args.config is not None)
    if args.host:
        return [session(None, hosts)]
    if args.url:
        return [url_pending(args.url, args.url)]
    if not hosts.hosts:
        said = "has no hosts" if path.exists() else "does not exist"
        raise CommandError(f"no HOST given and the hosts file {path} {said}: "
                           f"`vllm-console init` writes a commented one to fill in, "
                           f"`vllm-console HOST` opens one host, `vllm-console --url URL` "
                           f"one server without SSH, `vllm-console demo` tries it offline")
    return [session(name, hosts) for name in hosts.hosts]
