"""One rule for the values a person types as options, used by every command that takes them.

`check --profile nosuch` refused clearly while `status --profile nosuch` went on without a
word; `--url notaurl` was refused alone and taken with a HOST. `cli.main` runs `check_options`
on every command's arguments before the command itself, so an option that cannot work is one
line on stderr and the command's "could not run" status, in the same words whichever command
it was given to.
"""

from __future__ import annotations

import argparse

from vllm_console.console.cli.commands.common import CommandError


def check_options(args: argparse.Namespace) -> None:
    """Raise CommandError (the one line a person reads) for the first option typed whose value
    cannot work: a profile that is neither `auto`, a shipped name nor a readable profile file;
    a reference that is no readable JSON config; a `--url` that is no http(s) base URL."""
    profile = getattr(args, "profile", None)
    if profile and profile != "auto":
        from vllm_console.checks.profile import ProfileError, load_profile

        try:
            load_profile(profile)
        except ProfileError as exc:
            raise CommandError(str(exc)) from None
    reference = getattr(args, "reference", None)
    if reference:
        from vllm_console.checks.references import ReferenceError, load_reference_file

        try:
            load_reference_file(reference)
        except ReferenceError as exc:
            raise CommandError(str(exc)) from None
    url = getattr(args, "url", None)
    if url:
        from vllm_console.console.sources.web import check_url

        check_url(url, CommandError, "--url")
