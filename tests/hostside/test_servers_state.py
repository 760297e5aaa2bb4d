"""Each listed server's `state` (`status --json`'s `servers`, the switcher's column) from one
`/health` request on the host, against real sockets: a server that answers, one whose engine
died (503), one that takes its port and never answers, one whose port refuses (young: starting;
old: down). A pass over many hung servers takes one timeout, not one per server."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.sshd import free_port
from vllm_console.console.hostside import servers


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(self.status if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[dict[int, int]]:
    """Two real HTTP servers on loopback: status -> port (200, and 503 as a dead engine's)."""
    out, started = {}, []
    for status in (200, 503):
        handler = type(f"H{status}", (_Health,), {"status": status})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        out[status] = srv.server_address[1]
        started.append(srv)
    yield out
    for srv in started:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def silent() -> Iterator[list[int]]:
    """Eight ports that are taken and never answer (a server loading behind its port, or
    hung): their connections wait in the backlog."""
    socks = []
    for _ in range(8):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        socks.append(sock)
    yield [s.getsockname()[1] for s in socks]
    for sock in socks:
        sock.close()


def row(port: int | None, age_s: float = 5.0) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port, "start_time": time.time() - age_s}


def test_each_state_says_what_its_health_request_found(answering: dict[int, int]) -> None:
    closed = free_port()
    rows = [row(answering[200]), row(answering[503]), row(closed, age_s=5),
            row(closed, age_s=3600), row(None)]
    servers.health_states(rows)
    assert [r["state"] for r in rows] == ["ready", "failed", "starting", "down", "unknown"]


def test_hung_servers_read_unknown_in_one_timeout(silent: list[int],
                                                   answering: dict[int, int]) -> None:
    rows = [row(port) for port in silent] + [row(answering[200])]
    t0 = time.monotonic()
    servers.health_states(rows)
    took = time.monotonic() - t0
    assert [r["state"] for r in rows] == ["unknown"] * len(silent) + ["ready"]
    assert took < servers.HEALTH_TIMEOUT_S + 1.0, took
