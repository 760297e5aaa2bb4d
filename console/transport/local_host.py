"""`LocalHost`: the serving host is this machine (demo, `--local`, tests of the core)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from vllm_console.console.transport.aio import within
from vllm_console.console.transport.host import (
    CommandResult,
    ConnectionState,
    Host,
    HostError,
    LinkStatus,
    StreamHandle,
    detached_shell_line,
    parse_detached_pid,
    quote_argv,
)

CHUNK = 256 * 1024


class LocalHost(Host):
    """Runs everything as local processes; same verbs and guarantees as `SSHHost`."""

    def __init__(self, name: str = "local") -> None:
        self.name = name
        self._streams: set[asyncio.subprocess.Process] = set()

    @property
    def link(self) -> LinkStatus:
        return LinkStatus(ConnectionState.CONNECTED, "this machine")

    def add_listener(self, callback: Callable[[LinkStatus], None]) -> None:
        """This machine's link never changes: nothing to call back."""

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Always connected."""

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        for proc in list(self._streams):
            await _reap(proc)
        self._streams.clear()

    async def _spawn(self, argv: Sequence[str] | str, env: Mapping[str, str] | None,
                     cwd: str | None, stdin: int | None) -> asyncio.subprocess.Process:
        # A session of its own, so that _terminate can end the command's whole group.
        full_env = {**os.environ, **(env or {})}
        try:
            if isinstance(argv, str):
                return await asyncio.create_subprocess_exec(
                    "/bin/sh", "-c", argv, stdin=stdin, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, env=full_env, cwd=cwd,
                    start_new_session=True)
            return await asyncio.create_subprocess_exec(
                *argv, stdin=stdin, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=full_env, cwd=cwd,
                    start_new_session=True)
        except FileNotFoundError as exc:
            raise HostError(f"cannot run {_show(argv)}: {exc.strerror}: {exc.filename}") from None
        except PermissionError as exc:
            raise HostError(f"cannot run {_show(argv)}: permission denied") from exc

    async def run(self, argv: Sequence[str] | str, *, input: bytes | None = None,
                  timeout: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult:
        proc = await self._spawn(argv, env, cwd, asyncio.subprocess.PIPE)
        try:
            out, err = await within(proc.communicate(input), timeout)
        except TimeoutError:
            await _reap(proc)
            raise HostError(f"command timed out after {timeout:g} s: {_show(argv)}") from None
        except asyncio.CancelledError:
            # The caller went away (a worker cancelled at exit): leave no process behind. The
            # wait is bounded like `_reap`'s: a teardown once hung here for good (a killed
            # group whose exit the loop never heard of), and leaving must never hang.
            _terminate(proc)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(proc.wait()), 5)
            raise
        return CommandResult(_show(argv), proc.returncode or 0, out, err)

    async def stream(self, argv: Sequence[str] | str, *,
                     env: Mapping[str, str] | None = None) -> StreamHandle:
        proc = await self._spawn(argv, env, None, asyncio.subprocess.DEVNULL)
        self._streams.add(proc)

        async def chunks() -> AsyncIterator[bytes]:
            assert proc.stdout is not None
            try:
                while data := await proc.stdout.read(CHUNK):
                    yield data
            finally:
                await _reap(proc)
                self._streams.discard(proc)

        async def close() -> None:
            await _reap(proc)
            self._streams.discard(proc)

        return StreamHandle(_show(argv), chunks(), close)

    async def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        def read() -> bytes:
            with open(path, "rb") as fh:
                return fh.read(max_bytes)

        try:
            return await asyncio.to_thread(read)
        except IsADirectoryError:
            raise HostError(f"{path} is a directory, not a file") from None

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        def write() -> None:
            directory = os.path.dirname(os.path.abspath(path))
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".vllm-console-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.chmod(tmp, mode)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise

        await asyncio.to_thread(write)

    async def start_detached(self, argv: Sequence[str], *, log: str, cwd: str | None = None,
                             env: Mapping[str, str] | None = None, append: bool = True) -> int:
        line = detached_shell_line(argv, log=log, cwd=cwd, env=env, append=append)
        result = await self.run(line, timeout=15)
        return parse_detached_pid(result)

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        # The "remote" end is this machine: the port is reachable as it is.
        return remote_port


def _show(argv: Sequence[str] | str) -> str:
    return argv if isinstance(argv, str) else quote_argv(argv)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """End the command's group and wait for it, so its pipes close while the loop runs. Its
    output is read to the end meanwhile: asyncio stops reading a pipe whose reader fell behind,
    never sees its end then, and `wait()` waits for both (it took the whole 5 s bound when a
    busy stream was cancelled)."""
    _terminate(proc)
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        async with asyncio.timeout(5):
            await asyncio.gather(_drain(proc.stdout), _drain(proc.stderr), proc.wait())


async def _drain(stream: asyncio.StreamReader | None) -> None:
    with contextlib.suppress(Exception):  # another reader, a closed pipe: nothing to drain
        while stream is not None and await stream.read(CHUNK):
            pass


def _terminate(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
