"""The environment a relaunch gets: the server's own, with or without the trace hook.

A traced run gets the hook's directory in front of PYTHONPATH and two variables that say what
it did (`VLLM_CONSOLE_TRACE_HOOK`, and `VLLM_CONSOLE_ORIG_PYTHONPATH` when there was a
PYTHONPATH before). From those the next restart restores the original environment exactly, so
hook directories never pile up and a plain restart runs without the hook.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from vllm_console.console.hostside.vocabulary import (
    TRACE_ENV_HOOK,
    TRACE_ENV_ORIG_PYTHONPATH,
    TRACE_ENV_WATCH,
    is_hook_dir,
)

_OURS = (TRACE_ENV_HOOK, TRACE_ENV_WATCH, TRACE_ENV_ORIG_PYTHONPATH)

def original_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the server had before any traced restart touched it."""
    out = {k: v for k, v in env.items() if k not in _OURS}
    if TRACE_ENV_HOOK in env:
        if TRACE_ENV_ORIG_PYTHONPATH in env:
            out["PYTHONPATH"] = env[TRACE_ENV_ORIG_PYTHONPATH]
        else:
            out.pop("PYTHONPATH", None)
    elif "PYTHONPATH" in out:
        # A hook directory without our variables (edited by hand): drop just that entry.
        parts = out["PYTHONPATH"].split(":")
        kept = [p for p in parts if not is_hook_dir(p)]
        if len(kept) != len(parts):
            if kept:
                out["PYTHONPATH"] = ":".join(kept)
            else:
                out.pop("PYTHONPATH")
    return out


def launch_env(original: Mapping[str, str], *, hook_dir: str = "",
               watch: Sequence[str] = ()) -> dict[str, str]:
    """The relaunch's environment: the original, plus the hook for a traced run."""
    env = dict(original)
    if not hook_dir:
        return env
    before = original.get("PYTHONPATH")
    env["PYTHONPATH"] = hook_dir + (f":{before}" if before else "")
    env[TRACE_ENV_HOOK] = hook_dir
    env[TRACE_ENV_WATCH] = json.dumps(list(watch))
    if before is not None:
        env[TRACE_ENV_ORIG_PYTHONPATH] = before
    return env


def env_changes(current: Mapping[str, str], new: Mapping[str, str]
                ) -> tuple[tuple[str, str | None], ...]:
    """What differs, by key (None: removed). Only our own keys and PYTHONPATH can differ, so
    showing the values shows no secret."""
    keys = sorted(set(current) | set(new))
    return tuple((k, new.get(k)) for k in keys if current.get(k) != new.get(k))
