"""One call per line: the kind and payload of every known line."""

from __future__ import annotations

import time

import pytest

from vllm_console.console.parsers import (
    EngineConfig,
    ErrorEvent,
    LineKind,
    NonDefaultArgs,
    SpecDecodeSample,
    StartupEvent,
    StartupPhase,
    ThroughputSample,
    VersionBanner,
    classify,
    classify_text,
    parse_line,
)

API = "(APIServer pid=1) INFO 05-14 10:02:13 [loggers.py:127] "
ENG = "(EngineCore_DP0 pid=7) INFO 05-14 10:02:03 [core.py:93] "
K = LineKind


@pytest.mark.parametrize(
    ("raw", "kind", "payload_type"),
    [
        (
            ENG + "Initializing a V1 LLM engine (v0.11.0) with config: model='/m', "
            "speculative_config=SpeculativeConfig(method='dflash', model='/d', num_spec_tokens=15)",
            K.ENGINE_START,
            EngineConfig,
        ),
        (
            API + "non-default args: {'model_tag': '/m', 'api_key': 'x'}",
            K.NON_DEFAULT_ARGS,
            NonDefaultArgs,
        ),
        (API + "vLLM server version 0.11.0, serving model /m", K.VERSION, VersionBanner),
        (
            ENG + "Using auxiliary layers from speculative config: (2, 17, 32, 47, 62)",
            K.AUX_LAYERS,
            tuple,
        ),
        (
            API + "SpecDecoding metrics: Mean acceptance length: 2.63, Accepted: 768 tokens",
            K.SPEC_DECODE,
            SpecDecodeSample,
        ),
        (
            API + "Engine 000: Avg prompt throughput: 131.0 tokens/s, Running: 1 reqs",
            K.THROUGHPUT,
            ThroughputSample,
        ),
        (ENG + "Loading weights took 138.88 seconds", K.STARTUP, StartupEvent),
        ("(APIServer pid=1) INFO:     Application startup complete.", K.STARTUP, StartupEvent),
        (
            "(EngineCore_DP0 pid=7) ERROR 05-14 10:05:11 [core.py:708] EngineCore failed to start.",
            K.ERROR,
            ErrorEvent,
        ),
        ("ValueError: Invalid DFlash layer_type(s): ['x']", K.ERROR, ErrorEvent),
        ("(APIServer pid=1) ERROR 05-14 10:05:11 [x.py:1] something broke", K.ERROR, ErrorEvent),
        ("(APIServer pid=1) WARNING 05-14 10:05:11 [x.py:1] careful", K.WARNING, type(None)),
        (
            '(APIServer pid=1) INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK',
            K.OTHER,
            type(None),
        ),
        ("(APIServer pid=1) INFO 05-28 20:28:01 [launcher.py:254] [shutdown] API server: "
         "shutdown triggered", K.SHUTDOWN, str),
        ("(APIServer pid=1) INFO:     Shutting down", K.SHUTDOWN, str),
        ("(APIServer pid=1) ERROR 05-14 10:05:11 [x.py:1] Engine core proc died unexpectedly, "
         "shutting down client.", K.ERROR, ErrorEvent),
        ("DiffusionDecoding metrics: Mean acceptance length: 3.0", K.OTHER, type(None)),
        ("", K.OTHER, type(None)),
    ],
)
def test_kinds(raw: str, kind: LineKind, payload_type: type) -> None:
    event = classify_text(raw)
    assert event.kind == kind
    assert isinstance(event.payload, payload_type)
    assert event.line == parse_line(raw)


def test_kind_values_are_the_routing_names() -> None:
    assert [k.value for k in LineKind] == [
        "engine-start",
        "non-default-args",
        "version",
        "aux-layers",
        "spec-decode",
        "throughput",
        "startup",
        "shutdown",
        "error",
        "warning",
        "other",
    ]


def test_payloads_carry_the_parsed_values() -> None:
    aux = classify_text(ENG + "Using Eagle3 auxiliary layers from config: (1, 2)")
    assert aux.payload == (1, 2)
    ready = classify_text("(APIServer pid=1) INFO:     Application startup complete.")
    assert isinstance(ready.payload, StartupEvent)
    assert ready.payload.phase is StartupPhase.READY
    dflash = classify_text(
        "(EngineCore_DP0 pid=7) ERROR 05-14 10:05:11 [core.py:708] NotImplementedError: DFlash "
        "drafters with mixed sliding/full attention require the V2 model runner; relaunch with "
        "VLLM_USE_V2_MODEL_RUNNER=1."
    )
    assert isinstance(dflash.payload, ErrorEvent)
    assert dflash.payload.dflash


def test_a_parser_bug_does_not_escape_classify(monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm_console.console.parsers.classifier as module

    def boom(message: str) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(module, "parse_startup", boom)
    assert classify(parse_line("anything")).kind == K.OTHER


def test_classify_is_fast_enough_for_a_flood() -> None:
    """A loose guard against accidental slowness (the real figure is ~300k lines/s)."""
    lines = [
        parse_line(
            '(APIServer pid=1) INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK'
        ),
        parse_line(API + "Added request cmpl-1234567890abcdef."),
        parse_line(ENG + "EngineCore waiting for work."),
    ] * 10_000
    start = time.perf_counter()
    for line in lines:
        classify(line)
    assert time.perf_counter() - start < 3.0
