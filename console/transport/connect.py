"""From the command line's words to a connected `Host`."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_console.console.settings import (
    ConfigError,
    HostConfig,
    load_hosts_file,
    overrides,
    resolve_host,
)
from vllm_console.console.transport.host import Host
from vllm_console.console.transport.ssh_config import identity_problem


def host_config_from_args(args: argparse.Namespace, spec: str | None = None) -> HostConfig:
    """Merge the hosts file, HOST (or the hosts-file name `spec`) and the command-line options.
    Raises ConfigError. A missing identity file of the HOST a person typed is refused here,
    before any connection; a fleet opens, and that host's link says why it cannot connect."""
    config_path = Path(args.config).expanduser() if getattr(args, "config", None) else None
    hosts = load_hosts_file(config_path, required=config_path is not None)
    typed = spec is None
    spec = spec or getattr(args, "host", None)
    if not spec:
        raise ConfigError("no HOST given")
    # Every option named after a setting overrides it: the host options (--identity, ...)
    # and the generated ones (--log, ...), without a list to keep in step with the parser.
    keys = {*HostConfig.model_fields, *(name for name, *_ in overrides())}
    config = resolve_host(spec, hosts, overrides={k: v for k, v in vars(args).items()
                                                  if k in keys})
    problem = identity_problem(config.identity) if not config.local else ""
    if problem and typed:
        raise ConfigError(f"{spec}: {problem}")
    return config


def make_host(config: HostConfig) -> Host:
    """`LocalHost` for `local`, else `SSHHost` (imported lazily: asyncssh is heavy)."""
    if config.local:
        from vllm_console.console.transport.local_host import LocalHost

        return LocalHost(config.name)
    from vllm_console.console.transport.ssh_host import SSHHost

    return SSHHost(config)
