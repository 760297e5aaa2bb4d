"""The host-side agent and the client that runs it.

`agent_main.py` and `follow_main.py` are package data: stdlib-only Python scripts installed on the
host (once per content hash, see `console.remote_scripts`) and run there by `python3` as long-lived
streams over the SSH link. `AgentClient` starts the sampler and turns its JSON lines into typed
`AgentSample`s; `console.follower.LogFollower` drives `follow_main.py`.
"""

from console.agent.client import AGENT_SCRIPT, FOLLOW_SCRIPT, AgentClient, AgentError, agent_command
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
    "AGENT_SCRIPT",
    "FOLLOW_SCRIPT",
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
