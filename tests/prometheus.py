"""A real Prometheus on loopback for the tests and the fleet benchmark (Debian's `prometheus`
package; `scripts/ensure-test-tools.sh` installs it). Its own config and storage in a temp dir,
a free port, a fast scrape interval; stopped by pid."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BINARY = "prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Job:
    """One scrape job: its name, targets (`host:port`), path and labels added to each target."""

    name: str
    targets: Sequence[str]
    metrics_path: str = "/metrics"


@dataclass
class PrometheusServer:
    url: str
    proc: subprocess.Popen[bytes]
    directory: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of `expr` (raises on an API error)."""
        qs = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{qs}", timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def wait_for(self, expr: str, predicate: Callable[[list[dict[str, Any]]], bool],
                 timeout: float = 60.0) -> list[dict[str, Any]]:
        """Poll until `predicate(vector)` holds (first scrapes, first rates)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                vector = self.query(expr)
                if predicate(vector):
                    return vector
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                log = (self.directory / "prometheus.log").read_text(errors="replace")[-2000:]
                raise TimeoutError(f"Prometheus: {expr!r} not satisfied; log tail:\n{log}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        shutil.rmtree(self.directory, ignore_errors=True)


def config_text(jobs: Sequence[Job], interval: str) -> str:
    lines = ["global:", f"  scrape_interval: {interval}", f"  evaluation_interval: {interval}",
             "scrape_configs:"]
    for job in jobs:
        lines += [f"  - job_name: {json.dumps(job.name)}",
                  f"    metrics_path: {json.dumps(job.metrics_path)}",
                  f"    scrape_timeout: {interval}",
                  "    static_configs:",
                  f"      - targets: {json.dumps(list(job.targets))}"]
    return "\n".join(lines) + "\n"


def start_prometheus(jobs: Sequence[Job], *, interval: str = "1s",
                     storage: Path | None = None, extra: Sequence[str] = ()
                     ) -> PrometheusServer:
    """Start Prometheus scraping `jobs` (or serving `storage`, e.g. backfilled blocks); returns
    once its API answers."""
    if shutil.which(BINARY) is None:
        raise FileNotFoundError("prometheus is not installed (scripts/ensure-test-tools.sh)")
    directory = Path(tempfile.mkdtemp(prefix="vc-prom-"))
    (directory / "prometheus.yml").write_text(config_text(jobs, interval))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(directory / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [BINARY, f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={storage or directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn", *extra],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    server = PrometheusServer(url, proc, directory)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return server
        except (OSError, urllib.error.URLError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            log_tail = (directory / "prometheus.log").read_text(errors="replace")[-2000:]
            server.stop()
            raise RuntimeError(f"Prometheus did not start:\n{log_tail}")
        time.sleep(0.1)


@contextmanager
def running_prometheus(jobs: Sequence[Job], **kw: Any) -> Iterator[PrometheusServer]:
    server = start_prometheus(jobs, **kw)
    try:
        yield server
    finally:
        server.stop()
