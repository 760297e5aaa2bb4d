"""What `HostTelemetry.run(on_event)` reports, as immutable past-tense events.

Each carries `host` (the fleet view runs one telemetry per host) and the piece that changed; the
whole picture is `HostTelemetry.snapshot`. Rates: `GpuSampled` once per agent interval (1 s),
`LogLinesReceived` at most every ~20-50 ms (one `Log.write_lines` each), the rest on change
(`StartupProgress` also once a second while the server starts, so elapsed times tick;
`ServingChanged` on a scrape that changes the serving picture, at most every metrics interval).
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_console.console.hostclient.agent.samples import AgentSample, ServeTree
from vllm_console.console.hostclient.follower import FollowState, LogBatch
from vllm_console.console.parsers.classifier import LineEvent
from vllm_console.console.telemetry.run_log import RunInfo
from vllm_console.console.telemetry.server import Readiness, ServerLoad
from vllm_console.console.telemetry.serving import ServingStatus
from vllm_console.console.telemetry.snapshot import AgentStatus, ServeInfo
from vllm_console.console.telemetry.spec_decode import SpecDecodeState
from vllm_console.console.telemetry.startup import StartupStatus
from vllm_console.console.transport.host import LinkStatus


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    host: str


@dataclass(frozen=True, slots=True)
class LinkChanged(TelemetryEvent):
    """The SSH link's state changed (connected, reconnecting with the retry delay, ...)."""

    link: LinkStatus


@dataclass(frozen=True, slots=True)
class AgentChanged(TelemetryEvent):
    """The host agent started (with its GPU source and why) or was lost (and why)."""

    agent: AgentStatus


@dataclass(frozen=True, slots=True)
class GpuSampled(TelemetryEvent):
    """One agent sample: GPUs, processes on them, host CPU/memory/load, the serve tree."""

    sample: AgentSample


@dataclass(frozen=True, slots=True)
class ServeTreeChanged(TelemetryEvent):
    """The serve process tree changed (pids, names, states), or the serve process it resolves
    to (pid, log, URL) changed."""

    tree: ServeTree
    serve: ServeInfo


@dataclass(frozen=True, slots=True)
class ServersListed(TelemetryEvent):
    """Discovery listed the host's servers again (one appeared, one exited, one changed
    state): `HostSnapshot.servers` holds them."""


@dataclass(frozen=True, slots=True)
class ServeWarning(TelemetryEvent):
    """The configuration disagrees with what the serve process really uses (a stale `log` in
    the hosts file): said once per newly resolved process, for the TUI to show."""

    text: str


@dataclass(frozen=True, slots=True)
class LogSourceChanged(TelemetryEvent):
    """The followed log changed (path None: nothing to follow), or its follower's state;
    `detail` says why when it stopped."""

    path: str | None
    state: FollowState | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class LogLinesReceived(TelemetryEvent):
    """A batch of log lines: `batch.display_lines()` for one `Log.write_lines`. `notable`:
    the lines of the batch that are something (error, warning, engine start, spec decode, ...),
    each with its index in `batch.texts` and its classification."""

    batch: LogBatch
    notable: tuple[tuple[int, LineEvent], ...] = ()


@dataclass(frozen=True, slots=True)
class RunUpdated(TelemetryEvent):
    """What the log says about the current run changed; `new_run`: a new run began."""

    run: RunInfo
    new_run: bool = False


@dataclass(frozen=True, slots=True)
class SpecDecodeUpdated(TelemetryEvent):
    state: SpecDecodeState


@dataclass(frozen=True, slots=True)
class StartupProgress(TelemetryEvent):
    status: StartupStatus


@dataclass(frozen=True, slots=True)
class ReadinessChanged(TelemetryEvent):
    readiness: Readiness


@dataclass(frozen=True, slots=True)
class LoadSampled(TelemetryEvent):
    """Requests running/waiting and KV-cache use, from `/metrics`."""

    load: ServerLoad


@dataclass(frozen=True, slots=True)
class ServingChanged(TelemetryEvent):
    """The serving picture changed (`ServingStatus.picture`): the engine's progress (ok, idle,
    stalled, and for how long), the recent window's latency, the request outcomes. The engine
    verdict, dead included, is `HostSnapshot.engine_state()`."""

    serving: ServingStatus
