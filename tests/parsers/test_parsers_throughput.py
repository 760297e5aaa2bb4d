"""The periodic throughput line."""

from __future__ import annotations

import pytest

from vllm_console.console.parsers import ThroughputSample, format_throughput, parse_throughput

CURRENT = (
    "Engine 000: Avg prompt throughput: 131.0 tokens/s, Avg generation throughput: 19.0 tokens/s,"
    " Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 36.2%"
)


def test_current_format() -> None:
    assert parse_throughput(CURRENT) == ThroughputSample(
        engine="000",
        prompt_throughput=131.0,
        generation_throughput=19.0,
        running=1,
        waiting=0,
        kv_cache_usage_pct=1.0,
        prefix_cache_hit_rate_pct=36.2,
        kv_cache_device="GPU",
    )
    assert format_throughput(parse_throughput(CURRENT) or ThroughputSample()) == CURRENT


def test_v0_format() -> None:
    sample = parse_throughput(
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, "
        "Running: 2 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 4.5%, "
        "CPU KV cache usage: 0.0%."
    )
    assert sample is not None
    assert sample.engine is None
    assert (sample.running, sample.waiting, sample.kv_cache_usage_pct) == (2, 3, 4.5)
    assert sample.prefix_cache_hit_rate_pct is None
    assert dict(sample.extra) == {"Swapped": "0 reqs", "CPU KV cache usage": "0.0%"}


def test_newer_fields_and_missing_ones() -> None:
    sample = parse_throughput(
        "Engine 001: Avg generation throughput: 55.5 tokens/s, Running: 4 reqs, "
        "Prefix cache hit rate: 10.0%, External prefix cache hit rate: 2.0%, "
        "MM cache hit rate: 0.0%"
    )
    assert sample is not None
    assert sample.engine == "001"
    assert sample.prompt_throughput is None
    assert sample.generation_throughput == 55.5
    assert sample.waiting is None
    assert sample.prefix_cache_hit_rate_pct == 10.0
    assert sample.mm_cache_hit_rate_pct == 0.0
    assert dict(sample.extra) == {"External prefix cache hit rate": "2.0%"}


@pytest.mark.parametrize(
    "message",
    ["Engine 000: idle", "SpecDecoding metrics: Accepted: 5 tokens", "prompt throughput", ""],
)
def test_not_throughput(message: str) -> None:
    assert parse_throughput(message) is None
