"""`/health`, `/v1/models` and `/metrics` through `Host.forward_port` (LocalHost here; the SSH
forward is covered by the status tests): readiness judged with the process and log state, and
counters differenced between scrapes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from vllm_console.console.telemetry.http import ServeUrl, http_get
from vllm_console.console.telemetry.server import (
    Health,
    MetricsReader,
    judge_health,
    probe_readiness,
    totals,
)
from vllm_console.console.transport.local_host import LocalHost

METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
vllm:spec_decode_num_drafts_created{{engine="0",model_name="m"}} 1.7e9
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {draft_tokens}
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {p1}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
"""


class FakeServer:
    """A tiny HTTP/1.0 server with settable answers."""

    def __init__(self) -> None:
        self.health = 200
        self.counters = {"drafts": 100, "draft_tokens": 1500, "accepted": 17, "p0": 15, "p1": 2}
        self.hang = False
        self.port = 0
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        if self.hang:
            await asyncio.sleep(30)
        path = request.split()[1].decode()
        status, body = 404, b"not found"
        if path == "/health":
            status, body = self.health, b""
        elif path == "/v1/models":
            status, body = 200, b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
        elif path == "/metrics":
            status, body = 200, METRICS.format(**self.counters).encode()
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                     + body)
        await writer.drain()
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    srv = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = srv.sockets[0].getsockname()[1]
    async with srv:
        yield fake
        srv.close()


async def test_health_models_and_failures(server: FakeServer) -> None:
    host = LocalHost()
    url = ServeUrl("127.0.0.1", server.port)
    ready = await probe_readiness(host, url, running=True, log_ready=True, at=1.0)
    assert ready.health is Health.HEALTHY
    assert ready.models == ("m",)
    assert ready.url == f"http://127.0.0.1:{server.port}"
    server.health = 503
    dead = await probe_readiness(host, url, running=True, log_ready=True, at=2.0)
    assert (dead.health, dead.http_status, dead.models) == (Health.UNHEALTHY, 503, ())
    server.hang = True
    hung = await http_get(host, url, "/health", timeout=0.3)
    assert hung.status is None
    assert "no answer" in hung.error


async def test_a_closed_port_is_judged_with_what_else_is_known() -> None:
    result = await http_get(LocalHost(), ServeUrl("127.0.0.1", 1), "/health", timeout=2)
    assert result.error == "connection refused"
    assert judge_health(result, running=True, log_ready=False)[0] is Health.STARTING
    assert judge_health(result, running=True, log_ready=True)[0] is Health.NOT_ANSWERING
    assert judge_health(result, running=False, log_ready=True)[0] is Health.DOWN
    assert judge_health(None, running=True, log_ready=False)[0] is Health.UNKNOWN
    assert judge_health(None, running=False, log_ready=False)[0] is Health.DOWN


async def test_metrics_differenced_between_scrapes(server: FakeServer) -> None:
    reader = MetricsReader(LocalHost())
    url = ServeUrl("127.0.0.1", server.port)
    first = await reader.scrape(url)
    assert first is not None
    assert first.running == 3
    assert first.kv_cache_usage_pct == pytest.approx(25.0)
    assert reader.interval(first, 100.0) is None  # one scrape says nothing about now
    since_start = totals(first)
    assert since_start is not None
    assert since_start.mean_acceptance_length == pytest.approx(1.17)
    server.counters = {"drafts": 200, "draft_tokens": 3000, "accepted": 117, "p0": 80,
                       "p1": 37}
    second = await reader.scrape(url)
    assert second is not None
    interval = reader.interval(second, 105.0)
    assert interval is not None
    assert interval.mean_acceptance_length == pytest.approx(2.0)
    assert interval.draft_acceptance_rate_pct == pytest.approx(100 * 100 / 1500)
    assert interval.per_position == pytest.approx((0.65, 0.35))
    assert interval.accepted_throughput == pytest.approx(20.0)
    # No drafts in between: no figure (never a zero).
    assert reader.interval(await reader.scrape(url), 110.0) is None  # type: ignore[arg-type]
    # The server restarted: counters went down; the next interval counts again.
    server.counters = {"drafts": 10, "draft_tokens": 150, "accepted": 5, "p0": 4, "p1": 1}
    assert reader.interval(await reader.scrape(url), 115.0) is None  # type: ignore[arg-type]


def test_serve_urls() -> None:
    assert ServeUrl.parse("http://0.0.0.0:8000") == ServeUrl("127.0.0.1", 8000)
    assert ServeUrl.parse("127.0.0.1:9000") == ServeUrl("127.0.0.1", 9000)
    assert ServeUrl.parse("http://[::]:8001") == ServeUrl("127.0.0.1", 8001)
    assert ServeUrl("::1", 8000).base == "http://[::1]:8000"
    assert ServeUrl.parse("") is None
