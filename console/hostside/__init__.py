"""Everything the console runs on the GPU host, in one package.

Entry points (run on the host as `PYTHON BUNDLE ENTRY [ARGS]`, see `__main__`): `agent` (the
telemetry sampler), `follow` (the log follower), `discover` (which process is the server),
`probe-code`, `probe-configs`, `probe-fields`, `probe-log` (the check chain's probes),
`container-log` (a containerised server's current run, `containers`), `restart` (the
detached restart step and its queries), `stacks` (py-spy dumps of the server's tree) and
`watchdog-dumps` (vLLM's watchdog dumps, read inside a server's container).
Shared parts: `procfs` (one reader of
/proc), `gpu` (one NVML / nvidia-smi reader), `argv` (one rule for matching a command line),
`lifeline` (the long-lived helpers end when their stdin, the SSH channel, does) and `wire` (the
one JSON framing both sides read).

The laptop ships the package as one content-hashed zipapp (`console.transport.remote_scripts`),
run from a compiled copy each host Python makes beside it once (`zipapp_main`). It is stdlib
only and imports nothing from the rest of the console (import-linter enforces it): it runs under
the host's own Python, so it is written for the oldest one supported, `MIN_PYTHON` (Ubuntu
20.04's and RHEL 8's python38; see tests/hostside/test_hostside.py). This file, `__main__`,
`wire` and `zipapp_main` stay parseable by any Python 3, so that an older one says so instead
of failing with a SyntaxError. """

MIN_PYTHON = (3, 8)
