"""The laptop's side of the host agent: starting it and reading its samples.

The agent itself (`console.hostside.agent`) runs on the host from the console's bundle (see
`console.remote_scripts`) as a long-lived stream over the SSH link. `AgentClient` starts it and
turns its JSON lines into typed `AgentSample`s.
"""

from console.agent.client import AgentClient, AgentError, agent_command
from console.agent.samples import (
    AgentHello,
    AgentSample,
    GpuProcess,
    GpuReading,
    HostStats,
    ServeProc,
    ServeTree,
)

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
