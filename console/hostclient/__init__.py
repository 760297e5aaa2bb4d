"""The laptop half of the programs that run on the GPU host (`console.hostside`): the agent's
client and its samples, the log follower, serve discovery and the effective settings, and the
record of the console's last launch on the host. Headless."""
