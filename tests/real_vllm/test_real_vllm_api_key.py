"""A real `vllm serve --api-key KEY`, restarted through the real sshd as a user would.

Measured on 0.32: with a key, `/v1/models` answers 401 without `Authorization: Bearer KEY`
while `/health` and `/metrics` stay open. The restart's ready test asked `/v1/models` for a 200,
so it waited the whole start-up timeout (1800 s) while the relaunched server was up in ~25 s.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.fault_support import ctrl_c_once_launched
from tests.real_vllm.fixture import RealServer, RealVllm, ngram_spec
from tests.real_vllm.support import cli, served
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
    with served(real_vllm, sshd, tmp_path_factory.mktemp("real-api-key"), "keyed",
                ngram_spec(2), extra_args=("--api-key", KEY)) as (srv, hosts):
        yield Keyed(srv, hosts)


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


def _api_server(keyed: Keyed) -> psutil.Process:
    """The API server listening on the entry's port (the console's relaunch, by now)."""
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info["cmdline"] or []
        if "serve" in argv and str(keyed.server.port) in argv:
            return proc
    raise AssertionError("no API server on the port")


def test_ctrl_c_during_a_real_restart_leaves_no_lock(keyed: Keyed) -> None:
    """Ctrl+C while the relaunched real server loads: the step relaunches, stops waiting and
    lets go of the lock; the next restart goes through (issue 24 break 2)."""
    words = [sys.executable, "-m", "console", "restart", "keyed", "--config", str(keyed.hosts),
             "--yes"]
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    code, err = ctrl_c_once_launched(words, env)
    assert code == 130, err
    done = cli("restart", "keyed", "--config", str(keyed.hosts), "--yes", timeout=400)
    assert "another restart is running" not in done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert KEY not in done.stdout + done.stderr


def test_a_stopped_api_server_is_not_ready(keyed: Keyed) -> None:
    """SIGSTOP to the real API server: `/health` stops answering, and `status` no longer says
    `ready` beside `not-answering` (issue 24 break 6); after SIGCONT it is `ready` again."""
    api = _api_server(keyed)
    api.suspend()
    try:
        status = cli("status", "keyed", "--config", str(keyed.hosts), "--json", timeout=180)
        serve = json.loads(status.stdout)["serve"]
        assert serve["state"] == "not-answering", serve
    finally:
        api.resume()
    deadline = time.monotonic() + 60
    while True:
        status = cli("status", "keyed", "--config", str(keyed.hosts), "--json", timeout=180)
        serve = json.loads(status.stdout)["serve"]
        if serve["state"] == "ready" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert serve["state"] == "ready", serve
