"""What a session can do, declared (as harlequin's adapters declare theirs).

A session over SSH (or on this machine) can do everything; one on a server's URL alone can
only read its HTTP endpoints. The TUI lays a host's screen out and offers its keys from this
set, the CLI refuses a verb the session lacks in one line, and an action called anyway raises
with the session's own reason (`why_not`): no pane or verb has to find out by failing.
"""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """One thing a session can show or do; the value is how a person calls it."""

    SERVER_HTTP = "the server's /health, /metrics and /v1/models"
    GPUS = "GPU telemetry"
    LOG = "the serve log"
    ENGINE_CONFIG = "the engine config (from the log)"
    CHECKS = "the verification chain"
    DRAFT_DIFF = "the draft config diff"
    RESTART = "restart"
    APPLY_REFERENCE = "writing the draft config"
    EXPORT = "the evidence bundle"
    STACKS = "the engine's stacks (py-spy on the host)"
    INSTALL_PY_SPY = "installing py-spy into the serving environment"


EVERYTHING = frozenset(Capability)
"""A session with a login on the host (SSH or local)."""

SERVER_ONLY = frozenset({Capability.SERVER_HTTP, Capability.EXPORT})
"""A session on the server's URL alone: what its HTTP endpoints tell, and an export of it."""

CHANGES_THE_HOST = frozenset({Capability.RESTART, Capability.APPLY_REFERENCE,
                              Capability.INSTALL_PY_SPY})
"""What `--readonly` takes away."""
