"""A compose service's server restarted with a change: compose recreates it from the project's
own files plus an override file that carries the change, never an edit of the user's files.

A container that compose made (its `com.docker.compose.*` labels) belongs to its project: made
again by hand, compose would no longer know it, and the next `compose up` would fight it. So the
change (an edited command line, the environment's differences, the trace hook's variables)
goes into a private override file (0600: the environment may hold secrets), given to compose
after the project's own files with `--project-name`, `--project-directory` and `-f` as the
labels recorded them, and removed when compose is done:

    COMPOSE -p PROJECT --project-directory DIR -f FILE... -f OVERRIDE \\
        up --no-start --no-deps --force-recreate --no-build SERVICE
    RUNTIME cp - CONTAINER:/             (the trace hook, when the restart is traced)
    COMPOSE ... -f OVERRIDE start SERVICE

The trace hook is copied into the created container (`recreate.copy_hook`) and the override's
environment names that copy, never a mount of the console's cache: the container starts
again (`docker restart`, the daemon after a reboot) with that cache cleared. `compose start`,
not the runtime's, starts it: compose connects a service's further networks at start.

Refused, with nothing stopped: the project's files gone or unreadable; a service with several
containers (compose would recreate them all); files changed since the container was made
(compose would apply those changes too: the base hash is kept in a label of ours, so a
container the console made compares as the files alone made it); an environment variable
removed that the console did not add (an override cannot unset one). A plain restart after a
traced one brings the service up from its own files alone, which takes the hook out.

When a step fails, the service is brought up again from its own files (as before the change);
when the new server does not get ready, the status says how to do that.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any, Callable

from ..containers import _COMPOSE_PROJECT, _COMPOSE_SERVICE
from ..vocabulary import OWN_ENV_PREFIX
from .container import ContainerFailed, _main_pid, _state, cli, follow_start, preflight, run_tool
from .recreate import (
    command_args,
    copy_hook,
    env_inside,
    full_command,
    image_of,
    install_hook,
)
from .status import StatusFile, write_private

PROJECT, SERVICE = _COMPOSE_PROJECT, _COMPOSE_SERVICE  # the labels discovery reads
WORKDIR = "com.docker.compose.project.working_dir"
FILES = "com.docker.compose.project.config_files"
HASH = "com.docker.compose.config-hash"
BASE = "vllm-console.compose-base-hash"
"""Our label: the hash of the project's own files when the console recreated the service with
an override (compose's own hash then covers the override too)."""
OVERRIDE = "vllm-console-compose-override-"
"""Our override file's name (compose records it among the project's files: never one of
them)."""


def project_of(info: dict[str, Any]) -> dict[str, Any] | None:
    """The compose project a container belongs to (None: not made by compose)."""
    labels = (info.get("Config") or {}).get("Labels") or {}
    if not labels.get(PROJECT) or not labels.get(SERVICE):
        return None
    workdir = str(labels.get(WORKDIR) or "")
    files = [f if os.path.isabs(f) else os.path.join(workdir, f)
             for f in str(labels.get(FILES) or "").split(",")
             if f and not os.path.basename(f).startswith(OVERRIDE)]
    return {"project": str(labels[PROJECT]), "service": str(labels[SERVICE]),
            "workdir": workdir, "files": files,
            "hash": str(labels.get(BASE) or labels.get(HASH) or "")}


def tool(runtime: str) -> list[str]:
    """The compose CLI on the host: the runtime's plugin (`docker compose`), else the
    standalone `docker-compose` (`podman-compose` for Podman)."""
    for argv in ([runtime, "compose"], [f"{runtime}-compose"]):
        with contextlib.suppress(ContainerFailed):
            run_tool([*argv, "version"], timeout=30, what=" ".join(argv))
            return argv
    raise ContainerFailed(f"nothing was stopped: the server's container was made by compose, "
                          f"and neither `{runtime} compose` nor `{runtime}-compose` runs on "
                          "the host to recreate it")


def base_args(compose: list[str], project: dict[str, Any]) -> list[str]:
    args = [*compose, "--project-name", project["project"]]
    if project["workdir"]:
        args += ["--project-directory", project["workdir"]]
    for path in project["files"]:
        args += ["-f", path]
    return args


def env_of(info: dict[str, Any]) -> dict[str, str]:
    out = {}
    for item in (info.get("Config") or {}).get("Env") or []:
        key, _, value = str(item).partition("=")
        out[key] = value
    return out


def override(info: dict[str, Any], image: dict[str, Any], plan: dict[str, Any],
             service: str, base_hash: str) -> dict[str, Any]:
    """The override that turns the service as its files make it into the planned launch (the
    trace hook's variables naming its copy inside the container, `copy_hook`)."""
    box = plan["container"]
    hook_dir = (plan.get("hook") or {}).get("dir") or ""
    now = env_of(info)
    new = env_inside({str(k): str(v) for k, v in (plan.get("env") or {}).items()}, hook_dir)
    traced = any(k.startswith(OWN_ENV_PREFIX) for k in now)
    kept = [k for k in now if k not in new and not k.startswith(OWN_ENV_PREFIX)
            and not (k == "PYTHONPATH" and traced)]
    if kept:
        raise ContainerFailed("nothing was stopped: a compose override cannot unset "
                              f"{', '.join(sorted(kept))}: remove it from the project's "
                              "compose file")
    spec: dict[str, Any] = {"labels": {BASE: base_hash}}
    changed = {k: literal(v) for k, v in new.items() if now.get(k) != v}
    if changed:
        spec["environment"] = changed
    old_argv = list(box.get("argv") or plan.get("argv") or [])
    if list(plan.get("argv") or []) != old_argv:
        entry, words = command_args(info, image, full_command(info, old_argv,
                                                               list(plan["argv"])))
        if entry:
            spec["entrypoint"] = [literal(entry[1])]
        spec["command"] = [literal(w) for w in words]
    out: dict[str, Any] = {"services": {service: spec}}
    version = _version(info)
    if version:
        out = {"version": version, **out}
    return out


def literal(value: str) -> str:
    """A value as compose must read it: itself. Compose interpolates `$NAME`, `${NAME}` and
    `$$` in every file it reads, overrides too; `$$` is its literal dollar."""
    return value.replace("$", "$$")


def _version(info: dict[str, Any]) -> str:
    """The first compose file's `version:` (compose refuses an override of another one)."""
    project = project_of(info) or {"files": []}
    for path in project["files"][:1]:
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as fh:
            found = re.search(r"(?m)^version:\s*['\"]?([0-9.]+)", fh.read(65536))
            return found.group(1) if found else ""
    return ""


def _one_container(runtime: str, project: dict[str, Any]) -> None:
    found = cli(runtime, "ps", "-a", "-q", "--filter", f"label={PROJECT}={project['project']}",
                "--filter", f"label={SERVICE}={project['service']}", timeout=30).split()
    if len(found) > 1:
        raise ContainerFailed(f"nothing was stopped: the compose service {project['service']} "
                              f"has {len(found)} containers, and compose would recreate them "
                              "all")


def run(plan: dict[str, Any], status: StatusFile, left: Callable[[], bool],
        api_key: str, hook: Callable[[dict[str, Any]], None]) -> None:
    """Recreate the service through compose with the change (the module's docstring)."""
    box = dict(plan["container"])
    runtime = box["runtime"]
    t = plan["timeouts"]
    before = preflight(plan)
    project = project_of(before)
    if project is None:
        raise ContainerFailed("nothing was stopped: the container is no longer a compose "
                              "service's")
    name = str(before.get("Name") or "").lstrip("/") or box["ref"]
    service, old_id, old_pid = project["service"], str(before["Id"]), _main_pid(before)
    gone = [f for f in project["files"] if not os.path.isfile(f)]
    if gone or not project["files"]:
        raise ContainerFailed("nothing was stopped: the compose project's files "
                              f"({', '.join(gone) or 'none recorded'}) are not on the host")
    _one_container(runtime, project)
    compose = tool(runtime)
    base = base_args(compose, project)
    try:
        hashed = run_tool([*base, "config", "--hash", service], timeout=60,
                          what="compose config").split()
    except ContainerFailed as exc:
        raise ContainerFailed(f"nothing was stopped: {exc}") from None
    if project["hash"] and hashed[-1:] != [project["hash"]]:
        raise ContainerFailed(
            f"nothing was stopped: the compose files of {project['project']} changed since "
            f"the container {name} was made, and recreating it would apply those changes "
            f"too; bring the service up first (`{' '.join(base)} up -d {service}`), then "
            "restart")
    _, image = image_of(before, runtime)
    document = override(before, image, plan, service, hashed[-1] if hashed else "")
    hook_dir = install_hook(plan, hook)
    stamp = plan.get("id") or "0"
    path = os.path.join(os.path.dirname(plan["paths"]["status"]), f"{OVERRIDE}{stamp}.json")
    changed = [*base, "-f", path]
    create = ["up", "--no-start", "--no-deps", "--force-recreate", "--no-build",
              "-t", str(int(t["term"])), service]
    status.write("note", f"{' '.join(compose)} up --force-recreate {service} (project "
                 f"{project['project']}, its own files and an override with the change)"
                 + (", the trace hook copied into the new container" if hook_dir else ""))
    status.write("stopping", f"{' '.join(compose)} stops {name} (its processes get SIGTERM, "
                 f"SIGKILL after {float(t['term']):g} s)",
                 processes=[{"pid": old_pid, "comm": name}])
    status.write("term-sent", f"{' '.join(compose)} up --force-recreate {service}")
    wait = float(t["term"]) + float(t["kill"]) + 180
    try:
        write_private(path, document)
        run_tool([*changed, *create], timeout=wait, what="compose up --no-start")
        if hook_dir:
            made = json.loads(cli(runtime, "inspect", name, timeout=30) or "[{}]")[0]
            if str(made.get("Id") or old_id) == old_id:
                raise ContainerFailed(f"compose made no new container {name}")
            copy_hook(runtime, str(made["Id"]), hook_dir)
        run_tool([*changed, "start", service], timeout=120, what="compose start")
    except ContainerFailed as exc:
        up = ["up", "-d", "--no-deps", "--force-recreate", "--no-build",
              "-t", str(int(t["term"])), service]
        try:
            run_tool([*base, *up], timeout=wait, what="compose up")
            back = "the service was brought up again from its own compose files"
        except ContainerFailed as again:
            back = f"bringing it up from its own files failed too ({again})"
        raise ContainerFailed(f"compose could not recreate {service} with the change "
                              f"({exc}); {back}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    now = json.loads(cli(runtime, "inspect", name, timeout=30) or "[{}]")[0]
    status.write("stopped", f"the container's old server (pid {old_pid}) is gone",
                 pids=[old_pid], killed=[])
    plan["container"] = {**box, "id": str(now.get("Id") or "")}
    now = _state(plan)
    pid = _main_pid(now)
    if not pid:
        raise ContainerFailed(f"the recreated container {name} is not running (exit code "
                              f"{(now.get('State') or {}).get('ExitCode')})")
    follow_start(plan, status, pid, left, api_key,
                 f"new server pid {pid} (the compose service {service} recreated: "
                 f"{str(now['Id'])[:12]}, was {old_id[:12]})",
                 failed_note=f"; `{' '.join(base)} up -d --force-recreate {service}` brings "
                             "it back as its own files describe")
