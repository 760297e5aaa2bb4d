"""`stacks` on a real engine: with requests in flight and its EngineCore SIGSTOPped, `stacks
--json` (over the real sshd, as the login user, py-spy installed into the serving environment
from the registry and found beside the serving interpreter) returns the API server and the
EngineCore within a bounded time, the EngineCore's main thread in `vllm/v1/engine/core.py`. A
login user who may not trace the process it names gets one line saying what to grant, exit 2.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_vllm.fixture import RealServer, RealVllm, ensure_py_spy, ngram_spec
from tests.real_vllm.support import cli, cli_json, served
from tests.real_vllm.test_real_vllm_serving import Traffic, stop_mid_generation
from tests.sshd import Sshd

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(600)]

LOADED_CLI_TIMEOUT = 300


@pytest.fixture(scope="module")
def stacked(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[RealServer, Path]]:
    ensure_py_spy(real_vllm)
    folder = tmp_path_factory.mktemp("real-stacks")
    with served(real_vllm, sshd, folder, "engine", ngram_spec(4)) as pair:
        yield pair


def test_a_stopped_engine_core_is_dumped_in_bounded_time(
        stacked: tuple[RealServer, Path]) -> None:
    srv, hosts = stacked
    traffic = Traffic(srv, until=threading.Event()).start(4, max_tokens=480)
    assert traffic.until is not None
    traffic.until.set()
    engine, held = stop_mid_generation(srv, 4, traffic)
    try:
        started = time.monotonic()
        code, data = cli_json("stacks", "engine", "--config", str(hosts),
                              timeout=LOADED_CLI_TIMEOUT)
        took = time.monotonic() - started
    finally:
        os.kill(engine, signal.SIGCONT)
    traffic.wait()
    assert code == 0, data
    assert held >= 1
    # The command's own start and SSH connection on a loaded machine, plus the dumps' one
    # 10 s deadline: a stopped process never makes it hang.
    assert took < 90, took
    assert data["tool"]["name"] == "py-spy"
    assert data["tool"]["version"] == "0.4.3"
    assert data["tool"]["path"] == str(srv.fixture.venv / "bin" / "py-spy")
    by_pid = {p["pid"]: p for p in data["processes"]}
    assert by_pid[srv.pid]["role"] == "api-server"
    core = by_pid[engine]
    assert core["role"] == "engine-core"
    assert core["name"] == "VLLM::EngineCore"
    assert core["error"] is None
    main = next(t for t in core["threads"] if t["name"] == "MainThread")
    files = [f["file"] for f in main["frames"]]
    assert "vllm/v1/engine/core.py" in files, files
    assert any(f["function"].endswith("run_busy_loop") for f in main["frames"])
    roles = sorted(p["role"] for p in data["processes"])
    assert roles.count("worker") == 1, roles
    assert any("stopped" in note and str(engine) in note for note in data["notes"])


def test_a_process_the_login_user_may_not_trace_is_one_line_naming_what_to_grant(
        stacked: tuple[RealServer, Path]) -> None:
    """The login user (not root) names a process of root's (this test's own): py-spy is
    refused; the command says so in one line, with what to grant, exit 2, no traceback."""
    _, hosts = stacked
    done = cli("stacks", "engine", "--config", str(hosts), "--pid", str(os.getpid()),
               timeout=LOADED_CLI_TIMEOUT)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"not allowed to trace pid {os.getpid()}" in lines[0]
    assert "they run as uid 0, not the login user" in lines[0]
    assert "CAP_SYS_PTRACE" in lines[0]
    assert "Traceback" not in done.stderr + done.stdout
