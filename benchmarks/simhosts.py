"""Simulated serving hosts behind one real sshd on loopback, for the benchmarks that need a
live server: N trees, their fake `vllm serve` started as the login user (as an operator would),
a hosts file naming them, and `HostConfig`s for in-process consoles."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.sshd import Sshd, chown_to, start_as
from vllm_console.console.cli.commands.demo import free_port
from vllm_console.console.settings import HostConfig
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.tree import SimTree, materialise


def set_knobs(tree: SimTree, **knobs: object) -> None:
    """Change sim.json settings (`traffic`, `access_log`, ...) before the server starts."""
    path = tree.sim_dir / "sim.json"
    settings = json.loads(path.read_text())
    settings.update(knobs)
    path.write_text(json.dumps(settings, indent=2) + "\n")


@dataclass
class SimHosts:
    sshd: Sshd
    base: Path
    trees: list[SimTree] = field(default_factory=list)
    servers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def name(self, i: int) -> str:
        return f"sim{i:02d}"

    def host_config(self, i: int) -> HostConfig:
        tree = self.trees[i]
        return self.sshd.host_config(
            name=self.name(i), serve={"match": f"vllm serve {tree.root}/", "log": str(tree.log)},
            gpu={"nvidia_smi": str(tree.nvidia_smi)})

    def hosts_file(self) -> Path:
        """A hosts file naming every tree (as `vllm-console --config` reads it)."""
        sshd = self.sshd
        parts = []
        for i, tree in enumerate(self.trees):
            parts.append(
                f'[hosts.{self.name(i)}]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
                f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                f'[hosts.{self.name(i)}.serve]\nmatch = "vllm serve {tree.root}/"\n'
                f'log = "{tree.log}"\n'
                f'[hosts.{self.name(i)}.gpu]\nnvidia_smi = "{tree.nvidia_smi}"\n')
        path = self.base / "hosts.toml"
        path.write_text("\n".join(parts))
        return path


@contextlib.contextmanager
def sim_hosts(sshd: Sshd, n: int, *, scenario: str = "incident", gpus: int = 2,
              startup_s: float = 4.0, metrics_interval_s: float = 2.0, traffic: bool = True,
              access_log: bool = True, start: bool = True,
              ready_timeout: float = 120.0) -> Iterator[SimHosts]:
    """N simulated hosts (demo-like by default: 2 GPUs, traffic on), servers started and
    ready; everything stopped and removed after."""
    base = sshd.user_dir("bench-sim")
    hosts = SimHosts(sshd, base)
    try:
        for i in range(n):
            tree = materialise(scenario, base / f"host{i:02d}", port=free_port(), gpus=gpus,
                               startup_s=startup_s, metrics_interval_s=metrics_interval_s)
            set_knobs(tree, traffic=traffic, access_log=access_log)
            hosts.trees.append(tree)
        chown_to(base, sshd.user)
        if start:
            hosts.servers = [start_as(tree, sshd.user) for tree in hosts.trees]
            for tree, server in zip(hosts.trees, hosts.servers, strict=True):
                if not wait_ready(tree, server, timeout=ready_timeout):
                    raise RuntimeError(f"simulated server {tree.root} did not come up")
        yield hosts
    finally:
        for server in hosts.servers:
            with contextlib.suppress(Exception):
                stop(server, timeout=5)
        shutil.rmtree(base, ignore_errors=True)
