"""A person's changes to a relaunch: its environment and its command line.

A hint may say to relaunch with a variable set (`VLLM_USE_V2_MODEL_RUNNER=1`) or an argument
changed. The restart dialog takes those as text, `parse_env` and `parse_argv` read it, and
`edit_plan` applies it to the plan the person is looking at, keeping the last run's values
beside the new ones so that the dialog shows the change as a diff. The host-side step records
what it launched (`last-launch-<key>.json`), and the relaunched process carries it in its own
command line and environment: the next restart starts from the edited launch, by itself.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from vllm_console.console.hostside.argv import matches
from vllm_console.console.hostside.vocabulary import DEFAULT_MATCH
from vllm_console.console.parsers.redact import REDACTED, is_secret_key
from vllm_console.console.restart.model import RestartPlan, shown_argv
from vllm_console.console.restart.plan import (
    RestartError,
    recreate_command,
    relaunch_inputs,
    server_address,
)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

EnvEdit = tuple[tuple[str, str | None], ...]


def parse_env(text: str) -> EnvEdit:
    """`NAME=value` sets, `-NAME` unsets; words as a shell splits them (quotes keep spaces).
    Raises RestartError naming the word that is neither."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise RestartError(f"environment: {exc}") from None
    out: dict[str, str | None] = {}
    for word in words:
        name, sep, value = word.removeprefix("-").partition("=")
        unset = word.startswith("-")
        if not _NAME.match(name) or unset == bool(sep):
            raise RestartError(f"environment: {word!r} is neither NAME=value nor -NAME")
        out[name] = None if unset else value
    return tuple(out.items())


def parse_argv(text: str) -> tuple[str, ...]:
    """The command line as a shell splits it (the dialog shows it quoted the same way)."""
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise RestartError(f"command line: {exc}") from None
    if not argv:
        raise RestartError("command line: empty")
    return argv


def _apply(env: Mapping[str, str], edit: EnvEdit) -> dict[str, str]:
    out = dict(env)
    for name, value in edit:
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def _secret_flag(word: str) -> str:
    """`--api-key` for `--api-key` and `--api-key=...`; "" for a word that is no secret's."""
    flag = word.split("=", 1)[0]
    return flag if flag.startswith("-") and is_secret_key(flag.lstrip("-")) else ""


def keep_secrets(new: tuple[str, ...], old: tuple[str, ...]) -> tuple[str, ...]:
    """The dialog shows `--api-key <redacted>`; a command line edited there keeps the last
    run's value wherever `<redacted>` is left after (or `=`-joined to) the same flag. A
    `<redacted>` with no earlier value to keep is refused: the key must be typed."""
    values: dict[str, list[str]] = {}
    for i, word in enumerate(old):
        flag = _secret_flag(word)
        if flag and "=" in word:
            values.setdefault(flag, []).append(word.split("=", 1)[1])
        elif flag and i + 1 < len(old):
            values.setdefault(flag, []).append(old[i + 1])
    out = list(new)
    for i, word in enumerate(out):
        flag = _secret_flag(word)
        joined = bool(flag) and word == f"{flag}={REDACTED}"
        after = i > 0 and word == REDACTED and "=" not in out[i - 1] and _secret_flag(out[i - 1])
        if not joined and not after:
            continue
        flag = flag if joined else _secret_flag(out[i - 1])
        if not values.get(flag):
            raise RestartError(f"command line: {flag} {REDACTED}: there is no earlier value to "
                               "keep; type the value itself")
        value = values[flag].pop(0)
        out[i] = f"{flag}={value}" if joined else value
    return tuple(out)


def edit_refused(plan: RestartPlan) -> str:
    """Why this plan's launch cannot be edited here, or "" when it can."""
    if plan.mode == "unit":
        return (f"{plan.unit} is a systemd unit: its command and environment are the unit's "
                "to change")
    return ""


def edit_plan(plan: RestartPlan, *, env: EnvEdit = (), argv: tuple[str, ...] = (),
              url: str = "", match: str = DEFAULT_MATCH) -> RestartPlan:
    """The plan with the person's changes (none: the plan as it is). `url` and `match` are
    the host entry's: the port to verify comes from the configured URL, else the new command
    line; a command line the entry's `match` no longer finds is refused (the console could not
    find the server it starts, nor restart it again)."""
    if not (env or argv):
        return plan
    refused = edit_refused(plan)
    if refused:
        raise RestartError(f"{plan.host}: {refused}")
    new_argv = keep_secrets(tuple(argv), plan.argv) or plan.argv
    if not matches(list(new_argv), match.split()):
        raise RestartError(f"command line: {shown_argv(new_argv)[:200]} does not match the "
                           f"host entry's match {match!r}: the console would not find it")
    base = dict(plan.original_env)
    edits = tuple((name, base.get(name), value) for name, value in env
                  if base.get(name) != value)
    address, port = server_address(url, list(new_argv))
    if plan.container is not None:
        # A container's launch changes only by making the container again; the paths on its
        # command line are the container's, so the host has none of them to check.
        if new_argv == plan.argv and not edits and not plan.recreate:
            return plan
        return plan.model_copy(update={
            "argv": new_argv, "recreate": True,
            "command": recreate_command(plan.container[0], plan.container[1], plan.compose),
            "original_env": _apply(plan.original_env, env),
            "launch_env": _apply(plan.launch_env, env),
            "env_edits": edits, "url": address, "port": port})
    return plan.model_copy(update={
        "argv": new_argv, "command": shown_argv(new_argv),
        "last_argv": plan.argv if new_argv != plan.argv else (),
        "original_env": _apply(plan.original_env, env),
        "launch_env": _apply(plan.launch_env, env),
        "env_edits": edits, "url": address, "port": port,
        "inputs": relaunch_inputs(new_argv)})
