"""Step 1 and 2 of a restart: find the serve tree and say exactly what will be relaunched.

The plan is what the confirm dialog shows and what the host-side step then carries out
unchanged: the tree to stop (pid + start time of each member), the command, its working
directory and environment (the original one: a previous trace hook is taken out), the log, and
whether a systemd unit owns the process.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Any
from urllib.parse import urlsplit

from console.discovery import discover_serve
from console.host import Host, HostError, quote_argv
from console.remote_scripts import RemoteScripts
from console.restart.bundle import bundle_bytes, trace_hook_source
from console.restart.env import HOOK_DIR_PREFIX, env_changes, launch_env, original_env
from console.restart.model import RestartPlan
from console.settings import HostConfig

BUNDLE_NAME = "vllm-console-restart.pyz"
DEFAULT_WATCH = (
    "vllm.model_executor.models.qwen3_dflash:_get_dflash_layer_types",
    "vllm.model_executor.models.qwen3_dflash:_resolve_layer_attention",
)


class RestartError(Exception):
    """The restart cannot be planned or started; the message says why (exit status 2)."""


async def run_bundle(host: Host, python: str, bundle: str, *args: str,
                     timeout: float = 30.0) -> dict[str, Any]:
    """Run a query command of the host-side bundle; its one JSON answer."""
    result = await host.run([python, bundle, *args], timeout=timeout)
    if not result.ok:
        why = result.error_text.strip().splitlines()[-1:] or [f"exit {result.exit_status}"]
        raise RestartError(f"{host.name}: {python} {BUNDLE_NAME} {args[0]}: {why[0]}")
    try:
        answer = json.loads(result.text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RestartError(f"{host.name}: the restart helper answered no JSON") from None
    if not isinstance(answer, dict):
        raise RestartError(f"{host.name}: the restart helper answered no JSON object")
    return answer


def profile_watch(config: HostConfig) -> tuple[str, ...]:
    """The functions the profile asks a traced restart to watch."""
    try:
        from checks.profile import load_profile

        watch = tuple(load_profile(config.checks.profile).watch)
    except Exception:  # a broken profile is the check's business; the trace still helps
        return DEFAULT_WATCH
    return watch or DEFAULT_WATCH


def server_address(url: str, argv: list[str]) -> tuple[str, int | None]:
    """The server's URL as reachable on the host, and its port: the configured URL, else
    `--host`/`--port` from the command line (vLLM's default port is 8000)."""
    if url:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
    else:
        host, port = "127.0.0.1", 8000
        for i, word in enumerate(argv):
            value = argv[i + 1] if i + 1 < len(argv) else ""
            if word.startswith("--port="):
                value, word = word.split("=", 1)[1], "--port"
            if word.startswith("--host="):
                value, word = word.split("=", 1)[1], "--host"
            if word == "--port" and value.isdigit():
                port = int(value)
            elif word == "--host" and value:
                host = value
    if host in ("0.0.0.0", "::", "", "localhost"):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}", port


async def _find_root(host: Host, config: HostConfig, python: str, bundle: str,
                     scripts: RemoteScripts) -> tuple[int | None, str, list[str]]:
    """(pid of the serve process or None, interpreter that runs it, notes).

    `console.discovery.discover_serve` finds it. Where several processes match, discovery takes
    the oldest; a restart must not guess, so then the one with an EngineCore child is taken
    (a look-alike command line has none), and with no single such one the restart refuses."""
    notes: list[str] = []
    serve = await discover_serve(host, config.serve, scripts=scripts, python=python)
    if serve is None:
        return None, python, notes
    python = config.serve.python or serve.python or python
    if not serve.others:
        return serve.pid, python, notes
    # Several match: look at each candidate's tree.
    words = (config.serve.match or "vllm serve").split()
    found = await run_bundle(host, python, bundle, "find", *words)
    candidates = [c for c in found.get("candidates", []) if isinstance(c, dict)]
    with_engine = [c for c in candidates if c.get("engine")]
    pick = with_engine or candidates
    if not pick:
        return None, python, notes
    if len(pick) > 1:
        listed = "; ".join(f"pid {c['pid']}: {quote_argv(c.get('argv', []))[:120]}"
                           for c in pick)
        raise RestartError(f"{host.name}: {len(pick)} processes match "
                           f"{config.serve.match!r} ({listed}); set serve.match (--match) so "
                           "that one does")
    if len(candidates) > 1:
        others = ", ".join(str(c["pid"]) for c in candidates if c is not pick[0])
        notes.append(f"{len(candidates)} processes match {config.serve.match!r}: restarting "
                     f"pid {pick[0]['pid']} (it has the EngineCore); left alone: {others}")
    return int(pick[0]["pid"]), python, notes


def _matches(argv: list[str], words: list[str]) -> bool:
    """Each word is a substring of a distinct argv element, in order (as discovery matches)."""
    at = 0
    for word in words:
        while at < len(argv) and word not in argv[at]:
            at += 1
        if at >= len(argv):
            return False
        at += 1
    return True


def _members(described: dict[str, Any]) -> tuple[tuple[int, int, str], ...]:
    return tuple((int(m["pid"]), int(m["start"]), str(m.get("comm", "")))
                 for m in described.get("members", []))


async def plan_restart(host: Host, config: HostConfig, *, trace: bool = False,
                       watch: tuple[str, ...] | None = None,
                       scripts: RemoteScripts | None = None) -> RestartPlan:
    """Discover the serve tree (or the last launch when none runs) and build the plan.
    Raises RestartError (or HostError) when there is nothing sound to restart."""
    scripts = scripts or RemoteScripts(host)
    bundle = await scripts.path(BUNDLE_NAME, bundle_bytes())
    private = posixpath.dirname(bundle)
    python = config.serve.python or "python3"
    pid, python, notes = await _find_root(host, config, python, bundle, scripts)
    described = await run_bundle(host, python, bundle, "describe",
                                 str(pid) if pid is not None else "-", "--dir", private)
    if pid is not None and "error" in described:
        raise RestartError(f"{host.name}: {described['error']} (it exited just now?)")
    holder = described.get("lock") or {}
    if holder:
        notes.append(f"a restart is already running (pid {holder.get('pid')}, by "
                     f"{holder.get('by') or '?'}): this one will be refused")
    if pid is not None and described.get("uid") != described.get("me"):
        raise RestartError(f"{host.name}: the serve process {pid} belongs to "
                           f"{described.get('user')}; the console never signals another "
                           "user's process")
    unit = config.serve.unit or str(described.get("unit") or "")
    user_unit = bool(described.get("user_unit")) and not config.serve.unit
    if described.get("unit_note"):
        notes.append(str(described["unit_note"]))
    argv = [str(a) for a in described.get("argv") or []]
    env = described.get("env")
    log = config.serve.log
    members = _members(described)
    words = (config.serve.match or "vllm serve").split()
    if pid is None:
        last = described.get("last") or {}
        if not _matches([str(a) for a in last.get("argv") or []], words):
            last = {}
        if not last.get("argv") and not unit:
            raise RestartError(
                f"{host.name}: no serve process found (match {config.serve.match!r}) and no "
                "earlier launch by the console to start again")
        argv = [str(a) for a in last.get("argv") or []]
        env = last.get("env") or {}
        described["cwd"] = last.get("cwd") or ""
        log = log or str(last.get("log") or "")
        unit = unit or str(last.get("unit") or "")
        user_unit = user_unit or bool(last.get("user_unit"))
        notes.append("no serve process runs: the last launch is started again")
    elif argv and argv[0].startswith("VLLM::"):
        raise RestartError(f"{host.name}: pid {pid} renamed itself ({argv[0]}): its command "
                           "line is gone; set serve.match to find the API server")
    if env is None:
        raise RestartError(f"{host.name}: cannot read the environment of pid {pid}")
    if described.get("stdout_is_file"):
        stdout = str(described["stdout"])
        if log and log != stdout:
            notes.append(f"the server writes to {stdout}, not the configured log {log}: "
                         "the relaunch appends to where it really wrote")
        log = stdout
    elif pid is not None and not log:
        log = posixpath.join(private, "vllm-serve.log")
        notes.append(f"the server's output went to {described.get('stdout') or '?'}, not a "
                     f"file: the relaunch writes to {log}")
    if unit and trace:
        raise RestartError(f"{host.name}: {unit} is a systemd unit; a traced restart "
                           "relaunches the command itself, which a unit does not allow. "
                           "Restart without --trace, or run the server outside systemd")
    url, port = server_address(config.serve.url, argv)
    original = original_env({str(k): str(v) for k, v in dict(env).items()})
    watched = tuple(watch or profile_watch(config)) if trace else ()
    hook_dir = ""
    if trace:
        digest = hashlib.sha256(trace_hook_source()).hexdigest()[:12]
        hook_dir = posixpath.join(private, f"{HOOK_DIR_PREFIX}{digest}")
    new_env = launch_env(original, hook_dir=hook_dir, watch=watched)
    if unit:
        command = f"systemctl{' --user' if user_unit else ''} restart {unit}"
    else:
        if not argv:
            raise RestartError(f"{host.name}: no command line to relaunch")
        command = quote_argv(argv)
    return RestartPlan(
        host=host.name, mode="unit" if unit else "process", command=command, argv=tuple(argv),
        cwd=str(described.get("cwd") or ""), log=log, unit=unit, user_unit=user_unit,
        pid=pid, start_ticks=int(described.get("start") or 0),
        user=str(described.get("user") or ""), members=members, url=url, port=port,
        trace=trace, watch=watched, env_changes=env_changes(dict(env), new_env),
        notes=tuple(notes), original_env=original, launch_env=new_env, python=python,
        bundle=bundle, hook_dir=hook_dir)


async def lock_holder(host: Host, plan: RestartPlan) -> dict[str, Any]:
    """Who holds the host's restart lock now ({} when nobody)."""
    try:
        return await run_bundle(host, plan.python, plan.bundle, "lock", "--dir",
                                posixpath.dirname(plan.bundle))
    except (RestartError, HostError):
        return {}
