"""Settings: the hosts file (TOML) and the per-host configuration the console runs with.

The hosts file format is part of the external contract (docs/design.md): unknown keys are an
error that names the key and the file. Nothing here touches the disk at import time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# The package's, named here too for the settings' users.
from vllm_console.console import APP_NAME as APP_NAME
from vllm_console.console import MAX_HOSTS_FILE_BYTES as MAX_HOSTS_FILE_BYTES
from vllm_console.console import ConfigError as ConfigError
from vllm_console.console import default_hosts_path as default_hosts_path
from vllm_console.console import read_hosts_toml
from vllm_console.console.hostside.vocabulary import DEFAULT_MATCH

# Every setting is a path, a URL or a few words: a longer value is a mistake (a pasted file),
# and it must not reach the host's shell ("Argument list too long" from discovery, read later
# as "no serve process").
MAX_SETTING_CHARS = 4096


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True,
                              str_max_length=MAX_SETTING_CHARS)


class _Overridable(_Strict):
    """A section whose settings are command-line options too: the fields' docstrings are the
    options' help (`overrides`). Only these ask pydantic for them, which re-parses this module's
    source once per class (on every model: ~5 ms more before the console's first frame)."""

    model_config = ConfigDict(use_attribute_docstrings=True)


def _override(metavar: str, default: str = "") -> Any:
    """A setting that the command line can override too, as `--NAME METAVAR` (the field's
    docstring is the option's help): one declaration for the hosts file, the options and their
    help."""
    return Field(default=default, json_schema_extra={"cli_metavar": metavar})


class ServeSettings(_Overridable):
    """How to find and relaunch `vllm serve` on the host. Empty fields are discovered from the
    running process."""

    python: str = _override("PATH")
    """The interpreter that runs vllm serve; probes run with it."""
    log: str = _override("PATH")
    """The serve log (the process's stdout target)."""
    target: str = _override("DIR")
    """The target model directory."""
    draft: str = _override("DIR")
    """The draft (speculator) model directory."""
    match: str = _override("WORDS", DEFAULT_MATCH)
    """Words that find the serve process in its command line, in order (never another user's)."""
    url: str = _override("URL")
    """Base URL of the OpenAI server as seen from the host, e.g. http://127.0.0.1:8000 (as
    `--url` with no HOST: the console on this URL alone, no SSH)."""
    port: int | None = Field(default=None, ge=1, le=65535, strict=True,
                             json_schema_extra={"cli_metavar": "N"})
    """The port of the server to work on, when the host runs several (else the lowest port)."""
    unit: str = _override("UNIT")
    """A systemd unit: restart through systemctl instead of relaunching the process."""
    container: str = _override("NAME|ID")
    """The container whose main process is the server (pins it: no bare process is looked for)."""
    runtime: str = _override("docker|podman", "docker")
    """The container runtime's CLI on the host: docker, or podman (its Docker-compatible CLI)."""
    stall_s: float = Field(default=30.0, gt=0, allow_inf_nan=False,
                           json_schema_extra={"cli_metavar": "SECONDS"})
    """Requests running or waiting and no token generated for this long is a stalled engine."""


    @field_validator("runtime")
    @classmethod
    def _a_known_runtime(cls, value: str) -> str:
        # The value names a program the host runs: only these two.
        if value not in RUNTIMES:
            raise ValueError(f"must be one of {', '.join(RUNTIMES)}")
        return value

    @field_validator("container")
    @classmethod
    def _a_container_name(cls, value: str) -> str:
        if value and (value.startswith("-") or any(c.isspace() for c in value)):
            raise ValueError("must be a container's name or id")
        return value


RUNTIMES = ("docker", "podman")


class GpuSettings(_Overridable):
    """Where GPU telemetry comes from."""

    nvidia_smi: str = _override("PATH", "nvidia-smi")
    """Fallback GPU source when NVML is not importable on the host."""


class ChecksSettings(_Overridable):
    """The verification chain's configuration."""

    profile: str = _override("NAME|PATH", "auto")
    """`auto` (the profile for the engine's speculative method), a shipped profile name, or a
    path to a profile TOML file."""
    reference: str = _override("PATH")
    """A reference draft config.json (local path); else the profile's reference for the drafter."""


# The sections of a host entry whose settings are command-line overrides too.
OVERRIDE_SECTIONS: tuple[type[BaseModel], ...] = (ServeSettings, GpuSettings, ChecksSettings)


def override_type(name: str) -> type:
    """What the command line turns an override's text into (`float` for `--stall-s`)."""
    for section in OVERRIDE_SECTIONS:
        info = section.model_fields.get(name)
        if info is not None and info.annotation is float:
            return float
        if info is not None and info.annotation in (int, int | None):
            return int
    return str


def overrides() -> list[tuple[str, str, str, str]]:
    """Every overridable setting as (name, metavar, description, default), in declaration
    order: what the command line offers as `--name`."""
    found = []
    for section in OVERRIDE_SECTIONS:
        for name, info in section.model_fields.items():
            extra = info.json_schema_extra
            if isinstance(extra, dict) and "cli_metavar" in extra:
                found.append((name, str(extra["cli_metavar"]), info.description or "",
                              str(info.default or "")))
    return found


class HostEntry(_Strict):
    """One `[hosts.NAME]` table."""

    ssh: str = ""
    """`[user@]host[:port]` or an ssh_config alias."""
    # strict: TOML has real integers and booleans; a string here is a mistake to name, not to
    # guess at (lax validation took `local = "yes"` as true).
    port: int | None = Field(default=None, ge=1, le=65535, strict=True)
    """SSH port (default: ssh_config, then 22)."""
    identity: str = ""
    """Private key file (default: ssh_config, then ~/.ssh and the agent)."""
    known_hosts: str = ""
    """known_hosts file checked strictly (default ~/.ssh/known_hosts)."""
    local: bool = Field(default=False, strict=True)
    """This machine, no SSH."""
    serve: ServeSettings = ServeSettings()
    """How to find and relaunch vllm serve."""
    gpu: GpuSettings = GpuSettings()
    """GPU telemetry source."""
    checks: ChecksSettings = ChecksSettings()
    """The verification chain."""
    url: str = ""
    """The server's URL as this machine reaches it; with no `ssh` (nor `local`), the console
    watches the server through it alone (URL-only mode: no GPU, log, checks or restart)."""
    api_key_env: str = ""
    """An environment variable holding the server's `--api-key` (never stored in this file)."""
    api_key_file: str = ""
    """A file holding the server's `--api-key` (never stored in this file)."""

    @field_validator("ssh")
    @classmethod
    def _ssh_is_a_destination(cls, value: str) -> str:
        if value and (any(c.isspace() for c in value) or value.startswith("-")):
            raise ValueError("must be [user@]host[:port] or an ssh_config alias")
        return value


class FleetSettings(_Strict):
    """The `[fleet]` table: a Prometheus server that scrapes the fleet's vLLM servers."""

    prometheus: str = ""
    """Prometheus's base URL, e.g. http://prometheus:9090."""
    selector: str = ""
    """A label selector for the vLLM scrape targets, e.g. `{job="vllm"}`."""
    host_label: str = "instance"
    """The label that names a server; its value maps a row to a `[hosts.NAME]` entry."""
    profile: str = "dflash-swa"
    """The profile whose expected acceptance length flags a server as far below it."""


class HostsFile(_Strict):
    """The whole hosts file."""

    hosts: dict[str, HostEntry] = {}
    """Hosts by name."""
    fleet: FleetSettings = FleetSettings()
    """The Prometheus fleet view (`vllm-console fleet`)."""


class HostConfig(_Strict):
    """Everything needed to reach and work on one host, after the hosts file, the destination
    and the command-line overrides are merged."""

    name: str
    """What the console calls the host."""
    hostname: str = ""
    """Host name or ssh_config alias (empty when local)."""
    username: str | None = None
    """Login user (None: ssh_config or the local user)."""
    port: int | None = None
    """SSH port (None: ssh_config or 22)."""
    identity: str = ""
    """Private key file."""
    known_hosts: str = ""
    """known_hosts file."""
    accept_new: bool = False
    """Accept and record an unknown host key (never a changed one)."""
    local: bool = False
    """This machine, no SSH."""
    readonly: bool = False
    """No restart, no writes."""
    serve: ServeSettings = ServeSettings()
    """How to find and relaunch vllm serve."""
    gpu: GpuSettings = GpuSettings()
    """GPU telemetry source."""
    checks: ChecksSettings = ChecksSettings()
    """The verification chain."""


def _describe_error(err: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in err.get("loc", ()))
    if err.get("type") == "extra_forbidden":
        return f"unknown key {where!r}"
    return f"{where}: {err.get('msg', 'invalid value')}"


def load_hosts_file(path: Path | None = None, *, required: bool = False) -> HostsFile:
    """Read and validate a hosts file. A missing default file is an empty one."""
    path = path or default_hosts_path()
    data = read_hosts_toml(path, required=required)
    try:
        return HostsFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe_error(e) for e in exc.errors())  # type: ignore[arg-type]
        raise ConfigError(f"hosts file {path}: {problems}") from None


_DEST = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:\s]+)(?::(?P<port>\d+))?$")


def parse_destination(dest: str) -> tuple[str | None, str, int | None]:
    """Split `[user@]host[:port]` (IPv6 in brackets) into its parts."""
    m = _DEST.match(dest)
    if not m or dest.startswith("-"):
        raise ConfigError(f"{dest!r} is not [user@]host[:port] or an ssh_config alias")
    port = int(m["port"]) if m["port"] else None
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"{dest!r}: port {port} is out of range")
    return m["user"], m["host"].strip("[]"), port


def _expand(path: str) -> str:
    return os.path.expanduser(path) if path else path


_Section = Any  # one of OVERRIDE_SECTIONS


def _overridden(section: _Section, overrides: dict[str, Any]) -> _Section:
    """The section with the command line's values for its fields (taken out of `overrides`),
    validated like the hosts file's: a bad value names its option."""
    update = {k: overrides.pop(k) for k in list(overrides) if k in type(section).model_fields}
    if not update:
        return section
    try:
        return type(section).model_validate({**section.model_dump(), **update})
    except ValidationError as exc:
        err = exc.errors()[0]
        option = "--" + str(err["loc"][0]).replace("_", "-")
        raise ConfigError(f"{option}: {err['msg']}") from None


def resolve_host(spec: str, hosts: HostsFile, *, overrides: dict[str, Any] | None = None
                 ) -> HostConfig:
    """Turn a HOST argument into a HostConfig: a hosts-file name first, else a destination
    (`[user@]host[:port]` or an ssh_config alias). `overrides` are the CLI options."""
    overrides = {k: v for k, v in (overrides or {}).items() if v not in (None, "", False)}
    entry = hosts.hosts.get(spec)
    if entry is None:
        try:
            entry = HostEntry(ssh=spec)
        except ValidationError:
            raise ConfigError(f"{spec!r} is not [user@]host[:port] or an ssh_config alias"
                              ) from None
    local = bool(overrides.pop("local", False) or entry.local)
    user, hostname, port = (None, "", None)
    if not local:
        if not entry.ssh and entry.url:
            raise ConfigError(f"host {spec!r} has only a `url`: this needs SSH; add `ssh = "
                              f"\"[user@]host\"` to [hosts.{spec}] (the console alone works "
                              f"from the URL: `vllm-console {spec}`)")
        if not entry.ssh:
            raise ConfigError(f"host {spec!r}: no `ssh` destination and not `local`")
        user, hostname, port = parse_destination(entry.ssh)
    serve = _overridden(entry.serve, overrides)
    gpu = _overridden(entry.gpu, overrides)
    checks = _overridden(entry.checks, overrides)
    for name in ("identity", "known_hosts"):
        if len(str(overrides.get(name, ""))) > MAX_SETTING_CHARS:
            raise ConfigError(f"--{name.replace('_', '-')}: should have at most "
                              f"{MAX_SETTING_CHARS} characters")
    return HostConfig(
        name=spec,
        hostname=hostname,
        username=user,
        port=overrides.pop("port", None) or entry.port or port,
        identity=_expand(overrides.pop("identity", "") or entry.identity),
        known_hosts=_expand(overrides.pop("known_hosts", "") or entry.known_hosts),
        accept_new=bool(overrides.pop("accept_new", False)),
        local=local,
        readonly=bool(overrides.pop("readonly", False)),
        serve=serve,
        gpu=gpu,
        checks=checks,
    )
