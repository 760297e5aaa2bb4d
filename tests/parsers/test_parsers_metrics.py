"""Prometheus `/metrics`: spec-decode counters, gauges, and differencing two scrapes."""

from __future__ import annotations

import pytest

from vllm_console.console.parsers import SpecDecodeCounters, diff_counters, parse_metrics

MODEL = "/root/models/Qwen3.6-27B"


def scrape(
    drafts: int, draft_tokens: int, accepted: int, per_pos: list[int], engines: int = 1
) -> str:
    """A /metrics body in vLLM's shape (with `_created` samples and other families around)."""
    out = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 1234.0',
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
    ]
    for e in range(engines):
        labels = f'engine="{e}",model_name="{MODEL}"'
        out += [
            f"vllm:num_requests_running{{{labels}}} 2.0",
            f"vllm:num_requests_waiting{{{labels}}} 1.0",
            f"vllm:kv_cache_usage_perc{{{labels}}} 0.{25 + e * 50}",
        ]
    for name, value in (
        ("vllm:spec_decode_num_drafts", drafts),
        ("vllm:spec_decode_num_draft_tokens", draft_tokens),
        ("vllm:spec_decode_num_accepted_tokens", accepted),
    ):
        out += [f"# HELP {name}_total help", f"# TYPE {name}_total counter"]
        for e in range(engines):
            labels = f'engine="{e}",model_name="{MODEL}"'
            out += [
                f"{name}_total{{{labels}}} {value / engines}",
                f"{name}_created{{{labels}}} 1.715e+09",
            ]
    name = "vllm:spec_decode_num_accepted_tokens_per_pos"
    out += [f"# HELP {name}_total help", f"# TYPE {name}_total counter"]
    for e in range(engines):
        for pos, value in enumerate(per_pos):
            labels = f'engine="{e}",model_name="{MODEL}",position="{pos}"'
            out += [
                f"{name}_total{{{labels}}} {value / engines}",
                f"{name}_created{{{labels}}} 1.715e+09",
            ]
    return "\n".join(out) + "\n"


def test_counters_and_gauges() -> None:
    snap = parse_metrics(scrape(100, 1500, 540, [90, 70, 50]))
    assert snap.spec_decode == SpecDecodeCounters(100, 1500, 540, (90, 70, 50))
    assert (snap.running, snap.waiting) == (2, 1)
    assert snap.kv_cache_usage_pct == pytest.approx(25.0)


def test_summed_over_engines_and_bytes_accepted() -> None:
    snap = parse_metrics(scrape(100, 1500, 540, [90, 70], engines=2).encode())
    assert snap.spec_decode == SpecDecodeCounters(100, 1500, 540, (90, 70))
    assert (snap.running, snap.waiting) == (4, 2)
    assert snap.kv_cache_usage_pct == pytest.approx(50.0)  # the mean of 25% and 75%


def test_model_filter() -> None:
    text = scrape(100, 1500, 540, [90]) + scrape(7, 7, 7, [7]).replace(MODEL, "/other")
    assert parse_metrics(text, model=MODEL).spec_decode == SpecDecodeCounters(100, 1500, 540, (90,))
    assert parse_metrics(text, model="/other").spec_decode == SpecDecodeCounters(7, 7, 7, (7,))
    assert parse_metrics(text, model="/missing").spec_decode is None


def test_old_gauge_name() -> None:
    text = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
    snap = parse_metrics(text)
    assert snap.kv_cache_usage_pct == 50.0
    assert snap.spec_decode is None
    assert snap.running is None


def test_no_spec_decode_and_empty_and_garbage() -> None:
    for text in ("", "garbage {{{ \x00 \xff", "# TYPE x counter\nx_total 1\n", "\n\n"):
        snap = parse_metrics(text)
        assert snap.spec_decode is None
        assert (snap.running, snap.waiting, snap.kv_cache_usage_pct) == (None, None, None)


def test_one_bad_line_does_not_hide_the_rest() -> None:
    text = scrape(10, 150, 54, [9]).replace(
        "# TYPE vllm:num_requests_running gauge", "# TYPE vllm:num_requests_running gauge\n}}bad"
    )
    snap = parse_metrics(text)
    assert snap.spec_decode == SpecDecodeCounters(10, 150, 54, (9,))
    assert snap.running == 2


def test_diff_counters_over_an_interval() -> None:
    prev = SpecDecodeCounters(100, 1500, 540, (90, 70, 50))
    cur = SpecDecodeCounters(200, 3000, 1080, (180, 130, 90))
    sample = diff_counters(prev, cur, seconds=10.0)
    assert sample is not None
    assert sample.mean_acceptance_length == pytest.approx(1 + 540 / 100)
    assert sample.draft_acceptance_rate_pct == pytest.approx(36.0)
    assert sample.per_position == pytest.approx((0.9, 0.6, 0.4))
    assert (sample.accepted_tokens, sample.drafted_tokens) == (540, 1500)
    assert sample.accepted_throughput == pytest.approx(54.0)
    assert sample.drafted_throughput == pytest.approx(150.0)


def test_diff_counters_with_new_positions_and_no_interval() -> None:
    prev = SpecDecodeCounters(10, 30, 12, ())
    cur = SpecDecodeCounters(20, 60, 24, (8, 4, 0))
    sample = diff_counters(prev, cur)
    assert sample is not None
    assert sample.per_position == pytest.approx((0.8, 0.4, 0.0))
    assert sample.accepted_throughput is None


@pytest.mark.parametrize(
    ("prev", "cur"),
    [
        (SpecDecodeCounters(10, 30, 12), SpecDecodeCounters(10, 30, 12)),  # no drafts: idle
        (SpecDecodeCounters(10, 30, 12), SpecDecodeCounters(3, 9, 2)),  # restarted
        (SpecDecodeCounters(10, 30, 12, (5,)), SpecDecodeCounters(20, 60, 24, (4,))),
        (None, SpecDecodeCounters(3, 9, 2)),
        (SpecDecodeCounters(3, 9, 2), None),
    ],
)
def test_diff_counters_gives_none(
    prev: SpecDecodeCounters | None, cur: SpecDecodeCounters | None
) -> None:
    assert diff_counters(prev, cur) is None


def test_zero_draft_tokens_leaves_the_rate_unknown() -> None:
    sample = diff_counters(SpecDecodeCounters(0, 0, 0), SpecDecodeCounters(5, 0, 0))
    assert sample is not None
    assert sample.mean_acceptance_length == 1.0
    assert sample.draft_acceptance_rate_pct is None


def test_a_position_label_that_is_a_digit_but_no_number_is_skipped() -> None:
    """'²'.isdigit() is true, yet int('²') raises: a hostile or broken exporter's label must
    not break the parser (parsers never raise)."""
    body = ('vllm:spec_decode_num_drafts_total 4\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="²"} 3\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 2\n')
    snap = parse_metrics(body)
    assert snap.spec_decode is not None
    assert snap.spec_decode.accepted_per_pos == (2,)
