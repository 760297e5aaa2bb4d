"""The debug restart, and the plain one that takes it back.

vLLM's troubleshooting guide's switches for a hang: `VLLM_LOGGING_LEVEL=DEBUG`,
`NCCL_DEBUG=INFO`, `CUDA_LAUNCH_BLOCKING=1` (GPUs only: it serialises every kernel launch), and
on 0.33+ the watchdog, which writes faulthandler dumps on no progress
(`--watchdog-config '{"dump_dir": DIR}'`, VLLM_FACTS.md). `debug_changes` gives them as the
restart dialog's edits of a plan (shown there as an environment and command-line diff), and
`plain_changes` the edits that take them out again. The debug launch names the variables it set
in `DEBUG_MARK`, so a plain restart takes out only those: a `VLLM_LOGGING_LEVEL=DEBUG` the
person set themselves stays. A systemd unit's command and environment are the unit's: its
debug restart is refused by name, with the drop-in that does it there.
"""

from __future__ import annotations

import json
import posixpath

from vllm_console.console.hostside.vocabulary import DEFAULT_MATCH
from vllm_console.console.restart.edit import EnvEdit, edit_plan
from vllm_console.console.restart.model import RestartPlan
from vllm_console.console.restart.plan import RestartError

DEBUG_ENV = (("VLLM_LOGGING_LEVEL", "DEBUG"), ("NCCL_DEBUG", "INFO"))
GPU_DEBUG_ENV = (("CUDA_LAUNCH_BLOCKING", "1"),)
WATCHDOG_FLAG = "--watchdog-config"
WATCHDOG_FROM = (0, 33)
DEBUG_MARK = "VLLM_CONSOLE_DEBUG"
"""Set by a debug launch to the names of the variables it set (comma-separated)."""
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
    switches = DEBUG_ENV + (GPU_DEBUG_ENV if gpu else ())
    added = tuple((name, value) for name, value in switches
                  if plan.original_env.get(name) != value)
    env: EnvEdit = added + ((DEBUG_MARK, ",".join(name for name, _ in added)),) if added else ()
    argv: tuple[str, ...] = ()
    watchdog = version_tuple(version) >= WATCHDOG_FROM
    if watchdog and not any(w == WATCHDOG_FLAG or w.startswith(WATCHDOG_FLAG + "=")
                            for w in plan.argv):
        argv = (*plan.argv, WATCHDOG_FLAG, json.dumps({"dump_dir": dump_dir(plan)}))
    return env, argv


def plain_changes(plan: RestartPlan) -> tuple[EnvEdit, tuple[str, ...]]:
    """The edits that take the debug switches out of `plan`'s launch (nothing when it has
    none of them): the variables the debug launch named in `DEBUG_MARK`, and the mark."""
    mark = plan.original_env.get(DEBUG_MARK)
    ours = {name for name, _ in DEBUG_ENV + GPU_DEBUG_ENV}
    named = [n for n in (mark or "").split(",") if n in ours and n in plan.original_env]
    env = tuple((name, None) for name in named) + (((DEBUG_MARK, None),) if mark is not None
                                                    else ())
    argv = _without_watchdog(plan.argv)
    return env, (argv if argv != plan.argv else ())


def is_debug(plan: RestartPlan) -> bool:
    """Whether `plan`'s launch runs with the debug switches (the plain restart has some to
    take out)."""
    env, argv = plain_changes(plan)
    return bool(env or argv)


def unit_refusal(plan: RestartPlan, env: EnvEdit) -> str:
    """Why a unit's debug (or plain) restart is refused, with the drop-in that does it in the
    unit itself; "" for a launch the console makes."""
    if plan.mode != "unit":
        return ""
    user = " --user" if plan.user_unit else ""
    lines = " ".join(f"{name}={value}" for name, value in env if value is not None
                     and name != DEBUG_MARK)
    how = (f"add them with `systemctl{user} edit {plan.unit}` ([Service] Environment={lines})"
           if lines else f"take them out of the unit (`systemctl{user} edit {plan.unit}`)")
    return (f"{plan.host}: {plan.unit} is a systemd unit: its environment is the unit's, so "
            f"the console does not change it; {how}, then `vllm-console restart`")


def debug_plan(plan: RestartPlan, *, gpu: bool, version: str | None, url: str = "",
               match: str = DEFAULT_MATCH) -> RestartPlan:
    """`plan` relaunched with the debug switches. RestartError (before anything is asked)
    for a unit, and for an edit the launch cannot take."""
    env, argv = debug_changes(plan, gpu=gpu, version=version)
    refused = unit_refusal(plan, env)
    if refused:
        raise RestartError(refused)
    return edit_plan(plan, env=env, argv=argv, url=url, match=match)


def plain_plan(plan: RestartPlan, *, url: str = "", match: str = DEFAULT_MATCH) -> RestartPlan:
    """`plan` without the debug switches a debug restart put in (as it is when there are
    none): every plain restart takes them out, and shows it in its diff."""
    env, argv = plain_changes(plan)
    if not (env or argv) or plan.mode == "unit":
        return plan
    return edit_plan(plan, env=env, argv=argv, url=url, match=match)
