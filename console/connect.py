"""From the command line's words to a connected `Host`."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.host import Host
from console.settings import (
    ConfigError,
    HostConfig,
    load_hosts_file,
    resolve_host,
)

_OVERRIDE_KEYS = ("python", "log", "target", "draft", "match", "url", "nvidia_smi", "reference",
                  "profile", "identity", "known_hosts", "accept_new", "readonly", "local")


def host_config_from_args(args: argparse.Namespace, spec: str | None = None) -> HostConfig:
    """Merge the hosts file, HOST and the command-line options. Raises ConfigError."""
    config_path = Path(args.config).expanduser() if getattr(args, "config", None) else None
    hosts = load_hosts_file(config_path, required=config_path is not None)
    spec = spec or getattr(args, "host", None)
    if not spec:
        raise ConfigError("no HOST given")
    overrides = {k: getattr(args, k, None) for k in _OVERRIDE_KEYS}
    return resolve_host(spec, hosts, overrides=overrides)


def make_host(config: HostConfig) -> Host:
    """`LocalHost` for `local`, else `SSHHost` (imported lazily: asyncssh is heavy)."""
    if config.local:
        from console.local_host import LocalHost

        return LocalHost(config.name)
    from console.ssh_host import SSHHost

    return SSHHost(config)
