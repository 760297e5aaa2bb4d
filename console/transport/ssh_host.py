"""`SSHHost`: the serving host over one asyncssh connection.

The rules (docs/design.md "Host access rules"): one connection per host with at most 4 channels
open at once; ssh_config and the agent honoured; host keys checked strictly against
known_hosts (an unknown key is refused with its fingerprint unless `accept_new`, a changed key
always); no agent forwarding; keepalive ~2 s x 3; reconnect with backoff after a lost link.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import os
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from vllm_console.console.settings import HostConfig
from vllm_console.console.transport.aio import cancel_and_wait, within
from vllm_console.console.transport.host import (
    CommandResult,
    ConnectionState,
    Host,
    HostError,
    HostKeyError,
    LinkStatus,
    StreamHandle,
    backoff,
    bounded_command,
    detached_shell_line,
    parse_detached_pid,
    quote_argv,
    shell_command,
    stream_shell_line,
)
from vllm_console.console.transport.ssh_config import (
    SshConfigView,
    identity_problem,
    read_ssh_config,
    unusable_identity,
)


def _lazy_module(name: str) -> Any:
    """`name`, imported when first used (the standard library's `LazyLoader` recipe): asyncssh
    and the cryptography under it take ~0.2 s to import, which the console's first frame need
    not wait for; the first connection (in a worker, after that frame) pays it."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# cryptography 51 warns on stderr when asyncssh (2.24) touches its DSA names at import, on
# every command a person runs ("CryptographyDeprecationWarning: DSA is deprecated"): the
# console never offers nor accepts DSA keys of its own choosing, and the noise hid the one line
# a failing command prints. Silenced for asyncssh's modules alone.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")

if TYPE_CHECKING:
    import asyncssh
else:
    asyncssh = _lazy_module("asyncssh")

CHUNK = 256 * 1024
MAX_CHANNELS = 4

# Exit codes of the read helper below: the remote shell tells us *why* a read failed.
_READ_MISSING, _READ_DENIED, _READ_DIR = 3, 4, 5
_READ_LINE = ('test -e "$1" || exit 3; test -d "$1" && exit 5; test -r "$1" || exit 4; '
              'exec head -c "$2" -- "$1"')


def known_hosts_name(host: str, port: int | None) -> str:
    """How OpenSSH names a host in known_hosts: `host`, or `[host]:port` off port 22."""
    return host if port in (None, 22) else f"[{host}]:{port}"


class _KeyChecking:
    """Sees the server's key when known_hosts does not vouch for it: records it (so the refusal
    can name its fingerprint) and, in accept-new mode, accepts a key for a host that has none.
    Mixed into `asyncssh.SSHClient` when the first connection is made (`_key_checking_client`)."""

    def __init__(self, known: asyncssh.SSHKnownHosts, accept_new: bool) -> None:
        self._known = known
        self.accept_new = accept_new
        self.offered: tuple[str, str, int, asyncssh.SSHKey] | None = None
        self.changed = False

    def validate_host_public_key(self, host: str, addr: str, port: int,
                                 key: asyncssh.SSHKey) -> bool:
        self.offered = (host, addr, port, key)
        matched = self._known.match(host, addr, port if port != 22 else None)
        self.changed = bool(matched[0] or matched[1])
        return self.accept_new and not self.changed


@functools.cache
def _key_checking_client() -> type:
    return type("_KeyCheckingClient", (_KeyChecking, asyncssh.SSHClient), {})


class SSHHost(Host):
    """A host reached over SSH. Verbs reconnect on demand; a supervisor reconnects with
    backoff after a lost link so that streams can resume."""

    def __init__(self, config: HostConfig, *, keepalive_interval: float = 2.0,
                 keepalive_count_max: int = 3, connect_timeout: float = 10.0) -> None:
        self.name = config.name
        self.config = config
        self._keepalive = (keepalive_interval, keepalive_count_max)
        self._connect_timeout = connect_timeout
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self._channels = asyncio.Semaphore(MAX_CHANNELS)
        self._status = LinkStatus(ConnectionState.DISCONNECTED)
        self._listeners: list[Callable[[LinkStatus], None]] = []
        self._supervisor: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._forwards: dict[tuple[str, int], asyncssh.SSHListener] = {}
        self._closing = False
        self._reconnects = 0
        self._known_paths = SshConfigView().known_hosts_files(config.known_hosts)

    # -- link state ---------------------------------------------------------------------
    @property
    def link(self) -> LinkStatus:
        return self._status

    def add_listener(self, callback: Callable[[LinkStatus], None]) -> None:
        """Call `callback(LinkStatus)` on every change of the link's state."""
        self._listeners.append(callback)

    def _set(self, state: ConnectionState, detail: str = "", retry_in: float | None = None
             ) -> None:
        self._status = LinkStatus(state, detail, retry_in, self._reconnects)
        if state is ConnectionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        for callback in list(self._listeners):
            with contextlib.suppress(Exception):
                callback(self._status)

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until the link is up (after a reconnect, say)."""
        await within(self._connected.wait(), timeout)

    # -- connecting ---------------------------------------------------------------------
    def _known_hosts_path(self) -> Path:
        """Where keys are checked first and an accepted one is recorded: --known-hosts or the
        hosts file, else ssh_config's UserKnownHostsFile, else ~/.ssh/known_hosts."""
        return self._known_paths[0]

    def _read_known(self, paths: Sequence[Path]) -> asyncssh.SSHKnownHosts:
        texts = []
        for path in paths:
            try:
                texts.append(path.read_text())
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise HostError(f"cannot read known_hosts {path}: {exc.strerror}") from None
        try:
            return asyncssh.import_known_hosts("\n".join(texts))
        except (ValueError, asyncssh.KeyImportError) as exc:
            raise HostError(f"known_hosts {', '.join(map(str, paths))} is not valid: {exc}"
                            ) from None

    async def _open(self) -> asyncssh.SSHClientConnection:
        cfg = self.config
        problem = identity_problem(cfg.identity)
        if problem:  # not retried: waiting does not bring the file back
            raise _LoginRefused(f"{self.name}: {problem}")
        ssh_config = read_ssh_config(cfg.hostname, cfg.username, cfg.port)
        self._known_paths = ssh_config.known_hosts_files(cfg.known_hosts)
        known = self._read_known(self._known_paths)
        client = cast(_KeyChecking, _key_checking_client()(
            known, cfg.accept_new or ssh_config.accept_new))
        options: dict[str, object] = {
            "known_hosts": known,
            "agent_forwarding": False,
            "keepalive_interval": self._keepalive[0],
            "keepalive_count_max": self._keepalive[1],
            "connect_timeout": ssh_config.connect_timeout or self._connect_timeout,
            "client_factory": lambda: client,
        }
        if cfg.port:
            options["port"] = cfg.port
        if cfg.username:
            options["username"] = cfg.username
        if cfg.identity:
            options["client_keys"] = [cfg.identity]
        try:
            conn = await asyncssh.connect(cfg.hostname, **options)  # type: ignore[arg-type]
        except asyncssh.HostKeyNotVerifiable:
            raise self._key_refusal(client, ssh_config.proxy_jump) from None
        except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
            raise _LoginRefused(f"{self.name}: {unusable_identity(cfg.identity, exc)}") from None
        except asyncssh.PermissionDenied as exc:
            raise _LoginRefused(f"{self.name}: login refused ({exc.reason}); check the user, "
                                "the key (--identity) and the agent") from None
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise HostError(f"{self.name}: cannot connect: {_describe(exc)}") from None
        if client.offered and client.accept_new and not client.changed:
            self._record_key(*client.offered)
        return conn

    def _key_refusal(self, client: _KeyChecking, proxy_jump: str = "") -> HostKeyError:
        if client.offered is None and proxy_jump:
            # Our check never saw a key: the connection refused was the jump host's, which
            # asyncssh checks against ssh_config's known_hosts files.
            return HostKeyError(f"{self.name}: the key of the jump host (ProxyJump "
                                f"{proxy_jump}) is not in its known_hosts file; `ssh "
                                f"{proxy_jump.split(',')[0]}` once records it")
        if client.offered is None:
            return HostKeyError(f"{self.name}: host key not verifiable")
        host, _addr, port, key = client.offered
        fingerprint = key.get_fingerprint("sha256")
        name = known_hosts_name(host, port)
        path = self._known_hosts_path()
        if client.changed:
            return HostKeyError(
                f"{self.name}: HOST KEY CHANGED for {name} (now {key.get_algorithm()} "
                f"{fingerprint}); refusing to connect. If the host was really re-keyed, "
                f"remove its old line from {path} and connect again.",
                fingerprint, changed=True)
        return HostKeyError(
            f"{self.name}: unknown host key for {name}: {key.get_algorithm()} {fingerprint}. "
            f"If that is the host's key, run again with --accept-new to record it in {path}.",
            fingerprint)

    def _record_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> None:
        path = self._known_hosts_path()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = f"{known_hosts_name(host, port)} {key.export_public_key('openssh').decode()}"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as fh:
            if fh.tell() and not path.read_bytes().endswith(b"\n"):
                fh.write("\n")
            fh.write(line if line.endswith("\n") else line + "\n")

    async def connect(self) -> None:
        await self._connection()

    async def _connection(self) -> asyncssh.SSHClientConnection:
        conn = self._conn
        if conn is not None and not conn.is_closed():
            return conn
        if self._closing:
            raise HostError(f"{self.name}: closed")
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            if self._status.state is not ConnectionState.RECONNECTING:
                self._set(ConnectionState.CONNECTING)
            try:
                conn = await self._open()
            except HostKeyError as exc:
                self._set(ConnectionState.REFUSED, str(exc))
                raise
            except HostError as exc:
                if self._status.state is not ConnectionState.RECONNECTING:
                    self._set(ConnectionState.DISCONNECTED, str(exc))
                if not isinstance(exc, _LoginRefused):
                    # Down when first reached: bring it up with backoff too, not only after
                    # a lost link (retrying a refused login would only pile up failures).
                    self._start_supervisor()
                raise
            self._conn = conn
            self._forwards.clear()
            self._set(ConnectionState.CONNECTED, f"{self.config.hostname}")
            self._start_supervisor()
            return conn

    def _start_supervisor(self) -> None:
        if not self._closing and (self._supervisor is None or self._supervisor.done()):
            self._supervisor = asyncio.create_task(self._supervise(), name="ssh-supervisor")

    async def _supervise(self) -> None:
        """Notice a lost link (or a first connection that failed) and bring it back with
        backoff, until close()."""
        while not self._closing:
            conn = self._conn
            why = "link lost"
            if conn is not None:
                await conn.wait_closed()
                if self._closing:
                    return
                self._conn = None
            else:
                why = self._status.detail or "not connected"
            attempt = 0
            while not self._closing:
                delay = backoff(attempt)
                self._set(ConnectionState.RECONNECTING, why, delay)
                await asyncio.sleep(delay)
                try:
                    self._reconnects += 1
                    await self._connection()
                    break
                except HostKeyError:
                    return
                except HostError as exc:
                    self._set(ConnectionState.RECONNECTING, str(exc), delay)
                    attempt += 1

    async def close(self) -> None:
        self._closing = True
        if self._supervisor is not None:
            await cancel_and_wait(self._supervisor)
        for listener in self._forwards.values():
            listener.close()
        self._forwards.clear()
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
            self._conn = None
        self._set(ConnectionState.DISCONNECTED, "closed")

    # -- verbs --------------------------------------------------------------------------
    async def run(self, argv: Sequence[str] | str, *, input: bytes | None = None,
                  timeout: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult:
        line = bounded_command(argv, timeout, env=env, cwd=cwd)
        shown = argv if isinstance(argv, str) else quote_argv(argv)
        conn = await self._connection()
        async with self._channels:
            # No input means stdin at EOF: asyncssh leaves it open otherwise (also for b""),
            # and a command that reads it would wait forever.
            try:
                if input:
                    result = await self._run_with_input(conn, line, input, timeout)
                else:
                    result = await conn.run(line, check=False, timeout=timeout, encoding=None,
                                            stdin=asyncssh.DEVNULL)
            except asyncssh.TimeoutError:
                raise HostError(f"{self.name}: command timed out after {timeout:g} s: "
                                f"{shown}") from None
            except (asyncssh.Error, OSError) as exc:
                raise HostError(f"{self.name}: {shown}: {_describe(exc)}") from None
        status = result.exit_status
        if status is None:
            # Killed by a signal (or the channel closed): report it as the shell would.
            status = 128 + 9 if result.exit_signal else 255
        return CommandResult(shown, status, _bytes(result.stdout), _bytes(result.stderr))

    @staticmethod
    async def _run_with_input(conn: asyncssh.SSHClientConnection, line: str, data: bytes,
                              timeout: float) -> asyncssh.SSHCompletedProcess:
        """`conn.run(line, input=data)`, except that a command which exits without reading its
        input (`test -s helper || cat > helper` once the helper is installed) is not an error:
        its channel may close before the input is written, and asyncssh then raises a broken
        pipe for a command that ran. Its exit status is the answer."""
        process = await conn.create_process(line, encoding=None)
        try:
            process.stdin.write(data)
            process.stdin.write_eof()
        except (BrokenPipeError, asyncssh.Error):
            pass  # closed for sending: the command ended, or the link did (wait() tells which)
        return await process.wait(check=False, timeout=timeout)

    async def stream(self, argv: Sequence[str] | str, *,
                     env: Mapping[str, str] | None = None) -> StreamHandle:
        shown = argv if isinstance(argv, str) else quote_argv(argv)
        line = stream_shell_line(shell_command(argv, env=env))
        conn = await self._connection()
        await self._channels.acquire()
        try:
            proc = await conn.create_process(line, encoding=None)
        except (asyncssh.Error, OSError) as exc:
            self._channels.release()
            raise HostError(f"{self.name}: cannot start {shown}: {_describe(exc)}") from None
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._channels.release()

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while True:
                    try:
                        data = await proc.stdout.read(CHUNK)
                    except (asyncssh.Error, OSError) as exc:
                        raise HostError(f"{self.name}: stream {shown} broke: "
                                        f"{_describe(exc)}") from None
                    if not data:
                        return
                    yield _bytes(data)
            finally:
                proc.close()
                release()

        async def close() -> None:
            # Closing stdin ends the remote command (see stream_shell_line).
            with contextlib.suppress(Exception):
                proc.stdin.write_eof()
            proc.close()
            release()

        return StreamHandle(shown, chunks(), close)

    async def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        result = await self.run(["sh", "-c", _READ_LINE, "sh", path, str(max_bytes)])
        if result.exit_status == _READ_MISSING:
            raise FileNotFoundError(2, f"{self.name}: no such file", path)
        if result.exit_status == _READ_DENIED:
            raise PermissionError(13, f"{self.name}: permission denied", path)
        if result.exit_status == _READ_DIR:
            raise HostError(f"{self.name}: {path} is a directory, not a file")
        if not result.ok:
            raise HostError(f"{self.name}: cannot read {path}: {result.error_text.strip()}")
        return result.stdout

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        script = ('umask 077; t=$(mktemp "$1.XXXXXX") || exit 1; '
                  'cat > "$t" && chmod "$2" "$t" && mv -f "$t" "$1" || { rm -f "$t"; exit 1; }')
        result = await self.run(["sh", "-c", script, "sh", path, f"{mode:o}"], input=data)
        if not result.ok:
            raise HostError(f"{self.name}: cannot write {path}: {result.error_text.strip()}")

    async def start_detached(self, argv: Sequence[str], *, log: str, cwd: str | None = None,
                             env: Mapping[str, str] | None = None, append: bool = True) -> int:
        line = detached_shell_line(argv, log=log, cwd=cwd, env=env, append=append)
        return parse_detached_pid(await self.run(line, timeout=15))

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        key = (remote_host, remote_port)
        conn = await self._connection()
        listener = self._forwards.get(key)
        if listener is None:
            try:
                listener = await conn.forward_local_port("127.0.0.1", 0, remote_host,
                                                         remote_port)
            except (asyncssh.Error, OSError) as exc:
                raise HostError(f"{self.name}: cannot forward to {remote_host}:{remote_port}: "
                                f"{_describe(exc)}") from None
            self._forwards[key] = listener
        return listener.get_port()


class _LoginRefused(HostError):
    """The server refused the login: retrying on a timer would not change its mind."""


def _bytes(data: object) -> bytes:
    if data is None:
        return b""
    if isinstance(data, str):
        return data.encode()
    return bytes(data)  # type: ignore[call-overload]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncssh.DisconnectError):
        return exc.reason or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
