"""Step 1 and 2 of a restart: find the serve tree and say exactly what will be relaunched.

The plan is what the confirm dialog shows and what the host-side step then carries out
unchanged: the tree to stop (pid + start time of each member), the command, its working
directory and environment (the original one: a previous trace hook is taken out), the log, and
whether a systemd unit owns the process.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from vllm_console.console.hostclient.discovery import (
    DiscoveryError,
    Resolution,
    effective_serve,
    parse_serve_argv,
    resolve_serve,
    serve_port,
)
from vllm_console.console.hostclient.launch_env import env_changes, launch_env, original_env
from vllm_console.console.hostclient.launch_record import last_key
from vllm_console.console.hostside.argv import matches
from vllm_console.console.hostside.discover import env_items
from vllm_console.console.hostside.restart.hook_files import hook_digest
from vllm_console.console.hostside.vocabulary import (
    DEFAULT_MATCH,
    HOOK_DIR_PREFIX,
    argv_host,
    argv_port,
    reachable,
)
from vllm_console.console.restart.model import RestartPlan, shown_argv
from vllm_console.console.settings import HostConfig
from vllm_console.console.transport.host import Host, quote_argv
from vllm_console.console.transport.remote_scripts import run_json


class RestartError(Exception):
    """The restart cannot be planned or started; the message says why (exit status 2)."""


async def run_bundle(host: Host, python: str, *args: str,
                     timeout: float = 30.0) -> dict[str, Any]:
    """Run a query command of the host side's `restart` entry; its one JSON answer."""
    run = await run_json(host, "restart", python, args=args, timeout=timeout)
    if run.data is None:
        raise RestartError(f"{host.name}: restart {args[0]}: {run.error}")
    return dict(run.data)


def profile_watch(config: HostConfig, argv: list[str] | None = None) -> tuple[str, ...]:
    """The functions the profile asks a traced restart to watch: the configured profile's
    (`auto`: the profiles for the relaunched command line's speculative method), else (broken,
    or watching nothing) the default profile's. The one list is the profile's `watch`, which
    the runtime-activation link reads the trace of."""
    from vllm_console.checks.profile import AUTO, ProfileError, load_profile
    from vllm_console.checks.select import watch_for_argv

    if config.checks.profile in ("", AUTO) and argv:
        try:
            watch = watch_for_argv(argv)
        except ProfileError:  # a broken shipped profile is the check's business
            watch = ()
        if watch:
            return watch
    for name in (config.checks.profile, None):
        try:
            watch = tuple(load_profile(name).watch)
        except ProfileError:  # a broken profile is the check's business; the trace still helps
            continue
        if watch:
            return watch
    return ()


def server_address(url: str, argv: list[str]) -> tuple[str, int | None]:
    """The server's URL as reachable on the host, and its port: the configured URL, else
    `--host`/`--port` from the command line (vLLM's default port is 8000)."""
    if url:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host = reachable(parts.hostname)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    else:
        host, port = reachable(argv_host(argv)), argv_port(argv)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}", port


async def _resolve(host: Host, config: HostConfig, python: str) -> tuple[Resolution, str]:
    """The serve process by the console's one rule
    (`console.hostclient.discovery.resolve_serve`, which telemetry and the checks use too; a
    look-alike is never it), checked for what a restart must never act on: a port held by something
    else, a server a supervisor restarts by itself, several servers with nothing to choose between
    them. Returns it and the interpreter."""
    try:
        found = await resolve_serve(host, config.serve, python=python)
    except DiscoveryError as exc:
        raise RestartError(str(exc)) from None
    serve = found.process
    match = config.serve.match
    pinned = config.serve.container
    if pinned and (serve is None or serve.container is None):
        # A pinned container is the only target: nothing else stands in for it.
        why = str(found.facts.get("containers_problem") or
                  f"the container {pinned} (serve.container) runs no vLLM server")
        raise RestartError(f"{host.name}: {why}: nothing was stopped or started")
    if serve is None and found.facts.get("containers_unreachable"):
        raise RestartError(f"{host.name}: {found.facts.get('containers_problem')}; no server "
                           "is started on the host while it cannot be told whether this "
                           "one runs in a container: nothing was stopped or started")
    if serve is None:
        # A look-alike (a `vllm bench serve` client of the dead server) is never stopped; it
        # is named in the notes, and the last launch may start again beside it.
        port = found.port
        orphan_pids = {int(m["pid"]) for o in found.orphans for m in [o, *o.get("tree", [])]}
        holders = port.get("holders") or []
        if port.get("listening") and (not holders or any(
                int(h["pid"]) not in orphan_pids for h in holders)):
            who = "; ".join(f"pid {h['pid']} ({h.get('comm')}: "
                            f"{quote_argv(h.get('argv') or [])[:200]})" for h in holders) \
                or "a process this user cannot see (another user's)"
            raise RestartError(f"{host.name}: port {port['port']} is held by {who}, which is "
                               "no vLLM server of this user: nothing was stopped")
        return found, python
    python = config.serve.python or serve.python or python
    if serve.container is not None:  # the runtime restarts it: see _container_plan
        return found, python
    if serve.supervisor:
        raise RestartError(f"{host.name}: the server pid {serve.pid} is supervised "
                           f"({serve.supervisor}): restarting belongs to it; a restart here "
                           "would race it. Restart it there (a systemd unit: set serve.unit)")
    if serve.others and not found.port:
        listed = "; ".join(f"pid {item['pid']} (port {argv_port(item.get('argv') or [])}): "
                           f"{quote_argv(item.get('argv') or [])[:160]}"
                           for item in found.facts.get("serves", []))
        raise RestartError(f"{host.name}: {1 + len(serve.others)} vLLM servers match "
                           f"{match!r} ({listed}): nothing was stopped; choose one with "
                           "--port N (or serve.port in the hosts file)")
    return found, python


def _orphans_to_stop(found: Resolution, cwd: str, env: dict[str, str] | None
                     ) -> tuple[list[tuple[int, int, str]], list[str]]:
    """Orphaned engines that belong to this server: they hold its port, or they run in its
    working directory and one of them (the engine, or the resource tracker left beside it)
    has the server's whole environment. (A real engine renames itself and so overwrites its
    environment; its resource tracker keeps it.) The others are named and left alone."""
    wanted = set(env_items(env)) if env else set()
    members: list[tuple[int, int, str]] = []
    notes: list[str] = []
    for orphan in found.orphans:
        tree = [orphan, *orphan.get("tree", [])]
        names = ", ".join(f"{m.get('comm')} {m['pid']}" for m in tree)
        ours = orphan.get("holds_port") or (
            bool(cwd) and orphan.get("cwd") == cwd and bool(wanted) and
            any(wanted <= set(m.get("env_items") or ()) for m in tree))
        if ours:
            members.extend((int(m["pid"]), int(m.get("start") or 0), str(m.get("comm", "")))
                           for m in tree)
            notes.append(f"orphaned engine left by an earlier server ({names}): stopped too")
        else:
            notes.append(f"orphaned engine {names} runs without its server; not this "
                         "server's (another directory or environment): left alone")
    return members, notes


def _members(described: dict[str, Any]) -> tuple[tuple[int, int, str], ...]:
    return tuple((int(m["pid"]), int(m["start"]), str(m.get("comm", "")))
                 for m in described.get("members", []))


def _last_launch(host: Host, config: HostConfig, described: dict[str, Any],
                 port: int | None, found: tuple[str, ...] = (),
                 seen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """This host entry's last launch, checked: it belongs to this entry and its port is the
    configured one. The last launch is the console's record on the host, or the server this console
    last saw running (`seen`, `console.hostclient.launch_record.seen_launch`) when that started
    later. Raises RestartError saying why there is none to use."""
    last = described.get("last") or {}
    if seen and seen.get("argv") and float(seen.get("at") or 0) > float(last.get("at") or 0):
        last = dict(seen)
    words = (config.serve.match or DEFAULT_MATCH).split()
    if last and last.get("entry") not in (None, host.name):
        raise RestartError(f"{host.name}: the last launch on record belongs to host entry "
                           f"{last.get('entry')!r}, not this one: not starting it")
    if last and port and last.get("port") not in (None, port):
        raise RestartError(f"{host.name}: the last launch on record served port "
                           f"{last.get('port')}, not the configured {port}: not starting it")
    box = last.get("container") if last else None
    if isinstance(box, dict) and box.get("name"):
        # The server ran in a container: its command line is the container's, never one to
        # start on the host.
        runtime = box.get("runtime") or "docker"
        raise RestartError(f"{host.name}: the server last ran in the {runtime} container "
                           f"{box['name']}, which runs no server now: its command line is "
                           "the container's, not started on the host (start the container: "
                           f"`{runtime} start {box['name']}`): nothing was stopped or started")
    if last and not matches([str(a) for a in last.get("argv") or []], words):
        last = {}
    if not last.get("argv"):
        others = "; ".join(f"{o.get('entry')!r} (port {o.get('port')})"
                           for o in described.get("last_others") or [] if isinstance(o, dict))
        raise RestartError(
            f"{host.name}: no serve process found (match {config.serve.match!r}) and no "
            "earlier launch by the console for this host entry to start again"
            + (f" (launches on record for other entries: {others})" if others else "")
            + "".join(f"; {note}" for note in found[:3]))
    return last


LOG_KINDS_OK = ("file", "missing", "")


async def plan_restart(host: Host, config: HostConfig, *, trace: bool = False,
                       watch: tuple[str, ...] | None = None,
                       seen: Mapping[str, Any] | None = None) -> RestartPlan:
    """Find the serve tree by the console's one rule (or this host entry's last launch when
    none runs: the console's record, or `seen`, the server this console last saw running,
    whichever started later) and build the plan. Raises RestartError (or HostError) when
    there is nothing sound to restart; nothing on the host has changed then."""
    bundle = await host.scripts.bundle()
    private = posixpath.dirname(bundle)
    found, python = await _resolve(host, config, config.serve.python or "python3")
    serve = found.process
    if serve is not None and serve.container is not None:
        plan = _container_plan(host, config, found, trace=trace, bundle=bundle, watch=watch)
        if plan.recreate and not plan.compose[0] and plan.container is not None:
            await _can_create(host, plan.container[0])
        return plan
    pid = serve.pid if serve is not None else None
    notes = list(found.notes)
    key = last_key(host.name)
    query = ["describe", str(pid) if pid is not None else "-", "--dir", private, "--key", key]
    if config.serve.log:
        query += ["--log", config.serve.log]
    described = await run_bundle(host, python, *query)
    if pid is not None and "error" in described:
        raise RestartError(f"{host.name}: {described['error']} (it exited just now?)")
    if serve is not None and int(described.get("start") or 0) != serve.start_ticks:
        raise RestartError(f"{host.name}: pid {pid} is another process now (it exited just "
                           "now?): nothing was stopped; try again")
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
    members = list(_members(described))
    port = serve_port(config.serve)
    last: dict[str, Any] = {}
    if pid is None:
        # A unit starts without a record of ours; a command line needs this entry's record.
        last = {} if unit and not described.get("last") else \
            _last_launch(host, config, described, port, found.notes, seen)
        argv = [str(a) for a in last.get("argv") or []]
        env = last.get("env") or {}
        described["cwd"] = last.get("cwd") or ""
        unit = unit or str(last.get("unit") or "")
        user_unit = user_unit or bool(last.get("user_unit"))
        if last:
            when = datetime.fromtimestamp(float(last.get("at") or 0), UTC).astimezone()
            notes.append(f"no serve process runs: the last launch of this host entry "
                         f"({when.isoformat(timespec='seconds')} by {last.get('by') or '?'}, "
                         f"pid {last.get('pid')}) is started again")
    elif argv and argv[0].startswith("VLLM::"):
        raise RestartError(f"{host.name}: pid {pid} renamed itself ({argv[0]}): its command "
                           "line is gone; set serve.match to find the API server")
    if env is None:
        raise RestartError(f"{host.name}: cannot read the environment of pid {pid}")
    orphans, orphan_notes = _orphans_to_stop(found, str(described.get("cwd") or ""), env)
    members.extend(m for m in orphans if all(m[0] != have[0] for have in members))
    notes = [n for n in notes if not n.startswith("orphaned engine")] + orphan_notes
    # The log by the console's one rule, the one the log pane follows: the configured one,
    # else where the server's output goes (else its last launch's); a difference is warned of.
    chosen = effective_serve(config.serve, serve, last=last if pid is None else None)
    log = chosen.log.value
    notes.extend(w for w in chosen.warnings if w.startswith("warning: configured log "))
    if pid is not None and not log:
        log = posixpath.join(private, "vllm-serve.log")
        notes.append(f"the server's output went to {described.get('stdout') or '?'}, not a "
                     f"file: the relaunch writes to {log}")
    kind = str(described.get("log_kind") or "") if log == config.serve.log else ""
    if log and kind not in LOG_KINDS_OK:
        fallback = posixpath.join(private, "vllm-serve.log")
        notes.append(f"the log {log} is a {kind}, not a regular file (a relaunch writing to it "
                     f"could block for good): the relaunch writes to {fallback}")
        log = fallback
    if unit and trace:
        raise RestartError(f"{host.name}: {unit} is a systemd unit; a traced restart "
                           "relaunches the command itself, which a unit does not allow. "
                           "Restart without --trace, or run the server outside systemd")
    url, port = server_address(config.serve.url, argv)
    original = original_env({str(k): str(v) for k, v in dict(env).items()})
    watched = tuple(watch or profile_watch(config, argv)) if trace else ()
    hook_dir = ""
    if trace:
        hook_dir = posixpath.join(private, f"{HOOK_DIR_PREFIX}{hook_digest()}")
    new_env = launch_env(original, hook_dir=hook_dir, watch=watched)
    if unit:
        command = f"systemctl{' --user' if user_unit else ''} restart {unit}"
    else:
        if not argv:
            raise RestartError(f"{host.name}: no command line to relaunch")
        command = shown_argv(argv)
    return RestartPlan(
        host=host.name, mode="unit" if unit else "process", command=command, argv=tuple(argv),
        cwd=str(described.get("cwd") or ""), log=log, unit=unit, user_unit=user_unit,
        pid=pid, start_ticks=int(described.get("start") or 0),
        user=str(described.get("user") or ""), members=tuple(members), url=url, port=port,
        trace=trace, watch=watched, env_changes=env_changes(dict(env), new_env),
        notes=tuple(notes), original_env=original, launch_env=new_env, python=python,
        bundle=bundle, hook_dir=hook_dir, last_key=key,
        inputs=relaunch_inputs(argv) if not unit else ())


POLICY_NOTES = {
    "always": "the daemon starts it again whenever it stops",
    "unless-stopped": "the daemon starts it again whenever it stops, unless it was stopped "
                      "by hand",
}


def _container_plan(host: Host, config: HostConfig, found: Resolution, *, trace: bool,
                    bundle: str, watch: tuple[str, ...] | None = None) -> RestartPlan:
    """A server that is a container's main process restarts with its container: signalling
    the process would end the container, and relaunching its command line would start it on
    the host. As it is, in place (`docker restart`); with a change (the trace hook, or an
    earlier run's hook taken out), the container made again from its configuration
    (`console.hostside.restart.recreate`); an edited launch makes the same (`edit_plan`)."""
    serve = found.process
    assert serve is not None
    assert serve.container is not None
    box = serve.container
    notes = list(found.notes)
    policy = box.restart_policy or "no"
    argv = list(serve.argv)
    env = dict(serve.environ)
    original = original_env(env)
    watched = tuple(watch or profile_watch(config, argv)) if trace else ()
    hook_dir = ""
    if trace:
        hook_dir = posixpath.join(posixpath.dirname(bundle),
                                  f"{HOOK_DIR_PREFIX}{hook_digest()}")
    new_env = launch_env(original, hook_dir=hook_dir, watch=watched)
    recreate = new_env != env
    if recreate and not trace:
        notes.append("the container runs with the trace hook of an earlier traced restart: "
                     "it is made again without it")
    if policy in POLICY_NOTES:
        how = "stop` and `start" if recreate else "restart"
        notes.append(f"restart policy {policy}: {POLICY_NOTES[policy]}; `{box.runtime} "
                     f"{how}` is still what restarts it now (the daemon does not fight it). "
                     "If the new server exits and the daemon starts it again, that restart "
                     "is the daemon's: this one is reported as failed, never as done")
    url, port = server_address(config.serve.url, argv)
    name = (argv[0].rsplit("/", 1)[-1] if argv else "") or "server"
    members = ((serve.pid, serve.start_ticks, name),
               *((c.pid, 0, c.comm) for c in serve.children))
    compose = (box.compose_project or "", box.compose_service or "")
    command = recreate_command(box.runtime, box.ref, compose) if recreate else \
        f"{box.runtime} restart {box.ref}"
    return RestartPlan(
        host=host.name, mode="container", command=command, argv=tuple(argv), pid=serve.pid,
        start_ticks=serve.start_ticks, user=serve.user, members=members, url=url, port=port,
        trace=trace, watch=watched, env_changes=env_changes(env, new_env) if recreate else (),
        notes=tuple(notes), original_env=original, launch_env=new_env, python="python3",
        bundle=bundle, hook_dir=hook_dir, recreate=recreate, container_argv=tuple(argv),
        container=(box.runtime, box.ref, box.id, policy), last_key=last_key(host.name),
        compose=compose)


async def _can_create(host: Host, runtime: str) -> None:
    """Refuse a recreation the runtime cannot do before anyone is asked to confirm it (the
    simulated host's stand-in makes no containers; a runtime without `create` neither):
    the dialog would describe it, and it would fail after the yes."""
    done = await host.run([runtime, "create", "--help"], timeout=20)
    if not done.ok:
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        raise RestartError(
            f"{host.name}: this restart makes the container again, and `{runtime} create` "
            f"refuses here ({said[0] if said else f'exit {done.exit_status}'}); nothing "
            "was changed (a plain restart, r, restarts the container in place)")


def recreate_command(runtime: str, ref: str, compose: tuple[str, str] = ("", "")) -> str:
    """What the confirm dialog names a recreation by: by hand, or through compose for a
    compose service (its project's own files plus an override with the change; the files
    are never edited)."""
    if compose[0]:
        return (f"{runtime} compose up --force-recreate {compose[1] or '?'} (project "
                f"{compose[0]}: its own files plus an override file with the change)")
    return f"{runtime} create + start (the container {ref} made again with the change)"


def relaunch_inputs(argv: Sequence[str]) -> tuple[str, ...]:
    """The model paths the relaunch needs (target, draft), checked on the host before
    anything is stopped. Only absolute paths: `org/name` may be a hub name, left to vLLM."""
    args = parse_serve_argv(argv)
    return tuple(p for p in (args.target, args.draft) if p and p.startswith("/"))

