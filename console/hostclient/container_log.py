"""The serve log of a server that runs in a container: the container's output, `docker logs`.

vLLM in a container writes to the container's stdout and stderr, which the runtime keeps; there
is no file on the host to follow. `read_container_log` reads the current run's part once (for
`status` and the checks): `--since` the container's start, so a `docker restart`'s earlier runs
are left out, and `--timestamps`, whose RFC 3339 stamps put stdout's and stderr's lines (the CLI
hands them back apart) into one order again. Following it live is the log follower's job (a
later step).
"""

from __future__ import annotations

import re

from console.hostclient.discovery import ServeContainer
from console.transport.host import Host, HostError

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ?")


def log_command(container: ServeContainer) -> list[str]:
    """The command that prints the container's current run, every line stamped."""
    argv = [container.runtime, "logs", "--timestamps"]
    if container.started_at is not None:
        argv += ["--since", f"{container.started_at:.6f}"]
    return [*argv, container.ref]


def describe(container: ServeContainer) -> str:
    """Where the log comes from, for people: `docker logs NAME` (the container's output)."""
    return f"{container.runtime} logs {container.ref} (the container's output)"


def merged_lines(stdout: str, stderr: str) -> list[str]:
    """The two streams' lines in the order of their stamps (stable within a stream), each
    without its stamp. A line without one (not what `--timestamps` gives) sorts with the
    stamp before it."""
    stamped: list[tuple[str, int, str]] = []
    for stream, text in enumerate((stdout, stderr)):
        last = ""
        for line in text.splitlines():
            match = _STAMP.match(line)
            if match:
                last = _sortable(match.group(1))
                line = line[match.end():]
            stamped.append((last, stream, line))
    stamped.sort(key=lambda item: item[0])
    return [line for _stamp, _stream, line in stamped]


def _sortable(stamp: str) -> str:
    """RFC 3339 in UTC with nanoseconds (what docker prints) sorts as text once its fraction
    has a fixed width."""
    head, _, rest = stamp.partition(".")
    digits = "".join(ch for ch in rest if ch.isdigit())
    return f"{head.rstrip('Z')}.{digits.ljust(9, '0')}"


async def read_container_log(host: Host, container: ServeContainer, *,
                             timeout: float = 60.0) -> list[str]:
    """The current run's lines of the container's output. Raises HostError (one line) when
    the runtime will not give them."""
    result = await host.run(log_command(container), timeout=timeout)
    if not result.ok:
        why = " ".join(result.error_text.split())[:300] or f"exit {result.exit_status}"
        raise HostError(f"{host.name}: cannot read {describe(container)}: {why}")
    return merged_lines(result.text, result.error_text)
