"""Plain HTTP(S) GETs straight to a URL this machine reaches (no SSH link in between).

The SSH path (`console.telemetry.http`) reaches the server through a forwarded port; these
sources talk to it directly. The same `HttpResult`: a refused or hanging port is a result, not an
exception. HTTP/1.0 with `Connection: close`, as there: the body ends with the connection, so no
chunked encoding to undo (Prometheus and uvicorn both answer a 1.0 request that way).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from vllm_console.console.telemetry.http import MAX_BODY, HttpResult, exchange


class BadUrl(ValueError):
    """Not an http:// or https:// URL with a host; the message says which part is wrong."""


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of `http[s]://host[:port][/prefix]`. Raises BadUrl."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise BadUrl(f"{url!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise BadUrl(f"{url!r}: not an http:// or https:// URL")
    if not parts.hostname:
        raise BadUrl(f"{url!r}: no host")
    if parts.query or parts.fragment:
        raise BadUrl(f"{url!r}: a base URL takes no ?query or #fragment")
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port or default, parts.path.rstrip("/")


def check_url(url: str, error: Callable[[str], Exception], what: str) -> None:
    """Raise `error("<what> <why>")` unless `url` is a base URL `split_url` takes: a source
    refuses a bad URL when it is made, in its own error type, not at its first request."""
    try:
        split_url(url)
    except BadUrl as exc:
        raise error(f"{what} {exc}") from None


async def get(url: str, path: str, *, headers: Mapping[str, str] | None = None,
              timeout: float = 5.0, max_body: int = MAX_BODY) -> HttpResult:
    """GET `url` + `path` (path may carry a query string). Never raises for network trouble;
    `HttpResult.url` never carries the headers (an API key stays out of every message)."""
    try:
        scheme, host, port, prefix = split_url(url)
    except BadUrl as exc:
        return HttpResult(url + path, error=str(exc))
    shown = f"{url.rstrip('/')}{path}"
    tls = ssl.create_default_context() if scheme == "https" else None
    host_header = f"[{host}]" if ":" in host else host
    lines = [f"GET {prefix}{path} HTTP/1.0", f"Host: {host_header}:{port}", "Accept: */*",
             "Connection: close", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    return await exchange(shown, lambda: asyncio.open_connection(host, port, ssl=tls), request,
                          timeout=timeout, max_body=max_body)
