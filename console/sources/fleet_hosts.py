"""Which hosts-file entry a Prometheus row is, and what Enter opens for it.

A row is named by its host label's value (`instance` by default: `10.0.0.5:8000`). It maps to
an entry whose name is that value, whose `url` has that host:port, or whose `ssh` host is that
host (when only one entry has it). Enter then opens, in this order: the full console over SSH
(the entry has `ssh` or `local`), the URL-only view (the entry's `url`, else the row's
`host:port`), or the Prometheus-only view.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from vllm_console.console.settings import ConfigError, HostsFile, parse_destination
from vllm_console.console.sources import web


def _netloc(url: str) -> str | None:
    try:
        _, host, port, _ = web.split_url(url)
    except web.BadUrl:
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_part(value: str) -> str:
    """`10.0.0.5:9400` -> `10.0.0.5` (`[::1]:8000` -> `::1`): dcgm-exporter runs on its own
    port of the same host, so GPU series meet vLLM's by host."""
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    head, sep, tail = value.rpartition(":")
    return head if sep and tail.isdigit() and ":" not in head else value


def hosts_by_label(hosts: HostsFile, values: list[str]) -> dict[str, str]:
    """The entry name each label value maps to (values with none are left out)."""
    by_url = {n: _netloc(e.url) for n, e in hosts.hosts.items() if e.url}
    by_ssh: dict[str, list[str]] = {}
    for name, entry in hosts.hosts.items():
        if entry.ssh:
            try:
                by_ssh.setdefault(parse_destination(entry.ssh)[1], []).append(name)
            except ConfigError:
                continue
    out = {}
    for value in values:
        if value in hosts.hosts:
            out[value] = value
            continue
        named = [n for n, loc in by_url.items() if loc == value]
        ssh = by_ssh.get(host_part(value), [])
        if named:
            out[value] = named[0]
        elif len(ssh) == 1:
            out[value] = ssh[0]
    return out


class OpenKind(StrEnum):
    SSH = "ssh"
    URL = "url"
    PROMETHEUS = "prometheus"


@dataclass(frozen=True)
class OpenTarget:
    """What Enter on a row opens: a hosts-file entry (SSH), a URL, or Prometheus's view."""

    kind: OpenKind
    name: str
    url: str = ""


def open_target(key: str, host: str | None, hosts: HostsFile) -> OpenTarget:
    entry = hosts.hosts.get(host) if host else None
    if entry is not None and host is not None:
        if entry.ssh or entry.local:
            return OpenTarget(OpenKind.SSH, host)
        if entry.url:
            return OpenTarget(OpenKind.URL, host, entry.url)
    head, sep, port = key.rpartition(":")
    if sep and head and port.isdigit() and "/" not in key:
        return OpenTarget(OpenKind.URL, key, f"http://{key}")
    return OpenTarget(OpenKind.PROMETHEUS, key)
