"""Start-up phases."""

from __future__ import annotations

import pytest

from vllm_console.console.parsers import StartupEvent, StartupPhase, parse_startup

P = StartupPhase


@pytest.mark.parametrize(
    ("message", "event"),
    [
        (
            "Initializing a V1 LLM engine (v0.1.dev16016+g3cfc8f8b7) with config: model='/m'",
            StartupEvent(P.ENGINE_START, detail="0.1.dev16016+g3cfc8f8b7"),
        ),
        (
            "Starting to load model /root/models/Qwen3.6-27B...",
            StartupEvent(P.LOADING_WEIGHTS, detail="/root/models/Qwen3.6-27B"),
        ),
        (
            "Loading safetensors checkpoint shards:  45% Completed | 5/11 [01:02<01:10, 11.8s/it]",
            StartupEvent(P.LOADING_WEIGHTS, detail="45% Completed | 5/11 [01:02<01:10, 11.8s/it]"),
        ),
        (
            "Loading weights took 138.88 seconds",
            StartupEvent(P.LOADING_WEIGHTS, 138.88, "weights loaded"),
        ),
        (
            "Loading drafter model...",
            StartupEvent(P.LOADING_DRAFTER, detail="loading drafter model"),
        ),
        (
            "Model loading took 21.91 GiB memory and 152.09 seconds",
            StartupEvent(P.MODEL_LOADED, 152.09, "21.91 GiB", gib=21.91),
        ),
        (
            "Model loading took 21.91 GiB and 152.09 seconds",  # newer wording
            StartupEvent(P.MODEL_LOADED, 152.09, "21.91 GiB", gib=21.91),
        ),
        (
            "Available KV cache memory: 71.59 GiB",
            StartupEvent(P.KV_CACHE, detail="71.59 GiB", gib=71.59),
        ),
        (
            "GPU KV cache size: 1,470,588 tokens",
            StartupEvent(P.KV_CACHE, detail="1,470,588 tokens", tokens=1470588),
        ),
        (
            "Graph capturing finished in 7 secs, took 0.64 GiB",
            StartupEvent(P.GRAPH_CAPTURE, 7.0, "0.64 GiB", gib=0.64),
        ),
        (
            "init engine (profile, create kv cache, warmup model) took 205.24 seconds",
            StartupEvent(P.ENGINE_READY, 205.24, "engine initialised"),
        ),
        (
            "init engine (profile, create kv cache, warmup model) took 205.24 s",
            StartupEvent(P.ENGINE_READY, 205.24, "engine initialised"),
        ),
        (
            "Starting vLLM server on http://0.0.0.0:8000",
            StartupEvent(P.SERVER_STARTING, detail="http://0.0.0.0:8000"),
        ),
        (
            "Starting vLLM API server 0 on http://0.0.0.0:8000",
            StartupEvent(P.SERVER_STARTING, detail="http://0.0.0.0:8000"),
        ),
        (
            "Application startup complete.",
            StartupEvent(P.READY, detail="application startup complete"),
        ),
    ],
)
def test_phases(message: str, event: StartupEvent) -> None:
    assert parse_startup(message) == event


def test_phase_order() -> None:
    names = [p.value for p in sorted(StartupPhase, key=lambda p: p.order)]
    assert names == [
        "engine-start",
        "loading-weights",
        "loading-drafter",
        "model-loaded",
        "kv-cache",
        "graph-capture",
        "engine-ready",
        "server-starting",
        "ready",
    ]


@pytest.mark.parametrize(
    "message",
    [
        "Loading weights took forever",
        "Model loading took a while",
        "Graph capturing finished in no time",
        "Waiting for application startup.",
        "Started server process [1]",
        "",
    ],
)
def test_not_startup(message: str) -> None:
    assert parse_startup(message) is None


@pytest.mark.parametrize("version", ["v0.1.dev16016+g3cfc8f8b7", "0.34.0", "vllm-custom",
                                     "v0.30.0rc1"])
def test_the_engine_start_line_gives_one_version_to_the_phase_and_the_engine_config(
        version: str) -> None:
    """The start-up phase and the engine config read the engine start line one way (a `v`
    taken off before digits only): the status bar and `status --json` name the same build."""
    from vllm_console.console.parsers import parse_engine_start

    message = f"Initializing a V1 LLM engine ({version}) with config: model='/m'"
    engine = parse_engine_start(message)
    assert engine is not None
    assert parse_startup(message) == StartupEvent(P.ENGINE_START, detail=engine.version or "")
    assert engine.version == (version[1:] if version[1].isdigit() else version)
