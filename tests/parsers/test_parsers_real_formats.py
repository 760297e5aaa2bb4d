"""The parsers on what real vLLM 0.30-0.34 prints: samples made by each release's own logging and
metrics code (tests/data/real_formats, see its README), unit and property tests per release."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.examples import examples
from vllm_console.console.parsers import (
    ErrorKind,
    LineKind,
    StartupPhase,
    classify_text,
    parse_aux_layers,
    parse_metrics,
    parse_non_default_args,
    parse_startup,
    parse_throughput,
    split_lines,
    strip_ansi,
)

DATA = Path(__file__).parents[1] / "data" / "real_formats"
VERSIONS = ("0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
FILES = ("serve.log", "serve.color.log", "stats.log", "failure.log")


def lines(version: str, name: str) -> list[str]:
    return split_lines((DATA / version / name).read_bytes())


def events(version: str, name: str) -> list:
    return [classify_text(line) for line in lines(version, name)]


def kinds(version: str, name: str) -> set[LineKind]:
    return {e.kind for e in events(version, name)}


def test_samples_exist_for_every_release() -> None:
    for version in VERSIONS:
        for name in (*FILES, "metrics.txt"):
            assert (DATA / version / name).stat().st_size > 0, (version, name)


@pytest.mark.parametrize("version", VERSIONS)
def test_serve_log_reads_as_a_start_with_dflash(version: str) -> None:
    evs = events(version, "serve.log")
    found = {e.kind for e in evs}
    assert {LineKind.VERSION, LineKind.NON_DEFAULT_ARGS, LineKind.ENGINE_START,
            LineKind.AUX_LAYERS, LineKind.STARTUP, LineKind.THROUGHPUT,
            LineKind.SPEC_DECODE} <= found
    banner = [e.payload for e in evs if e.kind is LineKind.VERSION]
    assert version in {b.version for b in banner}
    assert "/root/models/Qwen3.6-27B" in {b.model for b in banner}
    engine = next(e.payload for e in evs if e.kind is LineKind.ENGINE_START)
    assert engine.version == version
    assert engine.speculative.method == "dflash"
    assert engine.speculative.num_spec_tokens == 15


@pytest.mark.parametrize("version", VERSIONS)
def test_spec_flags_in_non_default_args_give_the_speculative_config(version: str) -> None:
    args = next(e.payload for e in events(version, "serve.log")
                if e.kind is LineKind.NON_DEFAULT_ARGS)
    assert args.args["spec_method"] == "dflash"
    assert args.speculative is not None
    assert args.speculative.method == "dflash"
    assert args.speculative.model == "/root/models/Qwen3.6-27B-DFlash"
    assert args.speculative.num_spec_tokens == 15
    assert args.args["api_key"] != "sk-secret-1234"


def test_spec_flags_and_speculative_config_together() -> None:
    """A speculative_config dict is what the engine gets; the flags only fill what it lacks."""
    args = parse_non_default_args(
        "non-default args: {'speculative_config': {'method': 'eagle3', 'model': '/m/d'}, "
        "'spec_tokens': 4}")
    assert args is not None
    assert args.speculative is not None
    assert (args.speculative.method, args.speculative.model,
            args.speculative.num_spec_tokens) == ("eagle3", "/m/d", 4)
    plain = parse_non_default_args("non-default args: {'model': '/m/t'}")
    assert plain is not None
    assert plain.speculative is None


@pytest.mark.parametrize("version", VERSIONS)
def test_v2_runner_load_is_the_loading_phase(version: str) -> None:
    evs = events(version, "serve.log")
    scratch = [e for e in evs if "Loading model from scratch" in e.line.message]
    assert scratch
    assert all(e.kind is LineKind.STARTUP for e in scratch)
    assert scratch[0].payload.phase is StartupPhase.LOADING_WEIGHTS


@pytest.mark.parametrize("version", VERSIONS)
def test_every_aux_layer_wording_is_evidence(version: str) -> None:
    aux = [e for e in events(version, "serve.log") if "auxiliary layers" in e.line.message]
    assert aux
    for e in aux:
        assert e.kind is LineKind.AUX_LAYERS, e.line.message
        assert e.payload == (2, 17, 32, 47, 62)
    wordings = {e.line.message.split(":")[0] for e in aux}
    assert "Using Eagle3 auxiliary layers from model" in wordings


def test_aux_layer_wordings() -> None:
    for text in ("Using Eagle3 auxiliary layers from model: (2, 17)",
                 "Using Eagle3 auxiliary layers from config: (2, 17)",
                 "Using auxiliary layers from speculative config: (2, 17)"):
        assert parse_aux_layers(text) == (2, 17), text


@pytest.mark.parametrize("version", VERSIONS)
def test_kv_lines(version: str) -> None:
    kv = [e for name in ("serve.log", "stats.log") for e in events(version, name)
          if "KV cache size" in e.line.message]
    assert kv
    for e in kv:
        assert e.kind is LineKind.STARTUP, e.line.message
        assert e.payload.phase is StartupPhase.KV_CACHE
        assert e.payload.tokens == 1234567


def test_kv_line_pools() -> None:
    host = parse_startup("GPU + host KV cache size: 1,234,567 tokens, Maximum concurrency for "
                         "262,144 tokens per request: 4.71x")
    assert host is not None
    assert host.tokens == 1234567
    assert "host" in host.detail
    cpu = parse_startup("CPU KV cache size: 4,096 tokens, Maximum concurrency for 512 tokens "
                        "per request: 8.00x")
    assert cpu is not None
    assert cpu.tokens == 4096


@pytest.mark.parametrize("version", VERSIONS)
def test_every_stat_line_variant(version: str) -> None:
    samples = [e.payload for e in events(version, "stats.log") if e.kind is LineKind.THROUGHPUT]
    assert samples
    for s in samples:
        assert s.prompt_throughput is not None
        assert s.running is not None
        assert s.kv_cache_usage_pct == pytest.approx(7.3), s
    devices = {s.kv_cache_device for s in samples}
    assert {"GPU", "XPU", "CPU"} <= devices
    by_engine = {(s.engine, s.aggregated_engines) for s in samples}
    assert ("000", None) in by_engine
    assert (None, 2) in by_engine
    deferred = [s for s in samples if s.deferred is not None]
    if version >= "0.31":  # KV fetch and Deferred are newer than 0.30
        assert deferred
        assert deferred[0].deferred == 2
        assert deferred[0].waiting == 3
    assert any(s.mm_cache_hit_rate_pct == pytest.approx(40.0) for s in samples)
    assert any(s.corrupted == 0 for s in samples)
    for s in samples:
        for label, _ in s.extra:
            assert label.split()[0] in ("KV", "External"), s.extra


def test_stat_line_fields() -> None:
    s = parse_throughput(
        "Engine 001: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 "
        "tokens/s, Running: 3 reqs, Waiting: 5 reqs, Deferred: 2 reqs, KV fetch: 1 waiting to "
        "start, 2 in progress, 3 completed waiting, Preemptions: 4, XPU KV cache usage: 7.5%, "
        "Prefix cache hit rate: 36.2%, Corrupted: 1 reqs, MM cache hit rate: 40.0%")
    assert s is not None
    assert (s.engine, s.running, s.waiting, s.deferred) == ("001", 3, 5, 2)
    assert s.kv_fetch == (1, 2, 3)
    assert (s.preemptions, s.corrupted) == (4, 1)
    assert (s.kv_cache_device, s.kv_cache_usage_pct) == ("XPU", 7.5)
    assert s.mm_cache_hit_rate_pct == 40.0
    agg = parse_throughput("2 Engines Aggregated: Avg prompt throughput: 262.0 tokens/s, "
                           "Running: 11 reqs")
    assert agg is not None
    assert agg.engine is None
    assert agg.aggregated_engines == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_colour_form_reads_like_the_plain_one(version: str) -> None:
    plain = [(e.kind, e.line.proc, e.line.level, e.line.message)
             for e in events(version, "serve.log")]
    colour = [(e.kind, e.line.proc, e.line.level, strip_ansi(e.line.message))
              for e in events(version, "serve.color.log")]
    assert colour == plain


@pytest.mark.parametrize("version", VERSIONS)
def test_banner_is_one_record_of_six_lines(version: str) -> None:
    raw = (DATA / version / "serve.log").read_text()
    record = raw.split("\n", 1)[0]  # the record's own line breaks are \r\n
    parts = record.split("\r\n")
    assert len(parts) == 1 or len(parts) == 6
    banner = [ln for ln in lines(version, "serve.log")[:6]]
    assert len(banner) == 6
    evs = [classify_text(ln) for ln in banner]
    assert all(e.line.proc == "APIServer" and e.line.level == "INFO" for e in evs)
    assert [e.payload.version for e in evs if e.kind is LineKind.VERSION and e.payload.version]


@pytest.mark.parametrize("version", VERSIONS)
def test_unprefixed_lines(version: str) -> None:
    """From 0.31 the prefix is part of vLLM's log format: what uvicorn, tqdm and Python print
    themselves has none. In 0.30 a wrapper around stdout prefixed everything."""
    evs = events(version, "serve.log")
    ready = next(e for e in evs if "Application startup complete" in e.line.message)
    assert ready.kind is LineKind.STARTUP
    assert ready.payload.phase is StartupPhase.READY
    assert ready.line.level == "INFO"
    tqdm = [e for e in evs if "checkpoint shards" in e.line.message]
    assert tqdm
    assert all(e.kind is LineKind.STARTUP for e in tqdm)
    prefixed = version < "0.31"
    assert (ready.line.proc is not None) is prefixed
    # tqdm starts each redraw with `\r`: even 0.30's wrapper left its prefix alone on the line
    # before the bar.
    assert all(e.line.proc is None for e in tqdm)


@pytest.mark.parametrize("version", VERSIONS)
def test_failed_start(version: str) -> None:
    evs = events(version, "failure.log")
    errors = {e.payload.kind for e in evs if e.kind is LineKind.ERROR}
    assert ErrorKind.TRACEBACK in errors
    if version < "0.34":  # 0.34 has no V1 GPU runner to fall back to
        assert ErrorKind.DFLASH_NEEDS_V2_RUNNER in errors
        fallback = [e for e in evs if "does not yet support" in e.line.message]
        assert [(e.kind, e.line.proc) for e in fallback] == [(LineKind.WARNING, "APIServer")]
    if "0.32" <= version < "0.34":
        # The engine config refuses the drafter in the API server: no engine ever starts.
        assert not any(e.line.proc == "EngineCore" for e in evs)
        assert ErrorKind.ENGINE_FAILED not in errors
        refusal = next(e for e in evs if e.kind is LineKind.ERROR
                       and e.payload.kind is ErrorKind.DFLASH_NEEDS_V2_RUNNER)
        assert "Model Runner V1 does not support" in refusal.line.message
        return
    assert {ErrorKind.ENGINE_FAILED, ErrorKind.ENGINE_INIT_FAILED, ErrorKind.PROCESS_DIED} <= errors
    died = next(e for e in evs if e.kind is LineKind.ERROR
                and e.payload.kind is ErrorKind.PROCESS_DIED)
    assert died.line.message == "Process EngineCore:"


@pytest.mark.parametrize("version", VERSIONS)
def test_metrics(version: str) -> None:
    snap = parse_metrics((DATA / version / "metrics.txt").read_text())
    assert snap.spec_decode is not None
    assert snap.spec_decode.num_drafts == 40
    assert snap.spec_decode.num_draft_tokens == 120
    assert snap.spec_decode.num_accepted_tokens == 60
    assert snap.spec_decode.accepted_per_pos == (30, 20, 10)


@pytest.mark.parametrize("version", VERSIONS)
def test_metrics_without_created_series(version: str) -> None:
    """With several API servers vLLM serves /metrics in multiprocess mode: no `_created`."""
    text = (DATA / version / "metrics.txt").read_text()
    bare = "\n".join(ln for ln in text.splitlines() if "_created" not in ln) + "\n"
    assert parse_metrics(bare) == parse_metrics(text)


ALL_LINES = sorted({ln for v in VERSIONS for name in FILES for ln in lines(v, name)})


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_LINES), st.integers(0, 400), st.integers(0, 400), st.text(max_size=8))
def test_real_lines_cut_and_spliced_never_raise(line: str, a: int, b: int, junk: str) -> None:
    """Any piece of a real line, with anything spliced in, classifies without raising."""
    for text in (line[a:b], line[:a] + junk + line[a:], junk + line, line + junk):
        ev = classify_text(text)
        assert ev.kind in LineKind


@settings(max_examples=examples(200))
@given(st.sampled_from(ALL_LINES))
def test_real_lines_classify_the_same_every_time(line: str) -> None:
    assert classify_text(line) == classify_text(line)
