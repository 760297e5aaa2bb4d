"""The line a server writes when it is asked to stop (SIGTERM, SIGINT): its engine goes away
next, on purpose, while the API server still lives (about 2 s on vLLM 0.32).

vLLM 0.32 and later handle the signal themselves and say `[shutdown] API server: shutdown
triggered` before they stop the engine client; earlier builds left it to uvicorn, whose
`Shutting down` comes before its lifespan stops the engine.
"""

from __future__ import annotations

TRIGGERED = "API server: shutdown triggered"
UVICORN = "Shutting down"
GATES = ("shutdown triggered", UVICORN)


def parse_shutdown(message: str) -> str | None:
    """The message when it is a server's "asked to stop" line, else None."""
    text = message.strip()
    if text.endswith(TRIGGERED) or text.rstrip(".") == UVICORN:
        return text
    return None
