"""The command line: the parser and dispatch (`parser`, whose `main` is the `vllm-console`
entry point), one module per subcommand (`commands/`), and the host names offered for
completion. Importing this package imports nothing else (start-up is on the user's clock)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """`vllm-console`: see `console.cli.parser.main`."""
    from vllm_console.console.cli.parser import main as run

    return run(argv)
