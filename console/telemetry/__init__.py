"""Live telemetry of a serving host, headless: immutable snapshots and past-tense events.

`HostTelemetry(host, config).run(on_event)` drives everything (agent samples, the log, the
server's answers) and reports `TelemetryEvent`s; `HostTelemetry.snapshot` is the whole picture.
`collect_status(host, config)` makes one snapshot without keeping anything running.
"""

from console.telemetry.events import (
    AgentChanged,
    GpuSampled,
    LinkChanged,
    LoadSampled,
    LogLinesReceived,
    LogSourceChanged,
    ReadinessChanged,
    RunUpdated,
    ServeTreeChanged,
    ServeWarning,
    SpecDecodeUpdated,
    StartupProgress,
    TelemetryEvent,
)
from console.telemetry.host_telemetry import HostTelemetry, TelemetryOptions
from console.telemetry.oneshot import StatusError, collect_status
from console.telemetry.run_log import RunInfo, RunLog
from console.telemetry.server import Health, Readiness, ServerLoad
from console.telemetry.snapshot import AgentState, AgentStatus, HostSnapshot, ServeInfo
from console.telemetry.spec_decode import (
    SpecDecodePoint,
    SpecDecodeState,
    SpecDecodeStatus,
    SpecSource,
)
from console.telemetry.startup import StartupState, StartupStatus, StartupStep, format_duration

__all__ = [
    "AgentChanged",
    "AgentState",
    "AgentStatus",
    "GpuSampled",
    "Health",
    "HostSnapshot",
    "HostTelemetry",
    "LinkChanged",
    "LoadSampled",
    "LogLinesReceived",
    "LogSourceChanged",
    "Readiness",
    "ReadinessChanged",
    "RunInfo",
    "RunLog",
    "RunUpdated",
    "ServeInfo",
    "ServeTreeChanged",
    "ServeWarning",
    "ServerLoad",
    "SpecDecodePoint",
    "SpecDecodeState",
    "SpecDecodeStatus",
    "SpecDecodeUpdated",
    "SpecSource",
    "StartupProgress",
    "StartupState",
    "StartupStatus",
    "StartupStep",
    "StatusError",
    "TelemetryEvent",
    "TelemetryOptions",
    "collect_status",
    "format_duration",
]
