"""A minimal HTTP GET over a port forwarded through the host link (stdlib asyncio only)."""

from __future__ import annotations

import asyncio
import contextlib

from console.host import Host, HostError


async def get_status(port: int, path: str, *, host: str = "127.0.0.1",
                     timeout: float = 5.0) -> tuple[int | None, str]:
    """(HTTP status or None, a few words on what happened)."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
                         "Accept: */*\r\n\r\n".encode("ascii"))
            await writer.drain()
            status_line = await reader.readline()
            await reader.read(64 * 1024)
    except TimeoutError:
        return None, f"no answer in {timeout:g} s"
    except OSError as exc:
        return None, exc.strerror or str(exc)
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    parts = status_line.decode("latin-1").split()
    if len(parts) >= 2 and parts[1].isascii() and parts[1].isdigit():
        return int(parts[1]), f"HTTP {parts[1]}"
    return None, "not an HTTP answer"


async def check_endpoints(host: Host, url_host: str, port: int,
                          paths: tuple[str, ...] = ("/health", "/v1/models")
                          ) -> tuple[bool, str]:
    """Whether every path answers 200 through the host's port forward; what each said."""
    try:
        local = await host.forward_port(url_host, port)
    except HostError as exc:
        return False, f"cannot reach port {port} through the link: {exc}"
    said = []
    ok = True
    for path in paths:
        status, words = await get_status(local, path)
        said.append(f"{path}: {words}")
        ok = ok and status == 200
    return ok, ", ".join(said)
