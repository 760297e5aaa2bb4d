"""`HostSnapshot`: everything known about one host at one instant, immutable.

Panes render it (or the piece an event carries); `status_json()` is the `status --json` object
of docs/design.md, exactly: what is not known is null, never guessed.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from vllm_console.console.hostclient.agent.samples import AgentHello, AgentSample, ServeTree
from vllm_console.console.hostclient.discovery import ServeContainer, ServerRow
from vllm_console.console.hostclient.follower import FollowState
from vllm_console.console.parsers.engine import SpeculativeSettings
from vllm_console.console.parsers.errors import ErrorKind
from vllm_console.console.parsers.redact import redact, redact_text
from vllm_console.console.telemetry.run_log import RunInfo
from vllm_console.console.telemetry.server import Health, Readiness, ServerLoad
from vllm_console.console.telemetry.serving import (
    EngineState,
    ServingStatus,
    engine_json,
    engine_verdict,
)
from vllm_console.console.telemetry.spec_decode import SpecDecodeState, SpecDecodeStatus
from vllm_console.console.telemetry.startup import StartupState, StartupStatus
from vllm_console.console.transport.host import ConnectionState, LinkStatus

ERROR_LINE_MAX = 2000
"""An error line in `status --json` is cut here (a traceback line can be a whole repr)."""


class ServeState(StrEnum):
    """`serve.state` of `status --json`: the server's life in one word."""

    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"  # a fatal line in the current run (engine failed, a DFlash refusal)
    EXITED = "exited"  # the current run's process is gone, with no fatal line
    NOT_ANSWERING = "not-answering"  # started, the process lives, but /health stopped answering
    DOWN = "down"  # no serve process, and no run in the log
    UNKNOWN = "unknown"


def iso_utc(epoch: float | None) -> str | None:
    """`2026-12-03T05:41:01Z`: the form jq's `fromdateiso8601` reads."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_json(container: ServeContainer | None) -> dict[str, Any] | None:
    """`serve.container` of `status --json` (docs/design.md), or None for a bare process."""
    if container is None:
        return None
    return {"runtime": container.runtime, "id": container.id, "name": container.name,
            "image": container.image, "started_at": iso_utc(container.started_at),
            "restart_policy": container.restart_policy,
            "compose_project": container.compose_project,
            "compose_service": container.compose_service}


def _int_field(sources: tuple[Mapping[str, Any], ...], *keys: str) -> int | None:
    """The first integer under one of `keys`, the engine line first, then the API server's
    arguments (what the user asked for, which the engine line then confirms)."""
    for source in sources:
        for key in keys:
            value = source.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


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
    warnings: tuple[str, ...] = ()
    """Where the configuration disagrees with what the process really uses (a stale `log`):
    `console.hostclient.discovery.effective_serve`'s warnings."""
    container: ServeContainer | None = None
    """The container whose main process the server is (None: a bare process)."""
    processes: tuple[tuple[int, str], ...] = ()
    """The server's processes as discovery saw them, (pid, name), the server first: a
    container's are not the login user's bare processes, so the agent's tree lacks them."""

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
    serving: ServingStatus = ServingStatus()
    servers: tuple[ServerRow, ...] = ()
    """The host's vLLM servers this entry works on (`entry_servers`: those `match` admits,
    and the chosen), as discovery last listed them, the chosen first."""
    watched_port: int | None = None
    """The port of the server this view keeps to (pinned, or the rule's first choice on a
    host with several): when it exits, the view says so rather than follow another."""

    @property
    def tree(self) -> ServeTree:
        return self.sample.serve if self.sample is not None else ServeTree()

    @property
    def gpu_source(self) -> str:
        if self.sample is not None:
            return self.sample.gpu_source
        return self.agent.gpu_source

    @property
    def gpu_source_reason(self) -> str | None:
        """Why there are no GPU figures (None while there are)."""
        if self.gpu_source != "none":
            return None
        reason = self.sample.gpu_reason if self.sample is not None else ""
        return reason or self.agent.detail or None

    @property
    def serve_state(self) -> ServeState:
        """The server's state: the start-up tracker's view of the current run, with `/health`
        for a server whose log says nothing (unreadable, or rotated since it started)."""
        startup, health = self.startup, self.readiness.health
        if startup.failure is not None:
            return ServeState.FAILED
        if health is Health.HEALTHY and self.serve.running is not False:
            return ServeState.READY
        state = startup.state
        if health is Health.NOT_ANSWERING and self.serve.running is not False and \
                state is StartupState.READY:
            # Ready once, silent now (a stopped or wedged API server): never "ready".
            return ServeState.NOT_ANSWERING
        if state is StartupState.STARTING and startup.run_started is None and \
                health is not Health.STARTING:
            return ServeState.UNKNOWN  # a process, but neither its log nor its port says more
        return {StartupState.STARTING: ServeState.STARTING, StartupState.READY: ServeState.READY,
                StartupState.EXITED: ServeState.EXITED,
                StartupState.NOT_RUNNING: ServeState.DOWN}.get(state, ServeState.UNKNOWN)

    def engine_state(self, state: ServeState | None = None) -> tuple[EngineState, str]:
        """`serve.engine` and `serve.engine_reason`: the scrapes' verdict on progress, with a
        dead engine (its error in the log, or its process gone) overruling it."""
        state = state or self.serve_state
        dead = next((e.message for e in self.run.errors if e.kind is ErrorKind.ENGINE_DEAD),
                    None)
        if dead is None and state is not ServeState.READY:
            why = "/health stopped answering" if state is ServeState.NOT_ANSWERING else \
                f"the server is {state.value}"
            return EngineState.UNKNOWN, why
        tree = self.tree
        same_tree = self.sample is not None and tree.root is not None and \
            tree.root == self.serve.pid
        engines = [p for p in tree.procs if p.is_engine_core] if same_tree else []
        stopped = next((p.pid for p in engines if p.state == "T"), None)
        verdict, reason = engine_verdict(
            self.serving, api_alive=self.serve.running, engine_dead_line=dead,
            engine_procs=len(engines) if same_tree else None,
            started=state is ServeState.READY, stopped_engine_pid=stopped,
            stopping_line=self.run.stopping)
        load = self.load
        busy = load is not None and (load.running or 0) + (load.waiting or 0) > 0
        if verdict is EngineState.IDLE and busy and load is not None and \
                load.source != "metrics":
            # The scrape said idle, a newer stat line says requests run: never `idle` beside
            # `6 running`. Tokens in that line say it serves; the next scrape settles the rest.
            where = f"{load.running} running, {load.waiting} waiting in the log's stat line"
            if load.generation_tps:
                return EngineState.OK, f"{where}, {load.generation_tps:.1f} tokens/s"
            return EngineState.UNKNOWN, f"{where}, newer than the last /metrics scrape"
        return verdict, reason

    @property
    def started_at(self) -> float | None:
        """When the server started (host clock, epoch s): its process's start time while it
        runs, else the current run's first log line."""
        root = self.tree.root_proc
        if self.serve.running and root is not None and root.pid == self.serve.pid \
                and root.start_time is not None:
            return root.start_time
        return self.run.started_at if self.run.started_at is not None else (
            self.startup.run_started)

    def uptime_s(self, state: ServeState) -> float | None:
        """Seconds since the start of a server that is up or coming up; None otherwise."""
        started = self.started_at
        now = max(self.startup.now, self.sample.ts if self.sample is not None else 0.0)
        up = (ServeState.READY, ServeState.STARTING, ServeState.NOT_ANSWERING)
        if state not in up or started is None or not now:
            return None
        return round(max(0.0, now - started), 1)

    def status_json(self) -> dict[str, Any]:
        """The `status --json` object (docs/design.md)."""
        engine = self.run.engine_json()
        # What the log does not say (not readable, not written yet), the command line does.
        if engine["model"] is None:
            engine["model"] = self.serve.target
        if self.run.engine is None and self.run.args is None and self.serve.speculative:
            engine["speculative_config"] = self.serve.speculative.to_json()
        engine.update(self._engine_extra())
        state = self.serve_state
        phase = self.startup.phase
        engine_state, engine_reason = self.engine_state(state)
        return {
            "host": self.host,
            "gpus": self.sample.gpus_json() if self.sample is not None else [],
            "gpu_source": self.gpu_source,
            "gpu_source_reason": self.gpu_source_reason,
            "serve": {"running": bool(self.serve.running), "pid": self.serve.pid,
                      "cmdline": self.serve.cmdline, "health": self.readiness.health.value,
                      "state": state.value,
                      "phase": phase.value if state is ServeState.STARTING and phase else None,
                      "started_at": iso_utc(self.started_at),
                      "uptime_s": self.uptime_s(state), "log": self.serve.log,
                      "url": self.serve.url, "engine": engine_state.value,
                      "engine_reason": engine_reason,
                      "engines": [engine_json(e) for e in self.serving.engines] or None,
                      "container": container_json(self.serve.container)},
            "engine": engine,
            "spec_decode": self.spec_decode.to_json(),
            "throughput": self._throughput_json(),
            "errors": self._errors_json(),
            "latency": {**self.serving.latency_json(),
                        "at": iso_utc(self.serving.at) if self.serving.latency is not None
                        else None},
            "requests": self.serving.requests or dict.fromkeys(
                ("preemptions_total", "finished", "errors_total")),
            "servers": [row.to_json() for row in self.servers],
        }

    def _engine_extra(self) -> dict[str, Any]:
        sources = (self.run.engine.fields if self.run.engine is not None else {},
                   self.run.args.args if self.run.args is not None else {})
        aux = self.run.aux_layers
        return {"aux_layers": list(aux) if aux is not None else None,
                "max_model_len": _int_field(sources, "max_seq_len", "max_model_len"),
                "tensor_parallel_size": _int_field(sources, "tensor_parallel_size"),
                "data_parallel_size": _int_field(sources, "data_parallel_size")}

    def _throughput_json(self) -> dict[str, Any]:
        load = self.load
        if load is None:
            return dict.fromkeys(("prompt_tps", "generation_tps", "running", "waiting",
                                  "kv_cache_usage_pct", "prefix_cache_hit_rate_pct", "source",
                                  "rates_source", "at"))
        return {"prompt_tps": load.prompt_tps, "generation_tps": load.generation_tps,
                "running": load.running, "waiting": load.waiting,
                "kv_cache_usage_pct": load.kv_cache_usage_pct,
                "prefix_cache_hit_rate_pct": load.prefix_cache_hit_pct,
                "source": load.source or None, "rates_source": load.rates_source or None,
                "at": iso_utc(load.at or None)}

    def _errors_json(self) -> list[dict[str, str]]:
        """Each error kind of the current run once, with its first line, secrets hidden."""
        first: dict[str, str] = {}
        for error in self.run.errors:
            first.setdefault(error.kind.value, error.message)
        return [{"kind": kind, "line": redact_text(line[:ERROR_LINE_MAX])}
                for kind, line in first.items()]
