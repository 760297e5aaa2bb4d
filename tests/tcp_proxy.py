"""A userspace TCP proxy between the console and sshd, for link faults without root.

    proxy = TcpProxy(sshd.port).start()     # the console connects to proxy.port
    proxy.freeze()    # nothing passes either way, new connections hang: like dropped packets
    proxy.resume()    # everything held back flows again (TCP would retransmit it)
    proxy.cut()       # every open connection is reset (a dead NAT entry, a rebooted router)
    proxy.silent = True   # new connections are accepted and never answered (no SSH banner)
    proxy.close()

It runs its own event loop in a thread, so it keeps its behaviour whatever the test's loop does
(a Pilot test, a blocked loop, a subprocess console). Frozen connections stop reading, so the
kernel buffers fill and the sender stalls, as on a real dead path.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.sshd import Sshd
    from vllm_console.console.settings import HostConfig

CHUNK = 64 * 1024


class TcpProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port` until `close()`."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.silent = False
        self.accepted = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy",
                                        daemon=True)
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- control (from any thread) --------------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def freeze(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(self._flowing.set)

    @property
    def frozen(self) -> bool:
        return not self._flowing.is_set()

    def cut(self) -> None:
        """Reset every open connection (the proxy keeps listening)."""
        self._call(self._cut())

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # -- inside the proxy's loop ----------------------------------------------------------
    async def _start(self) -> None:
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, c_reader: asyncio.StreamReader,
                      c_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.silent:
            # Accept and hold: the client waits for a banner that never comes.
            entry: tuple[asyncio.StreamWriter, asyncio.StreamWriter | None] = (c_writer, None)
            self._conns.add(entry)
            with contextlib.suppress(Exception):
                while await c_reader.read(CHUNK):
                    pass
            self._conns.discard(entry)
            _reset(c_writer)
            return
        await self._flowing.wait()  # a frozen path does not even complete a new connection
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(c_writer)
            return
        entry = (c_writer, s_writer)
        self._conns.add(entry)
        up = asyncio.create_task(self._pipe(c_reader, s_writer))
        down = asyncio.create_task(self._pipe(s_reader, c_writer))
        self._tasks.update((up, down))
        try:
            await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (up, down):
                task.cancel()
                self._tasks.discard(task)
            self._conns.discard(entry)
            _reset(c_writer)
            _reset(s_writer)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                await self._flowing.wait()
                data = await reader.read(CHUNK)
                if not data:
                    return
                # A chunk read just before a freeze is held back until it ends.
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()

    async def _cut(self) -> None:
        for client, server in list(self._conns):
            _reset(client)
            if server is not None:
                _reset(server)
        self._conns.clear()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()
        for task in list(self._tasks):
            task.cancel()
        self._flowing.set()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), as a path that died would look to both ends."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.transport.abort()


def proxied_config(sshd: Sshd, proxy: TcpProxy, **changes: object) -> HostConfig:
    """The test sshd's host config, reached through `proxy` (its own known_hosts line: OpenSSH
    names a host by its port)."""
    known = sshd.directory / f"known_hosts-{proxy.port}"
    key_type, key_b64 = sshd.host_key_pub.split()[:2]
    known.write_text(f"[127.0.0.1]:{proxy.port} {key_type} {key_b64}\n")
    return sshd.host_config(**{"port": proxy.port, "known_hosts": str(known), **changes})
