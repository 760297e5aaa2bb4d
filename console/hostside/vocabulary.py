"""What the host side and the laptop side must say and read alike: the lines that mark where a
run of `vllm serve` starts and when it is ready, in one place (stdlib only, no imports), so
that the follower, the log probe and the restart step on the host and the telemetry, the chain
and the restart client on the laptop cannot drift.
"""

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
