"""A real `vllm serve --api-key KEY`, restarted through the real sshd as a user would.

Measured on 0.32: with a key, `/v1/models` answers 401 without `Authorization: Bearer KEY`
while `/health` and `/metrics` stay open. The restart's ready test asked `/v1/models` for a 200,
so it waited the whole start-up timeout (1800 s) while the relaunched server was up in ~25 s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real_vllm.fixture import RealServer, RealVllm, ngram_spec
from tests.real_vllm.support import cli, hosts_file, server
from tests.sshd import Sshd

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(900)]

KEY = "sk-planted-a9f3c1e7"


@dataclass
class Keyed:
    server: RealServer
    hosts: Path


@pytest.fixture(scope="module")
def keyed(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Keyed]:
    if sshd.proc is None:
        sshd.start()
    srv = server(real_vllm, sshd, "api-key", ngram_spec(2), extra_args=("--api-key", KEY))
    hosts = hosts_file(tmp_path_factory.mktemp("real-api-key") / "hosts.toml", sshd,
                       {"keyed": srv})
    try:
        srv.start()
        srv.wait_ready()
        yield Keyed(srv, hosts)
    finally:
        srv.stop()


def test_a_keyed_server_restarts_and_is_ready_without_showing_its_key(keyed: Keyed) -> None:
    started = time.monotonic()
    done = cli("restart", "keyed", "--config", str(keyed.hosts), "--yes", timeout=400)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ready" in done.stdout
    # The host step found the key on the command line and used it.
    assert "/health and /v1/models answer 200 on the host" in done.stdout, done.stdout
    assert KEY not in done.stdout + done.stderr
    assert keyed.server.health() == 200
    status = cli("status", "keyed", "--config", str(keyed.hosts), "--json", timeout=120)
    assert json.loads(status.stdout)["serve"]["state"] == "ready", status.stdout
    assert KEY not in status.stdout + status.stderr
    print(f"real restart of a keyed server: {took:.1f} s to ready\n{done.stdout}")
