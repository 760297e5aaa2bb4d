"""Plain HTTP GETs to the serve URL, through the host's link (`Host.forward_port`).

The server's port is reached as the host sees it (`127.0.0.1:8000` on the host), never directly.
HTTP/1.0 with `Connection: close` keeps this tiny: the body ends where the connection does, no
chunked encoding to undo. A refused or hanging port is a result (`HttpResult.error`), not an
exception: during start-up the port refuses or hangs for minutes and that is normal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from vllm_console.console.hostside.vocabulary import reachable
from vllm_console.console.transport.host import Host, HostError

MAX_BODY = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpResult:
    """A status and body, or why there was none (`error`: refused, timed out, ...)."""

    url: str
    status: int | None = None
    body: bytes = b""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass(frozen=True, slots=True)
class ServeUrl:
    """Where the server listens, as seen from the host."""

    host: str
    port: int

    @property
    def base(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> ServeUrl | None:
        try:
            parts = urlsplit(url if "://" in url else f"http://{url}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return None
        if not parts.hostname:
            return None
        return cls(reachable(parts.hostname), port)


async def http_get(host: Host, url: ServeUrl, path: str, *, timeout: float = 5.0,
                   max_body: int = MAX_BODY) -> HttpResult:
    """GET `path` from the server through the host's link. Never raises for network trouble."""
    shown = url.base + path
    try:
        port = await host.forward_port(url.host, url.port)
    except HostError as exc:
        return HttpResult(shown, error=str(exc))
    request = (f"GET {path} HTTP/1.0\r\nHost: {url.host}:{url.port}\r\n"
               "Accept: */*\r\nConnection: close\r\n\r\n").encode()
    return await exchange(shown, lambda: asyncio.open_connection("127.0.0.1", port), request,
                          timeout=timeout, max_body=max_body)


Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


async def exchange(shown: str, connect: Connect, request: bytes, *, timeout: float,
                   max_body: int = MAX_BODY) -> HttpResult:
    """Send one request on a fresh connection and read the answer to its end (`shown`: the
    URL for messages). Network trouble is a result, never an exception."""
    writer: asyncio.StreamWriter | None = None
    data = b""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await connect()
            writer.write(request)
            await writer.drain()
            while len(data) < max_body:
                more = await reader.read(max_body - len(data))
                if not more:
                    break
                data += more
    except TimeoutError:
        return HttpResult(shown, error=f"no answer within {timeout:g} s")
    except ConnectionRefusedError:
        return HttpResult(shown, error="connection refused")
    except OSError as exc:  # TLS errors too (ssl.SSLError is an OSError)
        return HttpResult(shown, error=exc.strerror or str(exc))
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    return parse_response(shown, data)


def parse_response(shown: str, data: bytes) -> HttpResult:
    """An HTTP/1.x answer read to its end (`shown`: the URL, for messages)."""
    if not data:
        # Through an SSH forward a closed remote port looks like this: accepted, then closed.
        return HttpResult(shown, error="connection refused")
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/") \
            or not status_line[1].isdigit():
        return HttpResult(shown, error="not an HTTP response")
    return HttpResult(shown, int(status_line[1]), body)
