"""The debug restart, and the plain one that takes it back.

vLLM's troubleshooting guide's switches for a hang: `VLLM_LOGGING_LEVEL=DEBUG`,
`NCCL_DEBUG=INFO`, `CUDA_LAUNCH_BLOCKING=1` (GPUs only: it serialises every kernel launch), and
on 0.33+ the watchdog, which writes faulthandler dumps on no progress
(`--watchdog-config '{"dump_dir": DIR}'`, VLLM_FACTS.md). `debug_changes` gives them as the
restart dialog's edits of a plan (shown there as an environment and command-line diff), and
`plain_changes` the edits that take them out again. Units refuse edits (their command and
environment are the unit's), so neither applies to one.
"""

from __future__ import annotations

import json
import posixpath

from vllm_console.console.restart.edit import EnvEdit
from vllm_console.console.restart.model import RestartPlan

DEBUG_ENV = (("VLLM_LOGGING_LEVEL", "DEBUG"), ("NCCL_DEBUG", "INFO"))
GPU_DEBUG_ENV = (("CUDA_LAUNCH_BLOCKING", "1"),)
WATCHDOG_FLAG = "--watchdog-config"
WATCHDOG_FROM = (0, 33)
DUMP_DIR_NAME = "vllm-console-stack-dumps"
"""The watchdog's dump directory the console names (beside the log; `/tmp/...` in a container):
a plain restart removes a `--watchdog-config` only when it names this directory."""


def version_tuple(version: str | None) -> tuple[int, ...]:
    """(0, 33) for "0.33.1+cu128"; () when it does not read as a version."""
    out: list[int] = []
    for part in (version or "").split("+")[0].split(".")[:2]:
        if not part.isdigit():
            return ()
        out.append(int(part))
    return tuple(out)


def dump_dir(plan: RestartPlan) -> str:
    if plan.container is not None or not plan.log:
        return posixpath.join("/tmp", DUMP_DIR_NAME)
    return posixpath.join(posixpath.dirname(plan.log), DUMP_DIR_NAME)


def _without_watchdog(argv: tuple[str, ...]) -> tuple[str, ...]:
    """`argv` without a `--watchdog-config` that names the console's dump directory."""
    out: list[str] = []
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word == WATCHDOG_FLAG and i + 1 < len(argv) and DUMP_DIR_NAME in argv[i + 1]:
            skip = True
            continue
        if word.startswith(WATCHDOG_FLAG + "=") and DUMP_DIR_NAME in word:
            continue
        out.append(word)
    return tuple(out)


def debug_changes(plan: RestartPlan, *, gpu: bool, version: str | None
                  ) -> tuple[EnvEdit, tuple[str, ...]]:
    """The environment edits and (when the watchdog is added) the new command line of a debug
    relaunch of `plan`; () for a command line left as it is."""
    env = DEBUG_ENV + (GPU_DEBUG_ENV if gpu else ())
    argv: tuple[str, ...] = ()
    watchdog = version_tuple(version) >= WATCHDOG_FROM
    if watchdog and not any(w == WATCHDOG_FLAG or w.startswith(WATCHDOG_FLAG + "=")
                            for w in plan.argv):
        argv = (*plan.argv, WATCHDOG_FLAG, json.dumps({"dump_dir": dump_dir(plan)}))
    return env, argv


def plain_changes(plan: RestartPlan) -> tuple[EnvEdit, tuple[str, ...]]:
    """The edits that take the debug switches out of `plan`'s launch (nothing when it has
    none of them)."""
    names = [name for name, _ in DEBUG_ENV + GPU_DEBUG_ENV]
    env = tuple((name, None) for name in names if name in plan.original_env)
    argv = _without_watchdog(plan.argv)
    return env, (argv if argv != plan.argv else ())


def is_debug(plan: RestartPlan) -> bool:
    """Whether `plan`'s launch runs with the debug switches (the plain restart has some to
    take out)."""
    env, argv = plain_changes(plan)
    return bool(env or argv)
