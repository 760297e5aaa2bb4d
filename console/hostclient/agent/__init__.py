"""The laptop's side of the host agent: starting it (`client.AgentClient`) and reading its
samples (`samples`: typed `AgentSample`s from its JSON lines).

The agent itself (`console.hostside.agent`) runs on the host from the console's bundle (see
`console.transport.remote_scripts`) as a long-lived stream over the SSH link. Import the
module you need: the GPU pane needs the samples for the console's first frame, not the client.
"""
