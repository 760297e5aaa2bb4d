"""What a URL-only session needs before it is made, cheaply (the console's first frame comes
before `console.sources.url` is imported: `console.cli.commands.tui`): the server's API key
from the hosts file's `api_key_env`/`api_key_file` (else `$VLLM_API_KEY` for a bare `--url`),
and the session's name and profile. Everything a person can get wrong here raises ConfigError,
said on one line before any screen."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_console.console import ConfigError
from vllm_console.console.sources import web

if TYPE_CHECKING:
    from vllm_console.console.settings import HostEntry

DEFAULT_KEY_ENV = "VLLM_API_KEY"
"""vLLM's own default for `--api-key`: read when the command line gives only `--url`."""


def read_api_key(entry: HostEntry | None, *, default_env: str = "") -> str | None:
    """The key from `api_key_env` or `api_key_file` (else `default_env` when set). Raises
    ConfigError naming the variable or file, never the key."""
    if entry is not None and entry.api_key_env and entry.api_key_file:
        raise ConfigError("give api_key_env or api_key_file, not both")
    if entry is not None and entry.api_key_file:
        path = Path(entry.api_key_file).expanduser()
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(f"api_key_file {path}: cannot read: {why}") from None
        if not key:
            raise ConfigError(f"api_key_file {path}: empty")
        return key
    name = entry.api_key_env if entry is not None and entry.api_key_env else default_env
    if not name:
        return None
    key = os.environ.get(name, "").strip()
    if not key and entry is not None and entry.api_key_env:
        raise ConfigError(f"api_key_env {name}: the variable is not set")
    return key or None


def url_settings(name: str, url: str, entry: HostEntry | None = None
                 ) -> tuple[str, str | None, str]:
    """(the session's name, the API key, the profile) of a hosts-file entry's URL, or of a bare
    `--url` (named by its host:port). Raises ConfigError for a bad URL or an unreadable key."""
    web.check_url(url, ConfigError, "--url")
    key = read_api_key(entry, default_env="" if entry is not None else DEFAULT_KEY_ENV)
    if entry is None:
        _, host, port, _ = web.split_url(url)
        name = f"{host}:{port}"
    return name, key, entry.checks.profile if entry is not None else ""
