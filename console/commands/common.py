"""What the subcommands share: one-line failures on stderr, never a traceback."""

from __future__ import annotations

import sys

from console.display import safe_text
from console.host import HostError
from console.settings import ConfigError

EXIT_COULD_NOT_RUN = 2

# The failures a person can cause or meet; each is one line and exit 2.
EXPECTED = (ConfigError, HostError, OSError)


def fail(message: str) -> int:
    print(f"vllm-console: {one_line(message)}", file=sys.stderr)
    return EXIT_COULD_NOT_RUN


def one_line(message: object) -> str:
    """An error for stderr: one line, and inert (a host's words may carry escape sequences
    or newlines: a server's disconnect reason, a remote command's stderr)."""
    return safe_text(str(message), 2000)
