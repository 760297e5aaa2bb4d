"""A little traffic for `make demo-real`: without requests a real engine drafts nothing, and the
spec pane stays "no drafts seen yet" (the acceptance figure the README promises never shows).

Bounded every way: loopback only, one request at a time, at most `max_requests` of
`max_tokens` each, for at most `max_s` seconds, and none while the server is not ready (a
restart from the console is waited out, not hammered). It stops when told (the console
exits).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

LOOPBACK = ("127.0.0.1", "localhost", "::1")
PROMPTS = ("The capital of France is", "def fibonacci(n):", "Once upon a time",
           "The three primary colours are")


class Traffic:
    """Completions sent to `url` in a daemon thread, from `start()` until `stop()` or a bound."""

    def __init__(self, url: str, model: str, *, max_requests: int = 120, max_s: float = 900.0,
                 interval_s: float = 2.0, max_tokens: int = 24) -> None:
        host = urlsplit(url).hostname or ""
        if host not in LOOPBACK:
            raise ValueError(f"demo traffic goes to loopback only, not {host!r}")
        self.url = url.rstrip("/")
        self.model = model
        self.max_requests = max_requests
        self.max_s = max_s
        self.interval_s = interval_s
        self.max_tokens = max_tokens
        self.sent = 0
        """Requests sent (answered or not)."""
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)

    def start(self) -> Traffic:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                return int(resp.status) == 200
        except (OSError, ValueError):
            return False

    def _send(self, prompt: str) -> None:
        body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": self.max_tokens,
                           "temperature": 0}).encode()
        req = urllib.request.Request(f"{self.url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        self.sent += 1
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                resp.read()
                self.answered += 1
        except (OSError, ValueError):
            pass  # a restart under way: the next one waits for /health

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_s
        while not self._stop.is_set() and self.sent < self.max_requests \
                and time.monotonic() < deadline:
            if not self._ready():
                self._stop.wait(1.0)
                continue
            self._send(PROMPTS[self.sent % len(PROMPTS)])
            self._stop.wait(self.interval_s)
