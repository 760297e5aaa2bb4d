"""What the subcommands share: the failures they raise and the way they print.

A command's `run(args)` returns its exit status, or raises: `cli.main` turns the exception into
one line on stderr and the command's "could not run" status (its module's `COULD_NOT_RUN`,
else 2). The module's `EXPECTED` names the failures a person can cause or meet (shown as they
are); anything else is a bug of ours, shown on one line that asks for a report.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from console.display import safe_text
from console.host import HostError
from console.settings import ConfigError

EXIT_COULD_NOT_RUN = 2


class CommandError(Exception):
    """The command cannot go on; the message is the one line the person reads."""


# The failures a person can cause or meet: a bad setting, an unreachable host, a missing file.
EXPECTED: tuple[type[BaseException], ...] = (CommandError, ConfigError, HostError, OSError)


def reason(exc: BaseException) -> str:
    """Why, in a person's words: `PATH: Not a directory` for a system error, not
    `[Errno 20] Not a directory: 'PATH'`."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)


def one_line(message: object) -> str:
    """An error for stderr: one line, and inert (a host's words may carry escape sequences
    or newlines: a server's disconnect reason, a remote command's stderr)."""
    return safe_text(str(message), 2000)


def emit(text: str, stream: TextIO | None = None) -> None:
    """Print `text`; a reader that left (`status | head -1`) is not an error: the rest of the
    output goes nowhere and the command finishes with its own exit status."""
    out = stream or sys.stdout
    try:
        print(text, file=out, flush=True)
    except BrokenPipeError:
        # Also keeps the interpreter's flush at exit from complaining about the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
