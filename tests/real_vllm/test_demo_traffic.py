"""`make demo-real`'s traffic (tests/real_vllm/traffic.py) against a small HTTP server on
loopback that answers as vLLM would: loopback only, bounded in count and time, none while the
server is not ready, and it stops when told."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.real_vllm.traffic import Traffic


class FakeServer:
    def __init__(self) -> None:
        self.ready = True
        self.completions: list[dict[str, object]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(200 if server.ready else 503)
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                server.completions.append({"path": self.path, **json.loads(body)})
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b'{"choices": [{"text": "x"}]}')

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.http.shutdown()


def test_it_sends_a_bounded_number_of_completions_and_ends(server: FakeServer) -> None:
    traffic = Traffic(server.url, "/models/tiny", max_requests=3, interval_s=0.01,
                      max_tokens=8).start()
    deadline = time.monotonic() + 10
    while traffic.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not traffic.running
    assert len(server.completions) == 3
    assert traffic.answered == 3
    assert {c["path"] for c in server.completions} == {"/v1/completions"}
    assert all(c["model"] == "/models/tiny" and c["max_tokens"] == 8
               for c in server.completions)


def test_it_waits_while_the_server_is_not_ready_and_stops_when_told(server: FakeServer) -> None:
    server.ready = False  # starting, or restarting from the console
    traffic = Traffic(server.url, "m", interval_s=0.01).start()
    time.sleep(0.5)
    assert server.completions == []
    server.ready = True
    deadline = time.monotonic() + 10
    while not server.completions and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.completions
    traffic.stop()
    assert not traffic.running
    sent = len(server.completions)
    time.sleep(0.2)
    assert len(server.completions) == sent


def test_it_ends_at_its_time_bound(server: FakeServer) -> None:
    traffic = Traffic(server.url, "m", max_s=0.3, interval_s=0.05).start()
    time.sleep(1.0)
    assert not traffic.running
    assert 1 <= len(server.completions) <= 8


def test_it_goes_to_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        Traffic("http://10.1.2.3:8000", "m")
