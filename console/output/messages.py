"""A failure said in one line, the same way by the command line and the console.

Whatever stops a command or the console is one line, `vllm-console[ COMMAND]: why`, in a
person's words (`PATH: Not a directory`, not `[Errno 20] ...`) and inert (a host's words may
carry escape sequences or newlines).
"""

from __future__ import annotations

from vllm_console.console.output.display import safe_text

LINE_MAX = 2000


def reason(exc: BaseException) -> str:
    """Why, in a person's words: `PATH: Not a directory` for a system error, not
    `[Errno 20] Not a directory: 'PATH'`; the exception's type when it says nothing."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


def one_line(message: object) -> str:
    """An error for stderr or a notification: one line, and inert."""
    return safe_text(str(message), LINE_MAX)


def failure_line(who: str, exc: BaseException) -> str:
    """`WHO: why` for a failure a person can cause or meet (`who` is `vllm-console`,
    `vllm-console check`, or a host's name)."""
    return f"{who}: {one_line(reason(exc))}"
