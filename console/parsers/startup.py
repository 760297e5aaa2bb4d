"""Start-up progress: the phases a `vllm serve` goes through before it answers requests.

Loading a large target and drafter takes minutes, during which the HTTP port refuses or hangs;
these lines show where it is. `Application startup complete.` (the vocabulary's `READY_LINE`) is
the ready signal (vLLM prints no "Uvicorn running on" line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from vllm_console.console.hostside.vocabulary import ENGINE_START, READY_LINE, engine_start


class StartupPhase(StrEnum):
    """Start-up phases, in the order they happen."""

    ENGINE_START = "engine-start"
    LOADING_WEIGHTS = "loading-weights"
    LOADING_DRAFTER = "loading-drafter"
    MODEL_LOADED = "model-loaded"
    KV_CACHE = "kv-cache"
    GRAPH_CAPTURE = "graph-capture"
    ENGINE_READY = "engine-ready"
    SERVER_STARTING = "server-starting"
    READY = "ready"

    @property
    def order(self) -> int:
        """Position in the start-up sequence, 0 first."""
        return _ORDER[self]


_ORDER = {phase: i for i, phase in enumerate(StartupPhase)}


@dataclass(frozen=True, slots=True)
class StartupEvent:
    """A start-up step: its phase, how long it took when the line says, and the rest in words.

    `gib` and `tokens` carry the memory and KV-cache size figures of the lines that have them.
    """

    phase: StartupPhase
    seconds: float | None = None
    detail: str = ""
    gib: float | None = None
    tokens: int | None = None


_NUM = r"(\d+(?:\.\d+)?)"
_WEIGHTS_TOOK = re.compile(rf"Loading weights took {_NUM} s")
_MODEL_LOADED = re.compile(rf"Model loading took {_NUM} ?GiB(?: memory)? and {_NUM} s")
_KV_MEMORY = re.compile(rf"Available KV cache memory: {_NUM} ?GiB")
# `GPU KV cache size: N tokens, Maximum concurrency for ...` (`XPU`, `CPU` on other devices;
# `GPU + host` with a host pool, 0.33+).
_KV_SIZE = re.compile(r"(?:(?P<pool>[A-Za-z]{1,10}(?: \+ host)?) )?KV cache size: "
                      r"(?P<tokens>[\d,]{1,30}) tokens")
_GRAPHS = re.compile(rf"Graph capturing finished in {_NUM} secs?(?:, took {_NUM} ?GiB)?")
_INIT_ENGINE = re.compile(rf"init engine \(.{{0,200}}?\) took {_NUM} s")
_SERVER = re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on (\S{1,500})")


def parse_startup(message: str) -> StartupEvent | None:
    """The start-up step a line reports; None for any other line.

    The engine start line is also `ENGINE_START` here (with the version as detail), so a
    progress display can follow the whole sequence from this parser alone.
    """
    # Substring checks first: this runs on every line.
    if ENGINE_START in message:
        start = engine_start(message)
        if start is not None:
            return StartupEvent(StartupPhase.ENGINE_START, detail=start[1])
    elif "Starting to load model" in message:
        model = message.split("Starting to load model", 1)[1].strip()
        model = model.removesuffix("...").strip()[:1000]
        return StartupEvent(StartupPhase.LOADING_WEIGHTS, detail=model)
    elif "Loading model from scratch" in message:  # the V2 model runner (default since 0.30)
        return StartupEvent(StartupPhase.LOADING_WEIGHTS, detail="loading model from scratch")
    elif "Loading weights took" in message:
        m = _WEIGHTS_TOOK.search(message)
        if m is not None:
            return StartupEvent(StartupPhase.LOADING_WEIGHTS, float(m[1]), "weights loaded")
    elif "Loading safetensors checkpoint shards" in message:
        detail = message.split("shards:", 1)[-1].strip()[:200]
        return StartupEvent(StartupPhase.LOADING_WEIGHTS, detail=detail)
    elif "Loading drafter model" in message:
        return StartupEvent(StartupPhase.LOADING_DRAFTER, detail="loading drafter model")
    elif "Model loading took" in message:
        m = _MODEL_LOADED.search(message)
        if m is not None:
            secs = float(m[2])
            return StartupEvent(StartupPhase.MODEL_LOADED, secs, f"{m[1]} GiB", gib=float(m[1]))
    elif "KV cache memory" in message:
        m = _KV_MEMORY.search(message)
        if m is not None:
            return StartupEvent(StartupPhase.KV_CACHE, detail=f"{m[1]} GiB", gib=float(m[1]))
    elif "KV cache size" in message:
        m = _KV_SIZE.search(message)
        if m is not None:
            tokens = int(m["tokens"].replace(",", "")[:18] or 0)
            pool = f" ({m['pool']})" if m["pool"] not in (None, "GPU") else ""
            return StartupEvent(StartupPhase.KV_CACHE, detail=f"{m['tokens']} tokens{pool}",
                                tokens=tokens)
    elif "Graph capturing finished" in message:
        m = _GRAPHS.search(message)
        if m is not None:
            took = float(m[2]) if m[2] is not None else None
            detail = f"{m[2]} GiB" if m[2] is not None else ""
            return StartupEvent(StartupPhase.GRAPH_CAPTURE, float(m[1]), detail, gib=took)
    elif "init engine" in message:
        m = _INIT_ENGINE.search(message)
        if m is not None:
            return StartupEvent(StartupPhase.ENGINE_READY, float(m[1]), "engine initialised")
    elif "Starting vLLM" in message:
        m = _SERVER.search(message)
        if m is not None:
            return StartupEvent(StartupPhase.SERVER_STARTING, detail=m[1])
    elif READY_LINE in message:
        return StartupEvent(StartupPhase.READY, detail="application startup complete")
    return None
