"""Property tests: no parser raises on any input, and format/parse round-trips."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.examples import BIG_LINE, examples
from vllm_console.console.parsers import (
    LineAssembler,
    SpecDecodeCounters,
    SpecDecodeSample,
    ThroughputSample,
    diff_counters,
    format_spec_decode,
    format_throughput,
    group_tracebacks,
    parse_aux_layers,
    parse_engine_start,
    parse_error,
    parse_kwargs,
    parse_line,
    parse_metrics,
    parse_non_default_args,
    parse_repr,
    parse_spec_decode,
    parse_startup,
    parse_throughput,
    parse_version_banner,
    redact,
    split_lines,
    strip_ansi,
    to_jsonable,
)
from vllm_console.console.parsers.classifier import _classify
from vllm_console.console.parsers.redact import REDACTED, is_secret_key

# Every message-level parser; `_classify` is classify without its safety net, so a parser
# that raises fails here instead of being swallowed.
MESSAGE_PARSERS: list[Callable[[str], Any]] = [
    strip_ansi,
    split_lines,
    parse_line,
    parse_repr,
    parse_kwargs,
    parse_engine_start,
    parse_non_default_args,
    parse_version_banner,
    parse_aux_layers,
    parse_spec_decode,
    parse_throughput,
    parse_startup,
    parse_error,
    parse_metrics,
    lambda s: _classify(parse_line(s)),
    lambda s: group_tracebacks(split_lines(s)),
    lambda s: group_tracebacks([parse_line(x) for x in split_lines(s)]),
    lambda s: json.dumps(to_jsonable(parse_kwargs(s)), allow_nan=False),
    lambda s: json.dumps(to_jsonable(parse_repr(s)), allow_nan=False),
]

# Pieces of real lines, so that generated text often gets deep into the parsers.
FRAGMENTS = [
    "(APIServer pid=1) ", "(EngineCore_DP0 pid=7) ", "(VllmWorker rank=1 pid=3) ", "(", ")",
    "INFO 05-14 10:02:03 [core.py:93] ", "ERROR ", "INFO:     ", "[...v1/a.py:1] ",
    "\x1b[1;36m", "\x1b[0m", "\x1b]8;;", "\r\n", "\r", "\n", "\x00", "\x9b",
    "Initializing a V1 LLM engine (v0.1) with config: ", "model=", "'", '"', "\\",
    "SpeculativeConfig(", "method='dflash'", ", ", "=", "[", "]", "{", "}", ":", "<", ">",
    "non-default args: ", "{'api_key': ", "SpecDecoding metrics: ", "Speculative metrics: ",
    "Mean acceptance length: ", "Per-position acceptance rate: ", "Accepted: ", "%", " tokens",
    "Engine 000: ", "Avg prompt throughput: ", "Running: ", "Using auxiliary layers from "
    "speculative config: ", "vLLM server version ", "█ version ", "Loading weights took ",
    "Model loading took ", " GiB", " seconds", "GPU KV cache size: ",
    "Graph capturing finished in ",
    "Traceback (most recent call last):", '  File "a.py", line 1, in f', "ValueError: ",
    "DFlash ", "layer_types length", "EngineDeadError", "vllm:spec_decode_num_drafts_total",
    '{position="0"}', " 1e309", "nan", "-", ".", "1", "99999999999999999999", "0x1f", "None",
]  # fmt: skip

any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=400)
vllmish_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=60
).map("".join)
texts = st.one_of(any_text, vllmish_text)


@pytest.mark.parametrize("parser", MESSAGE_PARSERS)
@given(text=texts)
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_no_parser_raises_on_any_text(parser: Callable[[str], Any], text: str) -> None:
    parser(text)


@given(data=st.binary(max_size=600))
@settings(deadline=None)
def test_bytes_input_never_raises(data: bytes) -> None:
    line = parse_line(data)
    _classify(line)
    split_lines(data)
    parse_metrics(data)
    asm = LineAssembler()
    asm.feed(data)
    asm.feed(data[::-1])
    asm.flush()
    for parser in MESSAGE_PARSERS:
        parser(data.decode("utf-8", errors="replace"))


@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=8))
def test_assembler_matches_split_lines_wherever_the_stream_is_cut(
    data: bytes, cuts: list[int]
) -> None:
    asm = LineAssembler()
    lines: list[str] = []
    start = 0
    for cut in sorted(c for c in cuts if c <= len(data)):
        lines += asm.feed(data[start:cut])
        start = cut
    lines += asm.feed(data[start:])
    lines += asm.flush()
    assert lines == split_lines(data)


def _big_inputs() -> list[tuple[str, str]]:
    mb = BIG_LINE
    return [
        ("letters", "a" * mb),
        ("opens", "(" * mb),
        ("brackets", "[" * mb),
        ("braces", "{" * mb),
        ("quotes", "'" * mb),
        ("backslash-quotes", "'" + "\\'" * (mb // 2)),
        ("angles", "<" * mb),
        ("commas", "," * mb),
        ("colons", ":" * mb),
        ("kwargs", "a=" * (mb // 2)),
        ("calls", "f(" * (mb // 2)),
        ("digits", "9" * mb),
        ("nul", "\x00" * mb),
        ("escapes", "\x1b[" * (mb // 2)),
        ("osc", "\x1b]" * (mb // 2)),
        ("pid-tags", "(x pid=1" * (mb // 8)),
        ("engine", "Initializing a V1 LLM engine (v1) with config: " + "k=[" * (mb // 3)),
        ("args", "non-default args: {" + "'a': [" * (mb // 6)),
        ("spec", "SpecDecoding metrics: " + "Accepted: 1, " * (mb // 13)),
        ("per-pos", "SpecDecoding metrics: Per-position acceptance rate: " + "0.5, " * (mb // 5)),
        ("throughput", "Avg prompt throughput: " + "9" * mb),
        ("aux", "Using auxiliary layers from speculative config: (" + "1, " * (mb // 3)),
        ("traceback", 'File "' + "x" * mb),
        ("exception", "A." * (mb // 2) + "Error: x"),
        ("metrics", "vllm:spec_decode_num_drafts_total{" * (mb // 34)),
        ("newlines", "\r\n" * (mb // 2)),
        # Shapes that made earlier drafts quadratic: look-ahead that failed and rescanned.
        ("nested-angles", "[" + "<<,>," * (mb // 5)),
        ("unterminated-strings", "['" + "a\n, '" * (mb // 6)),
        ("load-model-spaces", "Starting to load model " + " " * mb + "x"),
        ("banner-spaces", "vLLM server version 1 serving model x" + " " * mb + "y"),
        ("logo-spaces", "\u2588 version 1" + "a" * 150 + " " * mb + "y"),
        ("stray-osc", "\x1b]" * 3 + "a" * mb),
    ]


@pytest.mark.parametrize(("name", "text"), _big_inputs(), ids=[n for n, _ in _big_inputs()])
def test_huge_lines_neither_raise_nor_hang(name: str, text: str) -> None:
    """A megabyte on one line (a quarter of it in the loop, tests/examples.py)."""
    for parser in MESSAGE_PARSERS:
        # CPU time, not wall time: a quadratic blow-up shows here whatever else the machine
        # runs, and a busy machine does not make a linear parser look like a hang.
        start = time.process_time()
        parser(text)
        elapsed = time.process_time() - start
        assert elapsed < 5.0 * BIG_LINE / (1 << 20), \
            f"{name}: {parser} took {elapsed:.1f} s of CPU on {len(text)} characters"
    parse_line(text.encode("utf-8", errors="surrogatepass"))


# Values on the grid vLLM prints (2, 2, 1 and 3 decimals), so they survive formatting exactly.
def _grid(scale: int, hi: int) -> st.SearchStrategy[float]:
    return st.integers(0, hi).map(lambda n: n / scale)


# "Extra ..." labels never collide with a label the parsers know.
_label = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz").map(
    lambda s: ("Extra " + s).strip()
)
_extra = st.lists(
    st.tuples(
        _label,
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 %/", min_size=1).map(str.strip),
    ).filter(lambda pair: bool(pair[1])),
    max_size=3,
)

spec_samples = st.builds(
    SpecDecodeSample,
    mean_acceptance_length=st.none() | _grid(100, 1600),
    draft_acceptance_rate_pct=st.none() | _grid(10, 1000),
    per_position=st.lists(_grid(1000, 1000), max_size=16).map(tuple),
    accepted_tokens=st.none() | st.integers(0, 10**12),
    drafted_tokens=st.none() | st.integers(0, 10**12),
    accepted_throughput=st.none() | _grid(100, 10**8),
    drafted_throughput=st.none() | _grid(100, 10**8),
    extra=_extra.map(tuple),
)


@given(sample=spec_samples)
def test_spec_decode_round_trip(sample: SpecDecodeSample) -> None:
    assert parse_spec_decode(format_spec_decode(sample)) == sample


throughput_samples = st.builds(
    ThroughputSample,
    engine=st.none() | st.integers(0, 999).map(lambda n: f"{n:03d}"),
    prompt_throughput=st.none() | _grid(10, 10**7),
    generation_throughput=st.none() | _grid(10, 10**7),
    running=st.none() | st.integers(0, 10**6),
    waiting=st.none() | st.integers(0, 10**6),
    kv_cache_usage_pct=st.none() | _grid(10, 1000),
    prefix_cache_hit_rate_pct=st.none() | _grid(10, 1000),
    extra=_extra.map(tuple),
    aggregated_engines=st.none() | st.integers(2, 64),
    kv_cache_device=st.none() | st.sampled_from(["GPU", "XPU", "CPU"]),
    deferred=st.none() | st.integers(0, 10**6),
    kv_fetch=st.none() | st.tuples(*[st.integers(0, 10**6)] * 3),
    preemptions=st.none() | st.integers(0, 10**6),
    corrupted=st.none() | st.integers(0, 10**6),
    mm_cache_hit_rate_pct=st.none() | _grid(10, 1000),
)


@given(sample=throughput_samples)
def test_throughput_round_trip(sample: ThroughputSample) -> None:
    if sample.prompt_throughput is None and sample.generation_throughput is None:
        return  # a line needs one of them to be recognised at all
    # A line names its engine or the aggregate, not both; a device only with its usage.
    sample = replace(
        sample,
        aggregated_engines=None if sample.engine is not None else sample.aggregated_engines,
        kv_cache_device=sample.kv_cache_device if sample.kv_cache_usage_pct is not None
        else None)
    assert parse_throughput(format_throughput(sample)) == sample


counters = st.builds(
    SpecDecodeCounters,
    num_drafts=st.integers(0, 10**9),
    num_draft_tokens=st.integers(0, 10**10),
    num_accepted_tokens=st.integers(0, 10**10),
    accepted_per_pos=st.lists(st.integers(0, 10**9), max_size=16).map(tuple),
)


@given(prev=counters, cur=counters, seconds=st.none() | st.floats(allow_nan=True))
def test_diff_counters_never_raises_and_is_consistent(
    prev: SpecDecodeCounters, cur: SpecDecodeCounters, seconds: float | None
) -> None:
    sample = diff_counters(prev, cur, seconds)
    if sample is None:
        return
    drafts = cur.num_drafts - prev.num_drafts
    assert drafts > 0
    assert sample.accepted_tokens is not None
    assert sample.mean_acceptance_length == pytest.approx(1 + sample.accepted_tokens / drafts)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(value=json_values)
def test_redact_leaves_no_secret_value(value: Any) -> None:
    out = redact(value)

    def check(node: Any) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                if is_secret_key(key) and child is not None:
                    assert child == REDACTED
                else:
                    check(child)
        elif isinstance(node, list):
            for child in node:
                check(child)

    check(out)
    json.dumps(out)


label_values = st.text(alphabet=st.sampled_from('ab}{,="\\\n 1.'), max_size=8)
sample_lines = st.builds(
    lambda name, labels, value, stamp: name + (
        "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    + f" {value}" + (f" {stamp}" if stamp is not None else ""),
    st.from_regex(r"vllm:[a-z_]{1,12}", fullmatch=True),
    st.dictionaries(st.sampled_from(["engine", "model_name", "le", "position"]),
                    label_values.map(lambda v: v.replace("\\", "\\\\").replace('"', '\\"')
                                     .replace("\n", "\\n")), max_size=3),
    st.sampled_from(["1", "0.5", "1e3", "+Inf", "-Inf", "NaN", "12345678901"]),
    st.none() | st.integers(0, 2**41))


@given(lines=st.lists(sample_lines, min_size=1, max_size=6))
def test_the_metrics_reader_reads_what_prometheus_client_reads(lines: list[str]) -> None:
    """The console reads `/metrics` with a parser of its own (prometheus_client's took ~15 µs
    a line, every scrape): on well-formed text it must give exactly prometheus_client's
    samples, escapes in label values included."""
    import math

    from prometheus_client.parser import text_string_to_metric_families

    from vllm_console.console.parsers.metrics import _samples

    text = "\n".join(lines) + "\n"

    def norm(samples: Any) -> list[tuple[str, dict[str, str], object]]:
        return [(s.name, s.labels, "nan" if math.isnan(s.value) else s.value)
                for s in samples]

    theirs = norm(s for family in text_string_to_metric_families(text) for s in family.samples)
    assert norm(_samples(text)) == theirs
