"""How long the whole chain takes on a real-size host, over SSH on loopback.

The host: the `healthy` simulated scenario, made real-size — its vLLM install inflated to
`--files` RECORD entries and `--install-mb` MB (one ~40% compiled extension, the rest modules),
every one hashed in RECORD; and a serve log of `--log-mb` MB: older runs first, then the current
run's start-up, then post-start-up traffic lines (so the log probe must search backwards past
the traffic and forwards through the start-up). The chain runs through a real sshd, as the
login user, `--runs` times.

    python -m benchmarks.bench_check                 # 1 GB log, 3000 files, 600 MB install
    python -m benchmarks.bench_check --log-mb 100    # quicker

Target (issue 3): under 5 s. Needs OpenSSH's sshd (as for the tests) and ~2 GB in /tmp.
The files are in the page cache right after being written: this measures the console's work,
not the disk.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.sshd import chown_to, start_sshd
from vllm_console.checks import run_chain
from vllm_console.console.settings import ServeSettings
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.tree import SimTree, materialise
from vllm_console.console.transport.ssh_host import SSHHost

TARGET_S = 5.0
MB = 1024 * 1024


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def inflate_install(tree: SimTree, files: int, install_mb: int) -> tuple[int, int]:
    """Add modules and a big compiled extension to the install, each listed in RECORD."""
    site = tree.site_packages
    record = next(site.glob("vllm-*.dist-info")) / "RECORD"
    rows = record.read_text().splitlines()
    rows, last = rows[:-1], rows[-1]  # RECORD's own row stays last
    existing = len(rows)
    big = int(install_mb * MB * 0.4)
    blob = os.urandom(MB)
    so = (blob * (big // MB + 1))[:big]
    (site / "vllm" / "_moe_big_C.abi3.so").write_bytes(so)
    rows.append(f"vllm/_moe_big_C.abi3.so,{_hash(so)},{len(so)}")
    each = max(1, (install_mb * MB - big) // max(1, files - existing - 1))
    folder = site / "vllm" / "_bench"
    folder.mkdir(exist_ok=True)
    for i in range(max(0, files - existing - 1)):
        data = blob[i % 997: i % 997 + each] if each < MB else (blob * (each // MB + 1))[:each]
        rel = f"vllm/_bench/mod_{i:05d}.py"
        (site / rel).write_bytes(data)
        rows.append(f"{rel},{_hash(data)},{len(data)}")
    rows.append(last)
    record.write_text("\n".join(rows) + "\n")
    total = sum(int(r.rsplit(",", 1)[1] or 0) for r in rows)
    return len(rows), total


def _traffic(n: int) -> bytes:
    return (f"(APIServer pid=101) INFO 05-14 11:{n % 60:02d}:00 [loggers.py:123] Engine 000: "
            f"Avg prompt throughput: {n % 997}.0 tokens/s, Avg generation throughput: 19.0 "
            "tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix "
            "cache hit rate: 36.2%\n").encode()


def write_old_runs(log: Path, megabytes: int) -> None:
    """Older runs: a start-up each, then traffic, up to `megabytes`."""
    block = b"".join(_traffic(n) for n in range(4000))
    start = (b"(EngineCore_DP0 pid=77) INFO 05-14 09:00:01 [core.py:93] Initializing a V1 LLM "
             b"engine (v0.1.dev15000+gaaaaaaa) with config: model='/old', "
             b"speculative_config=SpeculativeConfig(method='dflash', model='/old-draft', "
             b"num_spec_tokens=15)\n"
             b"(EngineCore_DP0 pid=77) INFO 05-14 09:00:40 [gpu_model_runner.py:2350] Using "
             b"auxiliary layers from speculative config: (1, 16, 31, 46, 61)\n")
    with open(log, "wb") as fh:
        written = 0
        while written < megabytes * MB:
            if written % (100 * MB) < len(block):
                fh.write(start)
            fh.write(block)
            written += len(block)


def append_traffic(log: Path, megabytes: int) -> None:
    block = b"".join(_traffic(n) for n in range(4000))
    with open(log, "ab") as fh:
        for _ in range(megabytes * MB // len(block)):
            fh.write(block)


async def _measure(config: object, settings: ServeSettings, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        host = SSHHost(config)  # type: ignore[arg-type]
        started = time.monotonic()
        try:
            report = await run_chain(host, settings, host_label="bench")
        finally:
            await host.close()
        times.append(time.monotonic() - started)
        statuses = " ".join(f"{link.id}={link.status.value}" for link in report.links)
        print(f"  {times[-1]:.2f} s  {statuses}")
        for link in report.links:
            for evidence in link.evidence:
                for line in evidence.excerpt.splitlines():
                    if line.startswith(("RECORD:", "current run starts")):
                        print(f"    {evidence.probe}: {line[:150]}")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log-mb", type=int, default=1024)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--install-mb", type=int, default=600)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    sshd = start_sshd()
    base = sshd.user_dir("bench")
    proc: subprocess.Popen[bytes] | None = None
    try:
        t = time.monotonic()
        tree = materialise("healthy", base / "host", port=_port(), startup_s=0.3)
        entries, total = inflate_install(tree, args.files, args.install_mb)
        tree.log.parent.mkdir(parents=True, exist_ok=True)
        write_old_runs(tree.log, max(0, args.log_mb - args.log_mb // 10))
        chown_to(base, sshd.user)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(base)}
        kwargs = {}
        if os.geteuid() == 0:
            import pwd

            kwargs = {"user": sshd.user, "group": pwd.getpwnam(sshd.user).pw_gid,
                      "extra_groups": []}
        with open(tree.log, "ab") as log:
            proc = subprocess.Popen(tree.serve_argv(), stdout=log, stderr=subprocess.STDOUT,
                                    cwd=tree.root, env=env, start_new_session=True,
                                    **kwargs)  # type: ignore[call-overload]
        if not wait_ready(tree, proc, timeout=60):
            print("the simulated server did not come up", file=sys.stderr)
            return 2
        append_traffic(tree.log, args.log_mb // 10)
        size = tree.log.stat().st_size
        print(f"host ready in {time.monotonic() - t:.1f} s: install {entries} RECORD entries, "
              f"{total / MB:.0f} MB; log {size / MB:.0f} MB")
        settings = ServeSettings(match=f"{tree.root}/ vllm serve")
        times = asyncio.run(_measure(sshd.host_config(name="bench"), settings, args.runs))
        best, worst = min(times), max(times)
        verdict = "PASS" if worst < TARGET_S else "FAIL"
        print(f"chain: best {best:.2f} s, worst {worst:.2f} s (target < {TARGET_S:.0f} s): "
              f"{verdict}")
        return 0 if verdict == "PASS" else 1
    finally:
        if proc is not None:
            stop(proc, timeout=3)
        sshd.kill()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(sshd.directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
