"""Live telemetry of a serving host, headless: immutable snapshots and past-tense events.

`HostTelemetry(host, config).run(on_event)` drives everything (agent samples, the log, the
server's answers) and reports `TelemetryEvent`s; `HostTelemetry.snapshot` is the whole picture.
`collect_status(host, config)` makes one snapshot without keeping anything running.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        ServingChanged,
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

# Each name is imported from its module on first use (PEP 562): the console's host screen imports
# `console.telemetry.events` and friends before its first frame, and an eager package would
# import `HostTelemetry` with it (the agent client, the followers, the restart: ~0.25 s of CPU)
# (docs/design.md, "Start-up").
_WHERE = {
    "AgentChanged": "console.telemetry.events",
    "AgentState": "console.telemetry.snapshot",
    "AgentStatus": "console.telemetry.snapshot",
    "GpuSampled": "console.telemetry.events",
    "Health": "console.telemetry.server",
    "HostSnapshot": "console.telemetry.snapshot",
    "HostTelemetry": "console.telemetry.host_telemetry",
    "LinkChanged": "console.telemetry.events",
    "LoadSampled": "console.telemetry.events",
    "LogLinesReceived": "console.telemetry.events",
    "LogSourceChanged": "console.telemetry.events",
    "Readiness": "console.telemetry.server",
    "ReadinessChanged": "console.telemetry.events",
    "RunInfo": "console.telemetry.run_log",
    "RunLog": "console.telemetry.run_log",
    "RunUpdated": "console.telemetry.events",
    "ServeInfo": "console.telemetry.snapshot",
    "ServeTreeChanged": "console.telemetry.events",
    "ServingChanged": "console.telemetry.events",
    "ServeWarning": "console.telemetry.events",
    "ServerLoad": "console.telemetry.server",
    "SpecDecodePoint": "console.telemetry.spec_decode",
    "SpecDecodeState": "console.telemetry.spec_decode",
    "SpecDecodeStatus": "console.telemetry.spec_decode",
    "SpecDecodeUpdated": "console.telemetry.events",
    "SpecSource": "console.telemetry.spec_decode",
    "StartupProgress": "console.telemetry.events",
    "StartupState": "console.telemetry.startup",
    "StartupStatus": "console.telemetry.startup",
    "StartupStep": "console.telemetry.startup",
    "StatusError": "console.telemetry.oneshot",
    "TelemetryEvent": "console.telemetry.events",
    "TelemetryOptions": "console.telemetry.host_telemetry",
    "collect_status": "console.telemetry.oneshot",
    "format_duration": "console.telemetry.startup",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'console.telemetry' has no attribute {name!r}")


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
    "ServingChanged",
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
