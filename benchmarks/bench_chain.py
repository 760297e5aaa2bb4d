"""The verification chain on a real-size host over a real sshd on loopback: a 1 GB serve log
and a vLLM install of thousands of RECORD entries and hundreds of MB (every file hashed).

    .venv/bin/python -m benchmarks.bench_chain [--log-mb 1024] [--files 3000]
        [--install-mb 600] [--runs 3]

The host is built with the checks engineer's `bench_check` helpers (the `healthy` scenario,
inflated; older runs in the log, then the current run's start-up, then traffic after it), but
built once and cached under /tmp/vc-bench-cache (keyed by the sizes and the simulated host's
source), so that a second run starts in seconds: each run cuts the log back to the cached older
runs, starts the server (its start-up appended) and appends the traffic. Timed, `--runs` times
each:
- the chain in process (`checks.run_chain` over `SSHHost`, connect included), as the TUI runs it;
- `vllm-console check HOST --json` as a subprocess: what a person waits for, Python start-up
  included.
The files are in the page cache (just written or read): this measures the console's work, not
the disk.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_check import MB, append_traffic, inflate_install, write_old_runs
from benchmarks.bench_start import console_argv
from benchmarks.common import private_sshd, report
from benchmarks.simhosts import set_knobs
from tests.sshd import chown_to, ensure_login_user, start_as
from vllm_console.checks import run_chain
from vllm_console.console.cli.commands.demo import free_port
from vllm_console.console.settings import ServeSettings
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.tree import SimTree, materialise
from vllm_console.console.transport.ssh_host import SSHHost

CACHE = Path(os.environ.get("VC_BENCH_CACHE", "/tmp/vc-bench-cache"))
SIM_SOURCE = Path(__file__).resolve().parent.parent / "console" / "sim"


def _sim_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(SIM_SOURCE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(SIM_SOURCE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cached_host(log_mb: int, files: int, install_mb: int) -> tuple[SimTree, dict[str, Any], bool]:
    """The real-size host tree (built when absent) and what was built; True when it was built
    by this call."""
    CACHE.mkdir(mode=0o755, exist_ok=True)
    os.chmod(CACHE, 0o755)
    sizes = f"chain-{log_mb}mb-{files}f-{install_mb}mb"
    root = CACHE / f"{sizes}-{_sim_digest()}"
    marker = root / "bench-built.json"
    if marker.exists():
        return SimTree.load(root / "host"), json.loads(marker.read_text()), False
    for old in CACHE.glob(f"{sizes}-*"):  # built from an older simulated host, or unfinished
        shutil.rmtree(old, ignore_errors=True)
    root.mkdir(mode=0o755)
    tree = materialise("healthy", root / "host", port=free_port(), startup_s=0.3)
    entries, total = inflate_install(tree, files, install_mb)
    tree.log.parent.mkdir(parents=True, exist_ok=True)
    write_old_runs(tree.log, max(0, log_mb - log_mb // 10))
    built = {"record_entries": entries, "install_mb": round(total / MB),
             "old_runs_bytes": tree.log.stat().st_size}
    chown_to(root, ensure_login_user())
    marker.write_text(json.dumps(built))
    return tree, built, True


async def chain_once(config: Any, settings: ServeSettings) -> tuple[float, dict[str, str]]:
    host = SSHHost(config)
    started = time.monotonic()
    try:
        report = await run_chain(host, settings, host_label="bench")
    finally:
        await host.close()
    return time.monotonic() - started, {link.id: link.status.value for link in report.links}


def bench(log_mb: int, files: int, install_mb: int, runs: int) -> dict[str, Any]:
    t = time.monotonic()
    tree, built, fresh = cached_host(log_mb, files, install_mb)
    build_s = time.monotonic() - t
    with private_sshd() as sshd:
        port = free_port()
        set_knobs(tree, port=port)
        tree = SimTree.load(tree.root)
        with open(tree.log, "r+b") as fh:
            fh.truncate(built["old_runs_bytes"])
        server = start_as(tree, sshd.user)
        try:
            if not wait_ready(tree, server, timeout=60):
                return {"error": "the simulated server did not come up"}
            append_traffic(tree.log, log_mb // 10)
            log_bytes = tree.log.stat().st_size
            settings = ServeSettings(match=f"{tree.root}/ vllm serve")
            config = sshd.host_config(name="bench", serve=settings.model_dump())
            inproc: list[float] = []
            statuses: dict[str, str] = {}
            for _ in range(runs):
                took, statuses = asyncio.run(chain_once(config, settings))
                inproc.append(took)
            hosts = tree.root.parent / "hosts.toml"
            hosts.write_text(
                f'[hosts.bench]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
                f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                f'[hosts.bench.serve]\nmatch = "{tree.root}/ vllm serve"\n')
            cli: list[float] = []
            exit_code = -1
            for _ in range(runs):
                started = time.monotonic()
                proc = subprocess.run(console_argv("check", "bench", "--config", str(hosts),
                                                   "--json"), capture_output=True, text=True,
                                      timeout=120)
                cli.append(time.monotonic() - started)
                exit_code = proc.returncode
        finally:
            stop(server, timeout=5)
    return {"log_mb": round(log_bytes / MB), "record_entries": built["record_entries"],
            "install_mb": built["install_mb"], "built_now": fresh,
            "build_or_load_s": round(build_s, 1),
            "inproc_best_s": round(min(inproc), 2), "inproc_worst_s": round(max(inproc), 2),
            "inproc_median_s": round(statistics.median(inproc), 2),
            "cli_best_s": round(min(cli), 2), "cli_worst_s": round(max(cli), 2),
            "cli_median_s": round(statistics.median(cli), 2), "cli_exit": exit_code,
            "links": statuses}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log-mb", type=int, default=1024)
    p.add_argument("--files", type=int, default=3000)
    p.add_argument("--install-mb", type=int, default=600)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    result = bench(opts.log_mb, opts.files, opts.install_mb, opts.runs)
    report(result, opts.json, width=18)
    return 0


if __name__ == "__main__":
    sys.exit(main())
