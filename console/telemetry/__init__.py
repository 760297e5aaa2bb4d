"""Live telemetry of a serving host, headless: immutable snapshots and past-tense events.

`HostTelemetry(host, config).run(on_event)` drives everything (agent samples, the log, the
server's answers) and reports `TelemetryEvent`s; `HostTelemetry.snapshot` is the whole picture.
`collect_status(host, config)` makes one snapshot without keeping anything running.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_console.console.telemetry.events import (
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
    from vllm_console.console.telemetry.host_telemetry import HostTelemetry, TelemetryOptions
    from vllm_console.console.telemetry.oneshot import StatusError, collect_status
    from vllm_console.console.telemetry.run_log import RunInfo, RunLog
    from vllm_console.console.telemetry.server import Health, Readiness, ServerLoad
    from vllm_console.console.telemetry.snapshot import (
        AgentState,
        AgentStatus,
        HostSnapshot,
        ServeInfo,
    )
    from vllm_console.console.telemetry.spec_decode import (
        SpecDecodePoint,
        SpecDecodeState,
        SpecDecodeStatus,
        SpecSource,
    )
    from vllm_console.console.telemetry.startup import (
        StartupState,
        StartupStatus,
        StartupStep,
        format_duration,
    )

# Each name is imported from its module on first use (PEP 562): the console's host screen imports
# `console.telemetry.events` and friends before its first frame, and an eager package would
# import `HostTelemetry` with it (the agent client, the followers, the restart: ~0.25 s of CPU)
# (docs/design.md, "Start-up").
_WHERE = {
    "AgentChanged": "vllm_console.console.telemetry.events",
    "AgentState": "vllm_console.console.telemetry.snapshot",
    "AgentStatus": "vllm_console.console.telemetry.snapshot",
    "GpuSampled": "vllm_console.console.telemetry.events",
    "Health": "vllm_console.console.telemetry.server",
    "HostSnapshot": "vllm_console.console.telemetry.snapshot",
    "HostTelemetry": "vllm_console.console.telemetry.host_telemetry",
    "LinkChanged": "vllm_console.console.telemetry.events",
    "LoadSampled": "vllm_console.console.telemetry.events",
    "LogLinesReceived": "vllm_console.console.telemetry.events",
    "LogSourceChanged": "vllm_console.console.telemetry.events",
    "Readiness": "vllm_console.console.telemetry.server",
    "ReadinessChanged": "vllm_console.console.telemetry.events",
    "RunInfo": "vllm_console.console.telemetry.run_log",
    "RunLog": "vllm_console.console.telemetry.run_log",
    "RunUpdated": "vllm_console.console.telemetry.events",
    "ServeInfo": "vllm_console.console.telemetry.snapshot",
    "ServeTreeChanged": "vllm_console.console.telemetry.events",
    "ServingChanged": "vllm_console.console.telemetry.events",
    "ServeWarning": "vllm_console.console.telemetry.events",
    "ServerLoad": "vllm_console.console.telemetry.server",
    "SpecDecodePoint": "vllm_console.console.telemetry.spec_decode",
    "SpecDecodeState": "vllm_console.console.telemetry.spec_decode",
    "SpecDecodeStatus": "vllm_console.console.telemetry.spec_decode",
    "SpecDecodeUpdated": "vllm_console.console.telemetry.events",
    "SpecSource": "vllm_console.console.telemetry.spec_decode",
    "StartupProgress": "vllm_console.console.telemetry.events",
    "StartupState": "vllm_console.console.telemetry.startup",
    "StartupStatus": "vllm_console.console.telemetry.startup",
    "StartupStep": "vllm_console.console.telemetry.startup",
    "StatusError": "vllm_console.console.telemetry.oneshot",
    "TelemetryEvent": "vllm_console.console.telemetry.events",
    "TelemetryOptions": "vllm_console.console.telemetry.host_telemetry",
    "collect_status": "vllm_console.console.telemetry.oneshot",
    "format_duration": "vllm_console.console.telemetry.startup",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
