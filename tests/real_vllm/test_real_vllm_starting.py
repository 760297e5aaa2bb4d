"""A real server on its way up, as `make demo-real` shows it (issue 40): runtime activation was
a red `error` ("no run start in .../serve.log") until the server was ready, though nothing was
wrong: a real vLLM spends its first seconds importing, its log empty and its port closed. A
starting server is `unknown` (starting), never an error, from its first second to ready.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.real_vllm.fixture import RealVllm, ngram_spec
from tests.real_vllm.support import cli_json, hosts_file, links_of, server
from tests.sshd import Sshd

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(600)]


def test_check_while_the_server_starts_says_starting_never_error(
        real_vllm: RealVllm, sshd: Sshd, tmp_path: Path) -> None:
    if sshd.proc is None:
        sshd.start()
    srv = server(real_vllm, sshd, "starting", ngram_spec(4))
    hosts = hosts_file(tmp_path / "hosts.toml", sshd, {"starting": srv})
    seen: list[tuple[float, str, str]] = []
    try:
        started = time.monotonic()
        srv.start()
        while srv.health() != 200:
            assert time.monotonic() - started < 300, (seen, srv.tail())
            _code, report = cli_json("check", "starting", "--config", str(hosts))
            runtime = links_of(report)["runtime-activation"]
            if srv.health() == 200:
                break  # it came up while the chain ran: this look is not of a start
            seen.append((round(time.monotonic() - started, 1), runtime["status"],
                         runtime["summary"]))
    finally:
        srv.stop()
    print(f"\nruntime activation while starting: {seen}")
    assert seen, "no check ran while the server started"
    assert [s for s in seen if s[1] == "error"] == [], seen
    assert all(s[1] == "unknown" for s in seen), seen
    assert any(s[2].startswith(("the server is starting", "the current run has not started "
                                "its engine yet")) for s in seen), seen
