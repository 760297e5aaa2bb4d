"""Configs probe: the draft's and target's config.json, read on the host (stdlib, python3).

A model may be a local directory, a config.json path, or a hub id (`org/name`) that vLLM
downloaded into the Hugging Face cache of the serving user (`$HF_HUB_CACHE`, else
`$HF_HOME/hub`, else `~/.cache/huggingface/hub`; the serve process's own environment is passed
in), where the snapshot `refs/main` names is used. The text comes back as it is; the console
parses it, so that a JSON error is reported with its line and column.

stdin: {"items": {"draft": {"model", "env": {...}, "cwd"}, "target": {...}}, "max_bytes": int}
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ..wire import answer, read_params


def _hub_dir(model: str, env: dict[str, str]) -> str:
    cache = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not cache:
        xdg = env.get("XDG_CACHE_HOME") or os.path.join(
            env.get("HOME") or os.path.expanduser("~"), ".cache")
        home = env.get("HF_HOME") or os.path.join(xdg, "huggingface")
        cache = os.path.join(home, "hub")
    return os.path.join(cache, "models--" + model.replace("/", "--"))


def _hub_snapshot(model: str, env: dict[str, str]) -> tuple[str | None, str]:
    repo = _hub_dir(model, env)
    if not os.path.isdir(repo):
        return None, repo
    try:
        with open(os.path.join(repo, "refs", "main")) as fh:
            revision = fh.read().strip()
    except OSError:
        revision = ""
    snapshots = os.path.join(repo, "snapshots")
    if revision and os.path.isdir(os.path.join(snapshots, revision)):
        return os.path.join(snapshots, revision), repo
    try:
        names = sorted(os.listdir(snapshots))
    except OSError:
        return None, repo
    return (os.path.join(snapshots, names[-1]) if names else None), repo


def read_model_config(model: str, env: dict[str, str], max_bytes: int,
                      cwd: str | None = None) -> dict[str, Any]:
    """The state of one model's config.json, with its text when readable. A relative path is
    taken from the serve process's working directory `cwd`, as vLLM would."""
    out: dict[str, Any] = {"model": model}
    model = os.path.expanduser(model)
    if cwd and not os.path.isabs(model) and os.path.exists(os.path.join(cwd, model)):
        model = os.path.join(cwd, model)
    if os.path.isfile(model):
        out["source"] = "file"
        path = model
    elif os.path.isdir(model):
        out["source"] = "directory"
        path = os.path.join(model, "config.json")
    elif os.path.exists(model):
        out.update(state="not-a-directory", path=model)
        return out
    elif model.count("/") == 1 and not model.startswith((".", "/", "~")):
        snapshot, repo = _hub_snapshot(model, env)
        if snapshot is None:
            out.update(state="not-found", path=model, looked=repo)
            return out
        out["source"] = "hub cache"
        path = os.path.join(snapshot, "config.json")
    else:
        out.update(state="not-found", path=model)
        return out
    out["path"] = path
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        out["state"] = "no-config"
        return out
    except PermissionError:
        out["state"] = "denied"
        return out
    except OSError as exc:
        out.update(state="unreadable", error=exc.strerror or str(exc))
        return out
    if len(raw) > max_bytes:
        out["state"] = "too-big"
        return out
    out["state"] = "ok"
    out["text"] = raw.decode("utf-8", "replace")
    with contextlib.suppress(OSError):  # written after the server started: not what it runs
        out["mtime"] = os.stat(path).st_mtime
    return out


def probe(params: dict[str, Any]) -> dict[str, Any]:
    """Every requested model's config."""
    max_bytes = int(params.get("max_bytes", 4 * 1024 * 1024))
    return {name: read_model_config(item["model"], item.get("env") or {}, max_bytes,
                                    item.get("cwd"))
            for name, item in params["items"].items()}


def main(argv: list[str]) -> int:
    """The `probe-configs` entry point: parameters on stdin, the answer after the marker."""
    return answer(probe(read_params()))
