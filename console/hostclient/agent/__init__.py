"""The laptop's side of the host agent: starting it and reading its samples.

The agent itself (`console.hostside.agent`) runs on the host from the console's bundle (see
`console.transport.remote_scripts`) as a long-lived stream over the SSH link. `AgentClient`
starts it and turns its JSON lines into typed `AgentSample`s.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_console.console.hostclient.agent.client import AgentClient, AgentError, agent_command
    from vllm_console.console.hostclient.agent.samples import (
        AgentHello,
        AgentSample,
        GpuProcess,
        GpuReading,
        HostStats,
        ServeProc,
        ServeTree,
    )

# Imported on first use (PEP 562): the GPU pane needs the samples for the console's first frame,
# not the client (the remote scripts' bundle).
_WHERE = {
    **dict.fromkeys(("AgentClient", "AgentError", "agent_command"),
                    "vllm_console.console.hostclient.agent.client"),
    **dict.fromkeys(("AgentHello", "AgentSample", "GpuProcess", "GpuReading", "HostStats",
                     "ServeProc", "ServeTree"), "vllm_console.console.hostclient.agent.samples"),
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentClient",
    "AgentError",
    "AgentHello",
    "AgentSample",
    "GpuProcess",
    "GpuReading",
    "HostStats",
    "ServeProc",
    "ServeTree",
    "agent_command",
]
