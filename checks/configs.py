"""The draft's and target's config.json, read on the host in one script run.

The host sends the text back and it is parsed here, so that a JSON error names the file, the
line and the column. Each outcome is a `ConfigRead` with a message a person can act on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from vllm_console.checks.models import Evidence
from vllm_console.console.transport.host import Host
from vllm_console.console.transport.remote_scripts import Inside, ScriptRun, run_json

HF_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "HOME")


@dataclass(frozen=True)
class ConfigRead:
    """One model's config.json: the parsed object, or why there is none."""

    name: str
    """`draft` or `target`."""
    model: str
    """The model as configured or discovered (a directory, a file, or a hub id)."""
    path: str = ""
    """The config.json read."""
    source: str = ""
    """`directory`, `file` or `hub cache`."""
    data: Mapping[str, Any] | None = field(default=None, repr=False)
    problem: str = ""
    """Why there is no data (empty when there is)."""
    command: str = ""
    exit: int | None = None
    link_failed: bool = False
    """The read failed because the link to the host did (not because of the file)."""
    mtime: float | None = None
    """When the file was last written (seconds since the epoch, the host's clock)."""

    @property
    def ok(self) -> bool:
        return self.data is not None

    def evidence(self) -> Evidence:
        """What was read (or what went wrong), for the links that rely on it."""
        if self.data is None:
            excerpt = self.problem
        else:
            excerpt = f"{self.path} ({self.source}): " + json.dumps(self.data)[:1500]
        return Evidence.make(f"read-{self.name}-config", self.command, self.exit, excerpt)


def _problem(name: str, info: Mapping[str, Any], host: str) -> str:
    model, path, state = info.get("model", ""), info.get("path", ""), info.get("state")
    if state == "not-found":
        looked = f" (nor in the Hugging Face cache: {info['looked']})" if info.get("looked") \
            else ""
        return f"{name} {model}: no such file or directory on {host}{looked}"
    if state == "no-config":
        return f"{name} directory {model} has no config.json"
    if state == "denied":
        return f"{path}: permission denied for the login user"
    if state == "not-a-directory":
        return f"{name} {model} is neither a model directory nor a config.json"
    if state == "too-big":
        return f"{path} is too big to be a config.json"
    return f"{path or model}: cannot read: {info.get('error', state)}"


def parse_read(name: str, info: Mapping[str, Any], run: ScriptRun, host: str) -> ConfigRead:
    """Turn the probe's record for one model into a ConfigRead."""
    base = ConfigRead(name, str(info.get("model", "")), str(info.get("path", "")),
                      str(info.get("source", "")), command=run.command, exit=run.exit)
    if info.get("state") != "ok":
        return replace(base, problem=_problem(name, info, host))
    try:
        data = json.loads(info.get("text", ""))
    except json.JSONDecodeError as exc:
        return replace(base, problem=f"{base.path} is not valid JSON: line {exc.lineno} "
                                     f"column {exc.colno}: {exc.msg}")
    except ValueError as exc:  # a number too long to convert (`int` refuses > 4300 digits)
        return replace(base, problem=f"{base.path} is not valid JSON: {exc}")
    except RecursionError:  # 200k levels of nesting: invalid, never an internal error
        return replace(base, problem=f"{base.path} is not valid JSON: nested deeper than "
                                     f"{sys.getrecursionlimit()} levels")
    if not isinstance(data, dict):
        return replace(base, problem=f"{base.path} is not a JSON object")
    mtime = info.get("mtime")
    return replace(base, data=data, mtime=float(mtime) if isinstance(mtime, int | float)
                   and not isinstance(mtime, bool) else None)


async def read_configs(host: Host, models: Mapping[str, str],
                       env: Mapping[str, str], cwd: str | None, *,
                       inside: Inside | None = None, python: str = "python3"
                       ) -> dict[str, ConfigRead]:
    """Read every named model's config.json in one script run: python3 on the host, or inside
    the server's container with its interpreter (`python`), at the container's paths."""
    wanted = {k: v for k, v in models.items() if v}
    out = {k: ConfigRead(k, "", problem=f"no {k}: not configured and no running serve "
                                         f"process names one (pass --{k})")
           for k, v in models.items() if not v}
    if not wanted:
        return out
    hf_env = {k: v for k, v in env.items() if k in HF_ENV}
    items = {k: {"model": v, "env": hf_env, "cwd": cwd} for k, v in wanted.items()}
    run = await run_json(host, "probe-configs", python if inside else "python3",
                         {"items": items}, timeout=30, inside=inside)
    for name, model in wanted.items():
        if run.data is None or not isinstance(run.data.get(name), Mapping):
            out[name] = ConfigRead(name, model, problem=f"cannot read the {name} config: "
                                                        f"{run.error}",
                                   command=run.command, exit=run.exit,
                                   link_failed=run.link_failed)
        else:
            out[name] = parse_read(name, run.data[name], run, host.name)
    return out
