"""What the subcommands share: one-line failures on stderr, never a traceback."""

from __future__ import annotations

import sys

from console.host import HostError
from console.settings import ConfigError

EXIT_COULD_NOT_RUN = 2

# The failures a person can cause or meet; each is one line and exit 2.
EXPECTED = (ConfigError, HostError, OSError)


def fail(message: str) -> int:
    print(f"vllm-console: {message}", file=sys.stderr)
    return EXIT_COULD_NOT_RUN
