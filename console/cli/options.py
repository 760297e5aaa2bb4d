"""One rule for the values that choose a profile, a reference or a server's URL, used by every
command that takes them: typed as options, or read from the typed HOST's hosts-file entry.

`check --profile nosuch` refused clearly while `status --profile nosuch` went on without a
word; `--url notaurl` was refused alone and taken with a HOST. `cli.main` runs `check_options`
on every command's arguments before the command itself, so a value that cannot work is one
line on stderr and the command's "could not run" status, in the same words whichever command
it was given to.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from vllm_console.console.cli.commands.common import CommandError


def _loads(load: Callable[[str], object], value: str, error: type[Exception],
           where: str) -> None:
    """`load(value)`, its `error` said as the command's one line."""
    try:
        load(value)
    except error as exc:
        raise CommandError(f"{where}{exc}") from None


def _profile(value: str, where: str) -> None:
    if value in ("", "auto"):
        return
    from vllm_console.checks.profile import ProfileError, load_profile

    _loads(load_profile, value, ProfileError, where)


def _reference(value: str, where: str) -> None:
    if not value:
        return
    from vllm_console.checks.references import ReferenceError, load_reference_file

    _loads(load_reference_file, value, ReferenceError, where)


def _url(value: str, where: str) -> None:
    if not value:
        return
    from vllm_console.console.sources.web import check_url

    check_url(value, CommandError, f"{where}--url" if not where else f"{where}url")


# Each setting the rule covers, with its check: a profile that is `auto`, a shipped name or a
# readable profile file; a reference that is a readable JSON config; a URL that is an http(s)
# base URL.
CHECKS: dict[str, Callable[[str, str], None]] = {
    "profile": _profile, "reference": _reference, "url": _url}


def check_options(args: argparse.Namespace) -> None:
    """Raise CommandError (the one line a person reads) for the first of these values that
    cannot work: each option typed, then what the typed HOST's hosts-file entry says where no
    option overrides it."""
    for name, check in CHECKS.items():
        check(getattr(args, name, None) or "", "")
    host = getattr(args, "host", None)
    if host:
        _check_entry(args, host)


def _check_entry(args: argparse.Namespace, host: str) -> None:
    from vllm_console.console.settings import default_hosts_path, load_hosts_file

    config = getattr(args, "config", None)
    path = Path(config).expanduser() if config else default_hosts_path()
    entry = load_hosts_file(path, required=config is not None).hosts.get(host)
    if entry is None:
        return
    where = f"hosts file {path}: hosts.{host}"
    values = {"profile": (entry.checks.profile, f"{where}.checks.profile: "),
              "reference": (entry.checks.reference, f"{where}.checks.reference: "),
              "url": (entry.serve.url, f"{where}.serve.")}
    for name, (value, said) in values.items():
        if not getattr(args, name, None):
            CHECKS[name](value, said)
    if entry.url and not getattr(args, "url", None):
        _url(entry.url, f"{where}.")
