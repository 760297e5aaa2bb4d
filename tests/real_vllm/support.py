"""What the real-vLLM test modules share: servers run as the SSH login user, hosts files, the CLI.

A module starts its few servers once (module-scoped fixtures) and stops them, whole trees and
orphans included, when it ends, whatever happened.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.real_vllm.fixture import RealServer, RealVllm
from tests.sshd import Sshd

CLI_TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server(fixture: RealVllm, sshd: Sshd, name: str, speculative_config: str,
           **kwargs: Any) -> RealServer:
    """A server (not started yet) whose files live in a fresh directory of the login user."""
    return RealServer(fixture=fixture, directory=sshd.user_dir(f"real-{name}"),
                      port=free_port(), speculative_config=speculative_config,
                      user=sshd.user, **kwargs)


@contextmanager
def served(fixture: RealVllm, sshd: Sshd, folder: Path, name: str, speculative_config: str,
           **kwargs: Any) -> Iterator[tuple[RealServer, Path]]:
    """One started, ready server named `name` and a hosts file (in `folder`) whose entry
    `name` reaches it through the real sshd; the whole tree stopped at the end."""
    if sshd.proc is None:
        sshd.start()
    srv = server(fixture, sshd, name, speculative_config, **kwargs)
    hosts = hosts_file(folder / "hosts.toml", sshd, {name: srv})
    try:
        srv.start()
        srv.wait_ready()
        yield srv, hosts
    finally:
        srv.stop()


def hosts_file(path: Path, sshd: Sshd, entries: dict[str, RealServer],
               reference: Path | None = None, **serve: str) -> Path:
    """A hosts file with one entry per server, reached through the real sshd. Each entry names
    its server by its url (the process listening on that port is the server); everything else
    (python, log, target, draft) is discovered from the running process, as a user would
    leave it."""
    lines = []
    for name, srv in entries.items():
        lines += [f"[hosts.{name}]", f'ssh = "{sshd.user}@127.0.0.1:{sshd.port}"',
                  f'identity = "{sshd.client_key}"', f'known_hosts = "{sshd.known_hosts}"',
                  f"[hosts.{name}.serve]", f'url = "{srv.url}"']
        lines += [f"{key} = {json.dumps(value)}" for key, value in serve.items()]
        if reference is not None:
            lines += [f"[hosts.{name}.checks]", f"reference = {json.dumps(str(reference))}"]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def console_app(hosts: Path, name: str) -> Any:
    """The console's app on one entry of a hosts file, over its real SSH link (for Pilot)."""
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.settings import load_hosts_file, resolve_host
    from vllm_console.console.transport.ssh_host import SSHHost
    from vllm_console.console.tui.app import ConsoleApp

    config = resolve_host(name, load_hosts_file(hosts))
    return ConsoleApp([HostSession(config, SSHHost(config))])


def cli(*args: str, timeout: float = CLI_TIMEOUT, stdin: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    """`vllm-console ARGS` as a user runs it (a fresh process, the installed entry point)."""
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    return subprocess.run([sys.executable, "-m", "vllm_console", *args], capture_output=True,
                          text=True, timeout=timeout, input=stdin, env=env)


def cli_json(*args: str, timeout: float = CLI_TIMEOUT) -> tuple[int, dict[str, Any]]:
    done = cli(*args, "--json", timeout=timeout)
    assert done.stdout.strip(), f"no JSON (exit {done.returncode}): {done.stderr}"
    return done.returncode, json.loads(done.stdout)


def scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        return resp.read().decode()


def counter(metrics: str, name: str, **labels: str) -> float:
    """The sum of a counter's samples (matching `labels`) in Prometheus text, read plainly."""
    total = 0.0
    for line in metrics.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def drafted(srv: RealServer, prompt: str, times: int = 3, max_tokens: int = 48) -> None:
    """Traffic, then until vLLM has logged a `SpecDecoding metrics` line for it (every 10 s
    while there was traffic)."""
    for _ in range(times):
        srv.complete(prompt, max_tokens=max_tokens)
    deadline = time.monotonic() + 40
    while "SpecDecoding metrics" not in srv.log.read_text(errors="replace") and \
            time.monotonic() < deadline:
        time.sleep(1)


def links_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {link["id"]: link for link in report["links"]}
