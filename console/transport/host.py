"""One interface to a serving host, over SSH (`SSHHost`) or on this machine (`LocalHost`).

Everything the console does on a host goes through these few verbs. Commands are argv lists,
quoted with `shlex.quote` when they cross a shell, so paths with spaces, quotes or `$()` stay data.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import math
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_console.console.transport.remote_scripts import RemoteScripts

RECONNECT_S = (0.5, 1.0, 2.0, 4.0, 8.0, 10.0)
"""The one backoff of the console: the link's reconnects, and the agent and log follower
started again after they ended (README: reconnected with backoff 0.5, 1, 2, 4, 8, 10 s)."""


def backoff(attempt: int) -> float:
    """Seconds to wait before try number `attempt` (0: the first retry)."""
    return RECONNECT_S[min(max(attempt, 0), len(RECONNECT_S) - 1)]


class HostError(Exception):
    """A host could not be reached or a verb could not be carried out; the message says why."""


class HostKeyError(HostError):
    """The host's key is unknown or has changed; the message carries the fingerprint."""

    def __init__(self, message: str, fingerprint: str = "", changed: bool = False) -> None:
        super().__init__(message)
        self.fingerprint = fingerprint
        self.changed = changed


class ConnectionState(StrEnum):
    """Where the link to a host stands, as the header shows it."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    REFUSED = "refused"

    @property
    def status(self) -> str:
        """The status word it is shown with (`ok`, `unknown`, `warn`, `fail`): the header
        and the fleet alike."""
        return _LINK_STATUS[self]


_LINK_STATUS = {ConnectionState.CONNECTED: "ok", ConnectionState.CONNECTING: "unknown",
                ConnectionState.RECONNECTING: "warn", ConnectionState.DISCONNECTED: "fail",
                ConnectionState.REFUSED: "fail"}


def link_status(state: str) -> str:
    """The status word of a link state given by its value (`unknown` for a word it is not)."""
    try:
        return ConnectionState(state).status
    except ValueError:
        return "unknown"


@dataclass(frozen=True)
class CommandResult:
    """What one command did: the command as run, its exit status and its output."""

    command: str
    exit_status: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass(frozen=True)
class LinkStatus:
    """A snapshot of the link for the header: state, why, and when the next try comes."""

    state: ConnectionState
    detail: str = ""
    retry_in_s: float | None = None
    reconnects: int = 0


def quote_argv(argv: Sequence[str]) -> str:
    """The argv as one shell-safe string: every word is data, never code."""
    return " ".join(shlex.quote(str(a)) for a in argv)


def shell_command(argv: Sequence[str] | str, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> str:
    """Build the remote shell line for argv (already a string: used as given, trusted)."""
    line = argv if isinstance(argv, str) else quote_argv(argv)
    if env:
        line = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) + " " + line
    if cwd:
        line = f"cd {shlex.quote(cwd)} && {line}"
    return line


def detached_shell_line(argv: Sequence[str], *, log: str, cwd: str | None = None,
                        env: Mapping[str, str] | None = None, append: bool = True) -> str:
    """A shell line that starts argv in a new session, detached from the caller, with output
    to `log`, and prints its pid. The intermediate shell exits at once, so the process is
    re-parented to init: it survives the console and the SSH link, and never lingers as a
    zombie child of either."""
    redirect = ">>" if append else ">"
    body = quote_argv(argv)
    if env:
        body = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) + " " + body
    line = f"setsid {body} {redirect} {shlex.quote(log)} 2>&1 < /dev/null & echo $!"
    if cwd:
        line = f"cd {shlex.quote(cwd)} && {{ {line}; }}"
    return line


def parse_detached_pid(result: CommandResult) -> int:
    """The pid printed by `detached_shell_line`, or HostError saying why the start failed."""
    words = result.text.split()
    if result.ok and words and words[-1].isascii() and words[-1].isdigit():
        return int(words[-1])
    why = result.error_text.strip() or result.text.strip() or f"exit {result.exit_status}"
    raise HostError(f"could not start {result.command}: {why}")


def bounded_command(argv: Sequence[str] | str, timeout: float,
                    env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """`shell_command`, run under coreutils `timeout`: it puts the command in a process group
    of its own and signals that whole group when the time is up (TERM, KILL 2 s later). The
    client gives up after `timeout` too, but closing an SSH channel stops nothing on the host:
    a probe blocked on a FIFO stayed there for good, re-parented to init. A host without
    `timeout` runs the command as it is. argv is exec'd as it is (never inside `sh -c`, so
    that `pgrep -f` finds no wrapper of itself); a string line runs in `sh -c`."""
    limit = max(1, math.ceil(timeout))
    pick = (f'if command -v timeout >/dev/null 2>&1; then t="timeout -k 2 {limit}"; '
            'else t=""; fi; ')
    body = f"sh -c {shlex.quote(argv)}" if isinstance(argv, str) else quote_argv(argv)
    if env:
        body = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) + " " + body
    line = f"exec $t {body}"
    if cwd:
        line = f"cd {shlex.quote(cwd)} && {line}"
    return pick + line


def stream_shell_line(line: str) -> str:
    """Wrap a long-lived command so that it ends when the caller goes away.

    The command runs with stdin from /dev/null while a watcher reads the real stdin (the
    channel); at EOF the watcher signals the whole process group (sshd makes each session's
    shell a group leader), so no child of the command outlives a closed channel. Without this a
    quiet remote `tail -F` would linger until it next wrote.
    """
    # Newlines, not `;`: a trailing comment in `line` must not swallow the closing brace.
    return (f"exec 3<&0\n{{\n{line}\n}} </dev/null & p=$!\n"
            "( cat <&3; kill -TERM 0 ) >/dev/null 2>&1 & w=$!\n"
            "wait $p; s=$?; kill $w 2>/dev/null; exit $s")


@dataclass
class StreamHandle:
    """A long-lived command's output, read in chunks; `close()` ends the remote process."""

    command: str
    chunks: AsyncIterator[bytes]
    _closer: object = field(default=None, repr=False)

    async def close(self) -> None:
        # The reader first: one left at a `yield` would be finished by the garbage
        # collector on some later loop turn (and run its clean-up there).
        aclose = getattr(self.chunks, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):  # already running in a cancelled reader
                await aclose()
        closer = self._closer
        if closer is not None:
            await closer()  # type: ignore[operator]

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.chunks


class Host(abc.ABC):
    """A serving host. Subclasses: `SSHHost` (asyncssh) and `LocalHost` (this machine)."""

    name: str

    @functools.cached_property
    def scripts(self) -> RemoteScripts:
        """The console's host-side bundle on this host: installed on first use, its path and
        what the host's `python3` is learned once for the host's life, and shared by every
        check run, restart and telemetry start on it (the host's session owns the host)."""
        from vllm_console.console.transport.remote_scripts import RemoteScripts  # imports this

        return RemoteScripts(self)

    @property
    @abc.abstractmethod
    def link(self) -> LinkStatus:
        """The link's state now."""

    @abc.abstractmethod
    def add_listener(self, callback: Callable[[LinkStatus], None]) -> None:
        """Call `callback(LinkStatus)` on every change of the link's state (telemetry shows
        it; the followers resume when it is back)."""

    @abc.abstractmethod
    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until the link is up (after a reconnect, say); TimeoutError after `timeout`."""

    @abc.abstractmethod
    async def connect(self) -> None:
        """Open the link (no-op when open). Raises HostError / HostKeyError."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the link and every stream on it."""

    @abc.abstractmethod
    async def run(self, argv: Sequence[str] | str, *, input: bytes | None = None,
                  timeout: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult:
        """Run a command to completion. A non-zero exit is a result, not an error."""

    @abc.abstractmethod
    async def stream(self, argv: Sequence[str] | str, *,
                     env: Mapping[str, str] | None = None) -> StreamHandle:
        """Start a long-lived command and hand back its stdout in chunks (not lines)."""

    @abc.abstractmethod
    async def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        """A file's bytes (at most max_bytes). Raises FileNotFoundError / PermissionError /
        HostError with the path named."""

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        """Write a file atomically (temp + rename) with the given mode."""

    @abc.abstractmethod
    async def start_detached(self, argv: Sequence[str], *, log: str, cwd: str | None = None,
                             env: Mapping[str, str] | None = None, append: bool = True) -> int:
        """Start argv in a new session, output to `log`, surviving the link; returns its pid."""

    @abc.abstractmethod
    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        """A local port on this machine that reaches remote_host:remote_port from the host."""
