"""vLLM's serving series: latency histograms into a recent window's percentiles, request
outcomes, data-parallel engines. The bodies are real vLLM 0.32.0 `/metrics` scrapes
(tests/data/real_formats/0.32.0/serving-*.txt: the tiny target idle, then after six requests)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_console.console.parsers.metrics import parse_metrics
from vllm_console.console.parsers.serving import (
    Histogram,
    counter_delta,
    histogram_delta,
    percentiles,
    quantile,
)

DATA = Path(__file__).parents[1] / "data" / "real_formats" / "0.32.0"
IDLE = (DATA / "serving-idle.txt").read_text()
TRAFFIC = (DATA / "serving-traffic.txt").read_text()


def serving(text: str):  # type: ignore[no-untyped-def]
    found = parse_metrics(text).serving
    assert found is not None
    return found


def two_engines(text: str) -> str:
    """A data-parallel body: every engine-0 series again as engine 1."""
    extra = [line.replace('engine="0"', 'engine="1"') for line in text.splitlines()
             if line.startswith("vllm:") and 'engine="0"' in line]
    return text + "\n".join(extra) + "\n"


def test_a_real_scrape_gives_the_histograms_counts_and_outcomes() -> None:
    merged = serving(TRAFFIC).merged
    assert set(merged.latency) == {"ttft_s", "itl_s", "e2e_s", "queue_s"}
    ttft = merged.latency["ttft_s"]
    assert ttft.count == 6
    assert ttft.buckets[-1] == (math.inf, 6.0)
    assert dict(ttft.buckets)[0.1] == 6.0
    assert dict(ttft.buckets)[0.08] == 0.0
    assert merged.generation_tokens == 210
    assert merged.preemptions == 0
    assert merged.finished == {"stop": 0, "length": 6, "abort": 0, "error": 0, "repetition": 0}
    assert (merged.running, merged.waiting) == (0, 0)


def test_percentiles_over_the_window_between_two_real_scrapes() -> None:
    before, after = serving(IDLE).merged, serving(TRAFFIC).merged
    e2e = histogram_delta(before.latency["e2e_s"], after.latency["e2e_s"])
    # Six requests: two <= 0.3 s, three in (0.3, 0.5], one in (0.5, 0.8] (the real buckets).
    found = percentiles(e2e)
    assert found is not None
    assert found["p50"] == pytest.approx(0.3 + 0.2 * (3 - 2) / 3)
    assert found["p90"] == pytest.approx(0.5 + 0.3 * (5.4 - 5) / 1)
    assert found["p99"] == pytest.approx(0.5 + 0.3 * (5.94 - 5) / 1)
    ttft = percentiles(histogram_delta(before.latency["ttft_s"], after.latency["ttft_s"]))
    assert ttft is not None
    assert 0.08 < ttft["p50"] <= 0.1


def test_a_window_without_new_requests_has_no_percentile_not_a_stale_one() -> None:
    after = serving(TRAFFIC).merged
    window = histogram_delta(after.latency["ttft_s"], after.latency["ttft_s"])
    assert window is not None
    assert window.count == 0
    assert percentiles(window) is None


def test_a_restart_between_scrapes_gives_null_never_a_negative_figure() -> None:
    before, after = serving(TRAFFIC).merged, serving(IDLE).merged  # counters went back to 0
    assert histogram_delta(before.latency["e2e_s"], after.latency["e2e_s"]) is None
    assert counter_delta(before.generation_tokens, after.generation_tokens) is None
    assert counter_delta(after.generation_tokens, before.generation_tokens) == 210


def test_data_parallel_engines_are_kept_apart_and_merged_by_bucket() -> None:
    scrape = serving(two_engines(TRAFFIC))
    assert set(scrape.by_engine) == {"0", "1"}
    assert scrape.by_engine["1"].latency["e2e_s"].count == 6
    merged = scrape.merged
    assert merged.latency["e2e_s"].count == 12
    assert dict(merged.latency["e2e_s"].buckets)[0.3] == 4
    assert merged.generation_tokens == 420
    assert merged.finished["length"] == 12
    # Doubling every bucket leaves the percentiles where they were.
    one = percentiles(serving(TRAFFIC).merged.latency["e2e_s"])
    assert percentiles(merged.latency["e2e_s"]) == one


def test_the_older_inter_token_name_is_read() -> None:
    older = TRAFFIC.replace("vllm:inter_token_latency_seconds",
                            "vllm:time_per_output_token_seconds")
    itl = serving(older).merged.latency["itl_s"]
    assert itl.count == 204


def test_a_model_filter_and_a_body_without_serving_series() -> None:
    assert parse_metrics(TRAFFIC, model="another").serving is None
    assert parse_metrics("").serving is None
    assert parse_metrics("garbage {{{").serving is None


def test_quantile_follows_prometheus_histogram_quantile() -> None:
    h = Histogram(((0.1, 0.0), (1.0, 10.0), (math.inf, 10.0)), 10.0)
    assert quantile(0.5, h) == pytest.approx(0.55)
    # A rank in the +Inf bucket answers the highest finite bound.
    h = Histogram(((0.1, 1.0), (1.0, 2.0), (math.inf, 10.0)), 10.0)
    assert quantile(0.9, h) == 1.0
    # The lowest bucket starts at 0.
    assert quantile(0.5, Histogram(((2.0, 4.0), (math.inf, 4.0)), 4.0)) == 1.0
    assert quantile(0.5, Histogram(((1.0, 0.0), (math.inf, 0.0)), 0.0)) is None
    assert quantile(0.5, None) is None


@given(st.lists(st.integers(0, 50), min_size=1, max_size=8),
       st.floats(0.01, 0.99, allow_nan=False))
def test_a_quantile_lies_inside_the_buckets_and_grows_with_q(counts: list[int],
                                                             q: float) -> None:
    bounds = [0.01 * 2 ** i for i in range(len(counts))] + [math.inf]
    cumulative, total = [], 0
    for c in [*counts, 0]:
        total += c
        cumulative.append(float(total))
    h = Histogram(tuple(zip(bounds, cumulative, strict=True)), float(total))
    value = quantile(q, h)
    if total == 0:
        assert value is None
        return
    assert value is not None
    assert 0 <= value <= bounds[-2]
    higher = quantile(min(0.999, q + 0.005), h)
    assert higher is not None
    assert higher >= value - 1e-12


def test_a_real_scrape_gives_the_phases_and_the_request_shapes() -> None:
    """TPOT, prefill, decode and the prompt/generation lengths (the URL screen's table) are
    read beside the four latency figures, and merged across engines like them."""
    merged = serving(TRAFFIC).merged
    assert set(merged.detail) == {"tpot_s", "prefill_s", "decode_s", "prompt_tokens",
                                  "generation_tokens"}
    prompt = merged.detail["prompt_tokens"]
    assert prompt.count == 6
    assert dict(prompt.buckets)[5.0] == 6.0  # six prompts of 3-5 tokens
    assert dict(merged.detail["generation_tokens"].buckets)[50.0] == 5.0
    assert serving(two_engines(TRAFFIC)).merged.detail["decode_s"].count == 12
    assert set(serving(IDLE).merged.detail) == set(merged.detail)
