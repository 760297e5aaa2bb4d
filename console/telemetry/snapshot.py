"""`HostSnapshot`: everything known about one host at one instant, immutable.

Panes render it (or the piece an event carries); `status_json()` is the `status --json` object
of DESIGN.md, exactly.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from console.agent.samples import AgentHello, AgentSample, ServeTree
from console.follower import FollowState
from console.host import ConnectionState, LinkStatus
from console.parsers.engine import SpeculativeSettings
from console.parsers.redact import redact
from console.telemetry.run_log import RunInfo
from console.telemetry.server import Health, Readiness, ServerLoad
from console.telemetry.spec_decode import SpecDecodeState, SpecDecodeStatus
from console.telemetry.startup import StartupState, StartupStatus


class AgentState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class AgentStatus:
    """The host agent: running (with the GPU source it chose and why), or lost and why."""

    state: AgentState
    detail: str = ""
    hello: AgentHello | None = None

    @property
    def gpu_source(self) -> str:
        return self.hello.gpu_source if self.hello is not None else "none"


@dataclass(frozen=True, slots=True)
class ServeInfo:
    """The serve process as the console uses it: from the agent's tree (live) or from
    discovery (status), with the log and URL it resolved to (configured ones win)."""

    running: bool | None
    pid: int | None = None
    argv: tuple[str, ...] = ()
    log: str | None = None
    url: str | None = None
    target: str | None = None
    draft: str | None = None
    speculative: SpeculativeSettings | None = None

    @property
    def cmdline(self) -> str | None:
        """The command line, shell-quoted, secrets (`--api-key X`) redacted."""
        return shlex.join(redact(list(self.argv))) if self.argv else None


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """One host, everything the panes show."""

    host: str
    link: LinkStatus = LinkStatus(ConnectionState.DISCONNECTED)
    agent: AgentStatus = AgentStatus(AgentState.STARTING)
    sample: AgentSample | None = None
    serve: ServeInfo = ServeInfo(None)
    follow: FollowState | None = None
    run: RunInfo = RunInfo()
    spec_decode: SpecDecodeState = SpecDecodeState(SpecDecodeStatus.NOT_CONFIGURED)
    startup: StartupStatus = StartupStatus(StartupState.UNKNOWN)
    readiness: Readiness = Readiness(Health.UNKNOWN)
    load: ServerLoad | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def tree(self) -> ServeTree:
        return self.sample.serve if self.sample is not None else ServeTree()

    @property
    def gpu_source(self) -> str:
        if self.sample is not None:
            return self.sample.gpu_source
        return self.agent.gpu_source

    def status_json(self) -> dict[str, Any]:
        """The `status --json` object (DESIGN.md)."""
        engine = self.run.engine_json()
        # What the log does not say (not readable, not written yet), the command line does.
        if engine["model"] is None:
            engine["model"] = self.serve.target
        if self.run.engine is None and self.run.args is None and self.serve.speculative:
            engine["speculative_config"] = self.serve.speculative.to_json()
        return {
            "host": self.host,
            "gpus": self.sample.gpus_json() if self.sample is not None else [],
            "gpu_source": self.gpu_source,
            "serve": {"running": bool(self.serve.running), "pid": self.serve.pid,
                      "cmdline": self.serve.cmdline, "health": self.readiness.health.value},
            "engine": engine,
            "spec_decode": self.spec_decode.to_json(),
        }
