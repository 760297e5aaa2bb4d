"""Simulated vLLM servers on distinct loopback addresses, scraped by a real Prometheus: the
fleet tests' world. `incident` (acceptance ~1.17) on 127.0.0.1 with dcgm-exporter series,
`healthy` (~6.4) on 127.0.0.2 without, and a target on 127.0.0.3 that nothing answers."""

from __future__ import annotations

import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.prometheus import Job, PrometheusServer, free_port, running_prometheus
from vllm_console.console.sim import SimTree, materialise, start_background, stop


def start_sim(tree: SimTree, address: str, *extra: str) -> subprocess.Popen[bytes]:
    """The tree's `vllm serve` listening on `address` (its argv's --host replaced)."""
    argv = tree.serve_argv()
    argv[argv.index("--host") + 1] = address
    return start_background(tree, argv=[*argv, *extra])


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{url} never answered"
        time.sleep(0.1)


@dataclass
class FleetWorld:
    prom: PrometheusServer
    incident: str  # host:port of each server, as Prometheus's instance label says it
    healthy: str
    dead: str


@contextmanager
def fleet_world() -> Iterator[FleetWorld]:
    base = Path(tempfile.mkdtemp(prefix="vc-fleet-"))
    trees = {name: materialise(name, base / name, port=free_port(), startup_s=0.5,
                               metrics_interval_s=0.3) for name in ("incident", "healthy")}
    addresses = {"incident": "127.0.0.1", "healthy": "127.0.0.2"}
    procs = []
    try:
        for name, tree in trees.items():
            procs.append(start_sim(tree, addresses[name]))
        targets = {n: f"{addresses[n]}:{t.port}" for n, t in trees.items()}
        for target in targets.values():
            wait_http(f"http://{target}/health")
        dead = f"127.0.0.3:{free_port()}"
        jobs = [Job("vllm", [targets["incident"], targets["healthy"], dead]),
                Job("dcgm", [targets["incident"]], "/dcgm/metrics")]
        with running_prometheus(jobs) as prom:
            # The first rates need two scrapes with drafts in between: poll, never sleep.
            prom.wait_for("rate(vllm:spec_decode_num_drafts_total[1m]) > 0",
                          lambda v: len(v) == 2)
            prom.wait_for("DCGM_FI_DEV_GPU_UTIL", lambda v: len(v) >= 1)
            prom.wait_for(f'up{{instance="{dead}"}}', lambda v: len(v) == 1)
            yield FleetWorld(prom, targets["incident"], targets["healthy"], dead)
    finally:
        for proc in procs:
            stop(proc, timeout=5)
        for tree in trees.values():
            stop(tree, timeout=5)
