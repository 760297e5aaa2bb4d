"""What the subcommands share: the failures they raise and the way they print.

A command's `run(args)` returns its exit status, or raises: `cli.main` turns the exception into
one line on stderr and the command's "could not run" status (its module's `COULD_NOT_RUN`,
else 2). The module's `EXPECTED` names the failures a person can cause or meet (shown as they
are); anything else is a bug of ours, shown on one line that asks for a report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TextIO

from vllm_console.console import ConfigError
from vllm_console.console.output.messages import failure_line, one_line, reason
from vllm_console.console.parsers.redact import redact, redact_text
from vllm_console.console.transport.host import HostError

EXIT_COULD_NOT_RUN = 2
__all__ = ["EXPECTED", "EXIT_COULD_NOT_RUN", "CommandError", "emit", "emit_json", "failure_line",
           "host_words", "one_line", "reason"]


class CommandError(Exception):
    """The command cannot go on; the message is the one line the person reads."""


# The failures a person can cause or meet: a bad setting, an unreachable host, a missing file.
EXPECTED: tuple[type[BaseException], ...] = (CommandError, ConfigError, HostError, OSError)


# Fields of the JSON documents (docs/json.md) whose names only look like secrets: `fleet
# --json`'s row `key` is the host label's value (`10.0.0.5:8000`).
NOT_SECRETS = frozenset({"key"})


def emit_json(document: object) -> None:
    """Print a JSON document (`--json`), secrets redacted as a structure (a secret-looking
    field's value, and every string as free text), so that it stays valid JSON."""
    _write(json.dumps(redact(document, NOT_SECRETS, texts=True), indent=2), sys.stdout)


def emit(text: str, stream: TextIO | None = None) -> None:
    """Print `text`, secrets redacted; a reader that left (`status | head -1`) is not an
    error: the rest of the output goes nowhere and the command finishes with its own exit
    status."""
    # The door every command's output passes (this, or `emit_json`): secret values are
    # redacted here, whoever wrote the text (a plan, a host's answer, a look-alike's argv).
    _write(redact_text(text, max(len(text), 1)), stream or sys.stdout)


def _write(text: str, out: TextIO) -> None:
    try:
        print(text, file=out, flush=True)
    except BrokenPipeError:
        # Also keeps the interpreter's flush at exit from complaining about the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())


# The host options that choose which host and how it is reached (not `--readonly`: a restart
# refuses it; not `--accept-new`: the key is recorded by then).
_HOST_OPTIONS = (("config", "--config"), ("known_hosts", "--known-hosts"),
                 ("identity", "--identity"))


def host_words(args: argparse.Namespace, name: str) -> list[str]:
    """HOST and the options typed that chose its settings: a hint's `vllm-console restart
    ...` reaches the same host with the same settings only with all of them."""
    from vllm_console.console.settings import overrides

    words = [name]
    for dest, flag in _HOST_OPTIONS:
        value = getattr(args, dest, None)
        if value:
            words += [flag, str(value)]
    if getattr(args, "local", False):
        words.append("--local")
    for dest, *_ in overrides():
        value = getattr(args, dest, None)
        if value not in (None, ""):
            words += [f"--{dest.replace('_', '-')}", str(value)]
    return words
