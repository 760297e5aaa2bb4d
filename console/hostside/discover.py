"""Serve-process discovery: the `discover` entry point, run on the host with `python3`.

One pass over /proc, and one rule for which process is the server (`choose_servers`: the
agent's live tree applies it too, so telemetry, `status`, checks and restart all agree):

1. A candidate is a process of the login user whose command line matches the `match` words
   (each word a substring of a distinct argv element, in order) *and* starts a vLLM server
   (`server_entry`: `vllm serve`, `python -m vllm.entrypoints.cli.main serve`,
   `python -m vllm.entrypoints.openai.api_server`). A matching process that is no server (a
   `vllm bench serve` client, `python -c ... vllm serve`) is a look-alike: reported, never
   taken. Top-most only: a forked child shares its parent's command line.
2. With a configured port, the process tree listening on it is the server: its top-most
   server entry point, even when it does not match `match` (with a note). A port held by
   something else (a look-alike, an orphaned engine, another user) gives no server and says
   who holds it; with nothing listening, only candidates started for that port qualify.
3. Without a port: the lowest port, then the oldest (`servers.rank`); the others listed.
4. Beside them, every server of the host in one list (`servers`: bare, units, containers),
   the chosen first; a container's server is chosen by the same rule (`servers.choose`).

For the server: ppid, start time, uid, argv, cwd, exe, the interpreter that runs it,
environment, where fd 1/2 point, its tree (EngineCore children rename themselves, so they are
found by parentage, with their `comm`) and its parent (a supervisor that would restart it).
Orphans of a serve tree (`VLLM::*` processes whose server is gone) are listed too. Other users'
processes are never reported.

stdin: {"match": ["vllm", "serve"], "port": 8000 or null, "container": "", "unit": "",
"runtime": "docker"}; stdout: a marker line, then one
JSON object.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
from typing import Any, Callable

from . import containers, servers
from .argv import matches
from .procfs import (
    boot_time,
    cmdline,
    environ,
    listen_inodes,
    pid_namespace,
    read_bytes,
    read_stat,
    readlink,
)
from .vocabulary import OWN_ENV_PREFIX, argv_port, is_hook_dir
from .wire import answer, read_params

SERVER_MODULES = ("vllm.entrypoints.openai.api_server",)
CLI_MODULES = ("vllm.entrypoints.cli.main",)
# Python options that take a value as the next word (`python -X dev -m ...`).
_PY_VALUE_OPTIONS = ("-X", "-W", "-Q")
# Parents that start the server again by themselves, or end with it. Not systemd: a unit is
# found by its cgroup and restarted through systemctl, and `systemd --user` also adopts
# every orphan of a login session as their subreaper.
CONTAINER_INITS = ("tini", "dumb-init", "docker-init", "catatonit")
SUPERVISORS = ("supervisord", "s6-supervise", "runsv", "circusd", "pm2", *CONTAINER_INITS)
SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "fish")
LOOP_WORDS = ("while", "until", "for")


def server_entry(argv: list[str]) -> bool:
    """Whether argv starts a vLLM server: the `vllm` console script with `serve` (run as it
    is or by a python), `python -m vllm.entrypoints.cli.main serve`, or `python -m
    vllm.entrypoints.openai.api_server`. `vllm bench serve`, `python -c ... vllm serve` and
    the like are not."""
    words = list(argv)
    at = 0
    if words and os.path.basename(words[0]).startswith("python"):
        at = 1
        while at < len(words) and words[at].startswith("-") and words[at] != "-m":
            if words[at] == "-c" or words[at].startswith("-c"):
                return False
            at += 2 if words[at] in _PY_VALUE_OPTIONS else 1
        if at < len(words) and words[at] == "-m":
            module = words[at + 1] if at + 1 < len(words) else ""
            rest = words[at + 2:]
            if module in SERVER_MODULES:
                return True
            return module in CLI_MODULES and bool(rest) and rest[0] == "serve"
    return at + 1 < len(words) and os.path.basename(words[at]) == "vllm" and \
        words[at + 1] == "serve"


def env_items(env: dict[str, str]) -> list[str]:
    """An environment as short digests of its `KEY=value` items, our own hook variables left
    out: whether one process's environment holds another's can be told without the values
    (which may be secrets) leaving the host."""
    return sorted(
        hashlib.sha256(f"{k}={v}".encode("utf-8", "surrogateescape")).hexdigest()[:16]
        # The hook's variables and directory a traced restart adds: the same server without.
        for k, v in env.items() if not k.startswith(OWN_ENV_PREFIX)
        and not (k == "PYTHONPATH" and is_hook_dir(v)))


def holds(pid: int, names: set[str]) -> bool:
    """Whether the process has one of the socket `names` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    return any(readlink(f"/proc/{pid}/fd/{fd}") in names for fd in fds)


def port_names(port: int | None) -> set[str]:
    """The fd link names of the sockets listening on `port` (none without a port)."""
    return {f"socket:[{i}]" for i in listen_inodes(port)} if port else set()


def choose_servers(tops: list[int], port: int | None, listening: bool,
                   holder_tops: list[int], argv_of: Callable[[int], list[str]],
                   start_of: Callable[[int], int]) -> list[int]:
    """The rule of the module docstring (2 and 3): which of the login user's top-most server
    entry points is this host entry's server, the server first, the other candidates after.

    `tops` are the top-most entries that match `match`; `holder_tops` the top-most entries
    whose tree holds a socket listening on `port`. The agent (the live tree), discovery (so
    `status`, `check` and restart) and the telemetry built on them all decide through here:
    there is no second rule to fall back on. Without a port, the order is `servers.rank`'s
    (lowest port, then oldest), the same as for a container's server."""
    if port:
        if holder_tops or listening:
            return sorted(set(holder_tops), key=start_of)
        return sorted((p for p in tops if argv_port(argv_of(p)) == port), key=start_of)
    return sorted(tops, key=lambda p: (argv_port(argv_of(p)), start_of(p)))


def supervisor(ppid: int, comm: str, argv: list[str]) -> str:
    """Why the parent `ppid` would start the server again by itself ("" when it would not):
    a process supervisor, a container's init, or a shell running a loop."""
    if ppid <= 1:
        return ""
    name = os.path.basename(argv[0]) if argv else comm
    for word in (name, comm, *[os.path.basename(a) for a in argv[1:2]]):
        base = word.lstrip("-")
        if base in SUPERVISORS or (base.startswith("python") and
                                   any("supervisord" in a for a in argv[1:3])):
            return f"its parent pid {ppid} is {base}, which restarts it"
    if comm in SHELLS or name.lstrip("-") in SHELLS:
        script = ""
        if "-c" in argv[1:]:
            i = argv.index("-c")
            script = argv[i + 1] if i + 1 < len(argv) else ""
        elif len(argv) > 1 and not argv[1].startswith("-"):
            script = (read_bytes(argv[1], 65536) or b"").decode("utf-8", "replace")
        words = script.replace(";", " ").split()
        if any(w in LOOP_WORDS for w in words):
            return f"its parent pid {ppid} is a shell loop ({' '.join(argv)[:120]})"
    return ""


def _which(name: str, env: dict[str, str], cwd: str | None) -> str | None:
    if "/" in name:
        path = name if os.path.isabs(name) else os.path.join(cwd or "/", name)
        return os.path.normpath(path) if os.access(path, os.X_OK) else None
    for folder in (env.get("PATH") or "/usr/local/bin:/usr/bin:/bin").split(":"):
        if not folder:
            continue
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _shebang(path: str) -> list[str]:
    head = read_bytes(path, 4096)
    if not head or not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def interpreter(argv: list[str], env: dict[str, str], cwd: str | None,
                exe: str | None) -> tuple[str | None, str]:
    """The Python that runs the process, as named (a venv's bin/python, not the file it
    links to: /proc/PID/exe resolves links and would lose the venv)."""
    if argv:
        first = os.path.basename(argv[0])
        if first.startswith("python"):
            found = _which(argv[0], env, cwd)
            if found:
                return found, "argv[0]"
        script = _which(argv[0], env, cwd)
        if script:
            words = _shebang(script)
            if words and os.path.basename(words[0]) == "env" and len(words) > 1:
                words = [w for w in words[1:] if not w.startswith("-")]
                found = _which(words[0], env, cwd) if words else None
            else:
                found = words[0] if words else None
            if found and os.path.basename(found).startswith("python"):
                return found, f"shebang of {script}"
    return exe, "/proc/PID/exe"


def _fd_target(pid: int, fd: int) -> dict[str, Any] | None:
    link = f"/proc/{pid}/fd/{fd}"
    target = readlink(link)
    if not target:
        return None
    out: dict[str, Any] = {"target": target}
    try:
        out["regular"] = stat.S_ISREG(os.stat(link).st_mode)
    except OSError:
        out["regular"] = False
    out["deleted"] = target.endswith(" (deleted)")
    return out


def serve_log(pid: int) -> dict[str, Any] | None:
    """A process's serve log, the one rule for it: its stdout when that is a regular file,
    else its stderr when that is (`vllm serve ... 2>serve.log` with stdout on a terminal).
    {"target", "regular": True, "deleted"}; None when neither is a file."""
    for fd in (1, 2):
        found = _fd_target(pid, fd)
        if found is not None and found["regular"]:
            return found
    return None


class _Table:
    """The one pass over /proc: this user's processes, their command lines and parentage.
    A container's process (`containers.in_container`: its paths are the container's) is
    never one of this user's bare processes; the container kind finds it."""

    def __init__(self) -> None:
        self.uid = os.getuid()
        self.ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.btime = boot_time()
        own_namespace = pid_namespace()
        self.procs: dict[int, tuple[str, int, int]] = {}
        self.owned: set[int] = set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            st = read_stat(pid)
            if st is None:
                continue
            self.procs[pid] = (st.comm, st.ppid, st.start)
            try:
                if os.stat(f"/proc/{pid}").st_uid == self.uid and \
                        not containers.in_container(pid, own_namespace):
                    self.owned.add(pid)
            except OSError:
                pass
        me = {os.getpid(), os.getppid()}
        self.argvs: dict[int, list[str]] = {}
        for pid in self.owned - me:
            argv = cmdline(pid)
            if argv:
                self.argvs[pid] = argv
        self.children: dict[int, list[int]] = {}
        for pid, (_comm, ppid, _start) in self.procs.items():
            self.children.setdefault(ppid, []).append(pid)
        # A process that renamed itself VLLM::* is an engine or a worker (a forked one may
        # still show its server's argv), never the server.
        self.entries = {pid for pid, argv in self.argvs.items() if server_entry(argv)
                        and not self.procs[pid][0].startswith("VLLM::")}

    def ancestors(self, pid: int) -> list[int]:
        out: list[int] = []
        at = self.procs.get(pid, ("", 0, 0))[1]
        while at > 1 and at in self.procs and at not in out:
            out.append(at)
            at = self.procs[at][1]
        return out

    def top_entry(self, pid: int) -> int | None:
        """The top-most server entry point among `pid` and its ancestors."""
        found = None
        for at in [pid, *self.ancestors(pid)]:
            if at in self.entries:
                found = at
        return found

    def descendants(self, root: int) -> list[int]:
        out, queue = [], list(self.children.get(root, []))
        while queue:
            pid = queue.pop(0)
            if pid not in out:
                out.append(pid)
                queue.extend(self.children.get(pid, []))
        return out

    def comm(self, pid: int) -> str:
        return self.procs.get(pid, ("", 0, 0))[0]

    def cmdline(self, pid: int) -> list[str]:
        return self.argvs.get(pid) or cmdline(pid) or []

    def start_time(self, pid: int) -> float | None:
        return self.btime + self.start(pid) / float(self.ticks) if self.btime else None

    def start(self, pid: int) -> int:
        return self.procs.get(pid, ("", 0, 0))[2]

    def tree(self, root: int) -> list[dict[str, Any]]:
        out = []
        for pid in self.descendants(root):
            comm, ppid, start = self.procs[pid]
            cmd = " ".join(cmdline(pid) or [])[:300]
            out.append({"pid": pid, "ppid": ppid, "comm": comm, "cmdline": cmd,
                        "start": start})
        return out

    def brief(self, pid: int) -> dict[str, Any]:
        comm, ppid, start = self.procs.get(pid, ("", 0, 0))
        return {"pid": pid, "ppid": ppid, "comm": comm, "start": start,
                "argv": self.argvs.get(pid, [])[:40]}


def _orphans(table: _Table, names: set[str]) -> list[dict[str, Any]]:
    """Engines (`VLLM::*`) of this user whose server is gone (a SIGKILLed API server leaves
    them running, holding GPU memory and maybe the port), with the resource tracker that the
    server left beside them (same working directory, re-parented likewise)."""
    out = []
    for pid in sorted(table.owned):
        comm = table.comm(pid)
        parent = table.procs.get(pid, ("", 0, 0))[1]
        if not comm.startswith("VLLM::") or table.comm(parent).startswith("VLLM::") or \
                table.top_entry(pid) is not None or pid not in table.argvs:
            continue  # (no command line: a zombie, already gone but for its parent's wait)
        tree = table.tree(pid)
        out.append({**table.brief(pid), "cwd": (readlink(f"/proc/{pid}/cwd") or None),
                    "env_items": env_items(environ(pid) or {}),
                    "holds_port": bool(names) and any(
                        holds(p, names) for p in [pid, *(m["pid"] for m in tree)]),
                    "tree": tree})
    for pid in sorted(table.owned):
        argv = table.argvs.get(pid, [])
        if not any("multiprocessing.resource_tracker" in a for a in argv[:3]) or \
                table.top_entry(pid) is not None:
            continue
        cwd = (readlink(f"/proc/{pid}/cwd") or None)
        for orphan in out:
            if orphan["cwd"] == cwd and table.procs[pid][1] == orphan["ppid"]:
                orphan["tree"].append({"pid": pid, "ppid": table.procs[pid][1],
                                       "comm": table.comm(pid), "start": table.start(pid),
                                       "env_items": env_items(environ(pid) or {}),
                                       "cmdline": " ".join(argv)[:300]})
                break
    return out


def _container_main(table: _Table, pid: int, start: int, ticks: float) -> str:
    """Whether the server is a container's own process: stopping it ends the container."""
    if pid == 1:
        return "it is pid 1 here (a container's own process): stopping it ends the container"
    init = table.comm(1)
    if table.procs.get(pid, ("", 0, 0))[1] == 1 and init in CONTAINER_INITS and \
            abs(start - table.start(1)) <= 5 * ticks:
        return (f"it is the container's main process under {init} (pid 1), which ends the "
                "container when it exits")
    return ""


def _serve(table: _Table, pid: int, matched: bool, names: set[str], btime: float,
           ticks: float) -> dict[str, Any]:
    comm, ppid, start = table.procs[pid]
    argv = table.argvs[pid]
    env = environ(pid) or {}
    cwd = (readlink(f"/proc/{pid}/cwd") or None)
    exe = readlink(f"/proc/{pid}/exe") or None
    python, python_from = interpreter(argv, env, cwd, exe)
    parent_argv = [a for a in cmdline(ppid) or [] if a]
    tree = table.tree(pid)
    return {
        "pid": pid, "ppid": ppid, "comm": comm, "start": start,
        "start_time": btime + start / float(ticks) if btime else None,
        "uid": table.uid, "argv": argv, "cwd": cwd, "exe": exe,
        "python": python, "python_from": python_from, "environ": env,
        "stdout": _fd_target(pid, 1), "stderr": _fd_target(pid, 2), "log": serve_log(pid),
        "children": tree, "matched": matched,
        "holds_port": bool(names) and any(holds(p, names)
                                          for p in [pid, *(m["pid"] for m in tree)]),
        "supervisor": supervisor(ppid, table.comm(ppid), parent_argv) or
        _container_main(table, pid, start, ticks),
        "parent": {"pid": ppid, "comm": table.comm(ppid), "argv": parent_argv[:8]},
    }


def probe(params: dict[str, Any]) -> dict[str, Any]:
    """Every server of the host in one pass (`servers`), and this entry's server by what
    pins it (`servers.choose`): `serves` holds it first, in full, the other candidates after
    it. A bare process's port is judged by who holds it (`_processes`); the rest of the rule
    does not ask which kind of place a server runs in."""
    words = [w for w in params.get("match", []) if w]
    port = params.get("port")
    port = port if isinstance(port, int) and 0 < port < 65536 else None
    runtime = params.get("runtime") or containers.RUNTIME
    runtime = runtime if runtime in containers.RUNTIMES else containers.RUNTIME
    pinned = str(params.get("container") or "")
    unit = str(params.get("unit") or "")
    table = _Table()
    facts = _processes(table, words, port)
    bare = servers.bare_servers(table, words)
    boxes, found, problem = servers.container_servers(table, words, server_entry, runtime)
    servers.health_states(bare + boxes)
    if problem:
        facts["containers_problem"] = str(problem)
    if pinned and problem is not None and problem.unreachable:
        # The daemon did not answer the listing: asking again would wait as long again.
        facts = {**facts, "serves": [], "others": [], "containers_unreachable": True}
    elif pinned:  # serve.container: that container's server, whatever runs bare
        facts = containers.find({**facts, "serves": [], "others": []}, table, words, port,
                                server_entry, argv_port, runtime=runtime, pinned=pinned)
    elif port and facts["serves"]:
        pass  # the bare process that holds the port (or was started for it)
    else:
        # A pinned port no bare process holds: a container that publishes it; a unit's
        # server is a bare process.
        chosen = servers.choose(boxes if port else bare if unit else bare + boxes,
                                port=port, unit=unit, container="")
        facts["serves"] = [_full(table, row, boxes, found, port) if n == 0 else
                           _brief(table, row) for n, row in enumerate(chosen)]
    first = servers.key(facts["serves"][0]) if facts["serves"] else None
    facts["servers"] = servers.listing(bare + boxes, first)
    facts["pinned"] = bool(pinned or port or unit)
    return facts


def _full(table: _Table, row: dict[str, Any], boxes: list[dict[str, Any]],
          found: list[tuple[dict[str, Any], list[str]]], port: int | None
          ) -> dict[str, Any]:
    """The chosen server in full: a bare process's facts (`_serve`), or a container's."""
    if row["container"] is None:
        return _serve(table, row["pid"], row["matched"], port_names(port), table.btime,
                      table.ticks)
    info, argv = found[boxes.index(row)]
    return containers.serve_facts(table, info, argv, row["matched"], server_entry,
                                  row["container"]["runtime"])


def _brief(table: _Table, row: dict[str, Any]) -> dict[str, Any]:
    """Another candidate, in the shape the resolver's notes read."""
    if row["container"] is None:
        return {**table.brief(row["pid"]), "start_time": row["start_time"]}
    return {"pid": row["pid"], "ppid": 0, "comm": "", "start": 0, "argv": row["argv"],
            "start_time": row["start_time"], "container": row["container"]}


def _processes(table: _Table, words: list[str], port: int | None) -> dict[str, Any]:
    """The serve process of this user by the rule in the module's docstring (first in
    `serves`, the other candidates after it), look-alikes, the port's holders and orphans."""
    ticks, btime = table.ticks, table.btime
    matched = {pid for pid, argv in table.argvs.items() if matches(argv, words)}
    tops = [pid for pid in table.entries
            if not any(a in table.entries for a in table.ancestors(pid))]

    lookalikes = sorted(
        pid for pid in matched if pid not in table.entries and table.top_entry(pid) is None
        and not table.comm(pid).startswith("VLLM::")
        and not any(d in table.entries for d in table.descendants(pid)))
    names = port_names(port)
    port_info: dict[str, Any] | None = None
    other_ports: list[dict[str, Any]] = []
    holders = sorted(pid for pid in table.owned if names and holds(pid, names))
    holder_tops = [top for top in (table.top_entry(h) for h in holders) if top is not None]
    candidates = [p for p in tops if p in matched]
    chosen = choose_servers(candidates, port, bool(names), holder_tops,
                            table.argvs.__getitem__, table.start)
    if port:
        port_info = {"port": port, "listening": bool(names),
                     "holders": [table.brief(h) for h in holders]}
        other_ports = [{**table.brief(p), "port": argv_port(table.argvs[p])}
                       for p in candidates if p not in chosen
                       and argv_port(table.argvs[p]) != port]
    serves = []
    for n, pid in enumerate(chosen):
        if n == 0:
            serves.append(_serve(table, pid, pid in matched, names, btime, ticks))
        else:
            serves.append({**table.brief(pid), "start_time": btime + table.start(pid) /
                           float(ticks) if btime else None})
    try:
        user = pwd.getpwuid(table.uid).pw_name
    except KeyError:
        user = str(table.uid)
    return {"uid": table.uid, "user": user, "matched": len(matched), "serves": serves,
            "lookalikes": [table.brief(p) for p in lookalikes], "port": port_info,
            "other_ports": other_ports, "orphans": _orphans(table, names)}


def main(argv: list[str]) -> int:
    """The `discover` entry point: parameters on stdin, the answer after the marker."""
    return answer(probe(read_params()))
