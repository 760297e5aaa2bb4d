"""The serve log of a server that runs in a container: the container's output, `docker logs`.

vLLM in a container writes to the container's stdout and stderr, which the runtime keeps; there
is no file on the host to follow. `read_container_log` reads the current run once (for
`status`), through the host side's `container-log` entry (`console.hostside.containers`): `docker
logs --timestamps --since` the container's start, so a `docker restart`'s earlier runs are left
out, the two streams put back in one order by their stamps (the same merge the check's log probe
reads), and only its start-up and its recent end brought back when it is long.
`ContainerLogFollower` follows it live for the log pane: the host side's `follow-container`
replays the run and goes on with `docker logs --follow`, in the log follower's frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_console.console.hostclient.discovery import ServeContainer
from vllm_console.console.hostclient.follower import LogFollower
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import python_line, run_json

HEAD_BYTES = 1 << 20
"""The run's first bytes brought back: its start-up (the engine's config, the drafter)."""
TAIL_BYTES = 3 << 20
"""And its last: the recent throughput and spec-decode lines."""


@dataclass(frozen=True)
class ContainerLog:
    """The current run's lines; `skipped` bytes between the start-up and the end."""

    lines: list[str]
    skipped: int = 0


def describe(container: ServeContainer) -> str:
    """Where the log comes from, for people: `docker logs NAME` (the container's output)."""
    return f"{container.runtime} logs {container.ref} (the container's output)"


async def read_container_log(host: Host, container: ServeContainer, *,
                             timeout: float = 60.0) -> ContainerLog:
    """The current run of the container's output. Raises HostError (one line) when the
    runtime will not give it."""
    payload = {"runtime": container.runtime, "ref": container.ref,
               "since": container.started_at, "head_bytes": HEAD_BYTES,
               "tail_bytes": TAIL_BYTES}
    run = await run_json(host, "container-log", "python3",
                         payload, timeout=timeout)
    if run.data is None or run.data.get("error"):
        why = run.error if run.data is None else str(run.data["error"])
        raise HostError(f"{host.name}: cannot read {describe(container)}: {why}")
    lines = str(run.data.get("head") or "").splitlines() + \
        str(run.data.get("tail") or "").splitlines()
    skipped = run.data.get("skipped")
    return ContainerLog(lines, skipped if isinstance(skipped, int) else 0)


class ContainerLogFollower(LogFollower):
    """`LogFollower` on a container's output: the run since the container's start, then live.
    Its `path` is what the log pane names (`docker logs NAME (the container's output)`); a
    lost link resumes after the last line's stamp, never repeating or skipping one."""

    def __init__(self, host: Host, container: ServeContainer, **kwargs: Any) -> None:
        super().__init__(host, describe(container), **kwargs)
        self.container = container
        self._stamp = ""
        self._same = 0

    @staticmethod
    def run_key(container: ServeContainer) -> str:
        """Which run a follower follows: a container started again is another log."""
        return f"{container.runtime}:{container.id}@{container.started_at}"

    async def _command(self, *, once: bool = False) -> str:
        c = self.container
        args = ["--runtime", c.runtime, "--ref", c.ref, "--since",
                f"{c.started_at or 0.0:.6f}", "--head", str(self.head_bytes),
                "--backlog", str(self.backlog_bytes)]
        pos = self.position
        if self._stamp and pos is not None:
            args += ["--after", self._stamp, "--skip", str(self._same), "--offset",
                     str(pos.offset)]
        return python_line(await self.scripts.bundle(), "follow-container", args,
                           python=self.python, python3=self.scripts.interpreter("python3"))

    def _data(self, header: dict[str, Any], payload: bytes) -> None:
        super()._data(header, payload)
        stamp, same = header.get("stamp"), header.get("same")
        if isinstance(stamp, str) and stamp and isinstance(same, int):
            self._stamp, self._same = stamp, same
