"""What the host side and the laptop side must say and read alike: the lines that mark where a
run of `vllm serve` starts and when it is ready, in one place (stdlib only), so
that the follower, the log probe and the restart step on the host and the telemetry, the chain
and the restart client on the laptop cannot drift. Also where a server is: its port and the
address it is reached on.
"""

from __future__ import annotations

import ipaddress
from typing import Sequence

RESTART_MARKER = "[vllm-console] restart at"
"""The first words of the line the console's restart appends to the log before relaunching:
always the first line of a run (also of one that dies before vLLM writes a word)."""

ENGINE_START = "LLM engine ("
"""In `Initializing a V1 LLM engine (vX) with config: ...` (each data-parallel engine)."""

RUN_PREAMBLE = ("non-default args:", "server version")
"""The API server's lines before its engine starts: its arguments and its version banner."""

READY_LINE = "Application startup complete"
"""uvicorn's line once the API server serves (vLLM prints no ready line of its own)."""

RUN_MARKERS = (RESTART_MARKER, "server version ", "  version ", "non-default args:",
               ENGINE_START)
"""Every line that may begin a run (the banner's ASCII-logo form prints `  version X`): the
log probe reads from a little before the last of them."""

DEFAULT_PORT = 8000
"""vLLM's port when `--port` is not given."""

_ANY = ("", "*", "localhost")


def reachable(host: str | None) -> str:
    """Where a server bound to `host` (`--host`, a URL's host) is reached from its own
    machine: a wildcard (`0.0.0.0`, `::`, `[::]`, `*`, none) or `localhost` on 127.0.0.1,
    anything else as written (brackets off). The one rule for discovery, the restart's ready
    check and telemetry."""
    bare = (host or "").strip().strip("[]")
    if bare in _ANY:
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(bare).is_unspecified:
            return "127.0.0.1"
    except ValueError:
        pass
    return bare


def argv_port(argv: Sequence[str]) -> int:
    """The port a serve command line asks for (`--port N`, `--port=N`; vLLM's default)."""
    port = DEFAULT_PORT
    for i, word in enumerate(argv):
        value = ""
        if word == "--port" and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith("--port="):
            value = word.split("=", 1)[1]
        if value.isascii() and value.isdigit():  # '²'.isdigit(), yet int('²') raises
            port = int(value)
    return port


def argv_host(argv: Sequence[str]) -> str | None:
    """The `--host` a serve command line binds (None: not given, vLLM binds every address)."""
    host: str | None = None
    for i, word in enumerate(argv):
        if word == "--host" and i + 1 < len(argv):
            host = argv[i + 1]
        elif word.startswith("--host="):
            host = word.split("=", 1)[1]
    return host
