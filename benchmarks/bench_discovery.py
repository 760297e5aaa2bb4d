"""Discovery on a host with many servers: one helper run, whatever their number.

    .venv/bin/python -m benchmarks.bench_discovery [--servers 1,16] [--runs 5] [--json]

For each count N, one host (a real sshd on loopback) runs N simulated `vllm serve` as its
login user, each on its own port; the console's resolver (`resolve_serve`, what `status`,
`check`, the restart and the TUI ask) lists them over the SSH link. Counted: the commands the
link ran per discovery (the helper, after the bundle is installed by a first, unmeasured
run), the servers listed, and the wall time of a discovery (median and worst of `--runs`).
The figure to keep: the commands per discovery stay 1 from 1 server to 16 (no round trip per
server); the wall time grows by the host-side work only (one /proc pass, one `/health`
request per server, all at once).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import private_sshd  # noqa: E402
from benchmarks.output import report_each  # noqa: E402
from benchmarks.simhosts import sim_hosts  # noqa: E402
from vllm_console.console.hostclient.discovery import resolve_serve  # noqa: E402
from vllm_console.console.settings import ServeSettings  # noqa: E402
from vllm_console.console.transport.ssh_host import SSHHost  # noqa: E402


async def measure(n: int, runs: int) -> dict[str, Any]:
    with private_sshd() as sshd, sim_hosts(sshd, n, gpus=1, startup_s=0.2,
                                           metrics_interval_s=5.0, traffic=False,
                                           access_log=False) as hosts:
        serve = ServeSettings(match=f"vllm serve {hosts.base}/")
        host = SSHHost(sshd.host_config(serve=serve.model_dump()))
        commands: list[str] = []
        real_run = host.run

        async def counted(command: str, *args: Any, **kwargs: Any) -> Any:
            commands.append(command)
            return await real_run(command, *args, **kwargs)

        host.run = counted  # type: ignore[method-assign]
        try:
            await resolve_serve(host, serve)  # installs the bundle (`host.scripts`): unmeasured
            walls, listed, per_run = [], 0, []
            for _ in range(runs):
                commands.clear()
                t0 = time.monotonic()
                found = await resolve_serve(host, serve)
                walls.append(time.monotonic() - t0)
                per_run.append(len(commands))
                listed = len(found.servers)
        finally:
            await host.close()
    return {"servers": n, "listed": listed, "commands_per_discovery": max(per_run),
            "wall_p50_s": round(statistics.median(walls), 3),
            "wall_max_s": round(max(walls), 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", default="1,16", help="server counts, comma-separated")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    results = {f"{n} servers": asyncio.run(measure(n, opts.runs))
               for n in (int(x) for x in opts.servers.split(","))}
    report_each(results, opts.json, f"discovery over SSH, {opts.runs} runs each "
                "(target: one command per discovery, whatever the count)", lambda name, r: (
                    f"  {name:<11} listed {r['listed']:>2}   commands per discovery "
                    f"{r['commands_per_discovery']}   wall p50 {r['wall_p50_s']:.3f} s, "
                    f"max {r['wall_max_s']:.3f} s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
