"""Where the engine is: the Python stacks of every process of the server's tree (`stacks`).

`collect_stacks` runs the host-side `stacks` entry (py-spy, found and run on the host), parses
what py-spy printed (`console.parsers.pyspy`) and answers with a `StacksReport`: the contract's
JSON (docs/design.md, "Stacks"), its exit status (0 every process dumped, 1 some not, 2 it could
not run) and, when it could not run, the one line that says why and what to do: install py-spy
into the serving environment, or grant the right to trace.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from vllm_console.console.hostclient.container_dumps import container_watchdog_dumps
from vllm_console.console.hostclient.discovery import ServeProcess, resolve_serve
from vllm_console.console.parsers.pyspy import (
    ThreadStack,
    dump_failure,
    parse_faulthandler,
    parse_pyspy_dump,
)
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import run_json

if TYPE_CHECKING:
    from vllm_console.console.settings import ServeSettings

DUMP_TIMEOUT_S = 10.0
"""All of a tree's dumps together (a nonblocking dump of a real vLLM process takes ~0.03 s)."""

_DUMP_NAME = re.compile(r"VLLM_STACK_DUMP_for_(?P<kind>engine|worker)_(?P<rank>\d+)_(?P<pid>\d+)")


@dataclass(frozen=True)
class ProcessStacks:
    """One process of the tree and its threads (or why there are none)."""

    pid: int
    role: str
    name: str
    container: str | None
    threads: tuple[ThreadStack, ...] = ()
    error: str | None = None
    failure: str = ""
    """The kind of failure (`console.parsers.pyspy.DumpFailure.kind`), or ""."""
    stopped: bool = False
    """The process was stopped (SIGSTOP, a debugger) when it was dumped."""

    def as_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "role": self.role, "name": self.name,
                "container": self.container,
                "threads": [{"id": t.id, "name": t.name, "active": t.active,
                             "frames": [{"function": f.function, "file": f.file, "line": f.line}
                                        for f in t.frames]} for t in self.threads],
                "error": self.error}


@dataclass(frozen=True)
class WatchdogDump:
    """A stack dump vLLM's watchdog (0.33+) wrote on no progress."""

    path: str
    pid: int | None
    at: float | None
    text: str = ""
    error: str | None = None

    @property
    def threads(self) -> tuple[ThreadStack, ...]:
        """Its threads (a faulthandler dump), innermost frame first."""
        return parse_faulthandler(self.text)


@dataclass(frozen=True)
class StacksReport:
    host: str
    tool: Mapping[str, str] | None
    processes: tuple[ProcessStacks, ...] = ()
    watchdog_dumps: tuple[WatchdogDump, ...] = ()
    notes: tuple[str, ...] = ()
    problem: str = ""
    """Why it could not run at all (one line), or ""."""
    install: tuple[str, ...] = ()
    """With no py-spy: the command that installs it into the serving interpreter's environment
    (where the console looks for it), which the TUI offers to run; () where there is none to
    offer (no serving interpreter known, or the server runs in a container: the host's
    py-spy dumps it, and the container's environment is not the host's)."""
    taken_at: float = field(default=0.0, compare=False)

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "tool": dict(self.tool) if self.tool else None,
                "processes": [p.as_json() for p in self.processes],
                "watchdog_dumps": [{"path": d.path, "pid": d.pid, "at": d.at}
                                   for d in self.watchdog_dumps],
                "notes": [*self.notes, *([self.problem] if self.problem else [])]}

    @property
    def exit_status(self) -> int:
        if self.problem:
            return 2
        return 1 if any(p.error for p in self.processes) else 0


def dump_pid(path: str) -> int | None:
    """The pid in a watchdog dump's file name (`VLLM_STACK_DUMP_for_engine_0_1234.log`)."""
    m = _DUMP_NAME.search(path.rsplit("/", 1)[-1])
    return int(m["pid"]) if m else None


def install_argv(python: str) -> tuple[str, ...]:
    """`PYTHON -m pip install py-spy` for the serving interpreter (an absolute path), else ()."""
    return (python, "-m", "pip", "install", "py-spy") if python.startswith("/") else ()


def install_line(host: str, python: str, looked: Sequence[str],
                 container: str | None = None) -> str:
    """The one line for a host without py-spy: where it looked, how to install it there. A
    container's server is dumped from the host by its host pid: py-spy belongs on the host,
    not in the container's environment."""
    where = ", ".join(looked)
    if container is not None:
        return (f"{host}: py-spy is not installed on the host (looked on PATH and in {where}): "
                f"the server runs in the container {container} and is dumped from the host by "
                "its host pid, so install it on the host: `python3 -m pip install --user "
                "py-spy` (~/.local/bin) or onto PATH")
    how = (f"`{shlex.quote(python)} -m pip install py-spy` (the serving environment)"
           if python and "/" in python else "`pip install py-spy` into the serving environment")
    return f"{host}: py-spy is not installed (looked on PATH and in {where}): install it with {how}"


def grant_line(host: str, access: Mapping[str, Any], processes: Sequence[Mapping[str, Any]],
               py_spy: str) -> str:
    """The one line for a user who may not trace the server's processes: what to grant."""
    uid = access.get("uid")
    scope = access.get("ptrace_scope")
    others = sorted({int(p["uid"]) for p in processes
                     if isinstance(p.get("uid"), int) and p["uid"] != uid})
    pids = ", ".join(str(p.get("pid")) for p in processes)
    head = f"{host}: not allowed to trace pid {pids} (py-spy: permission denied)"
    if uid != 0 and others:
        return (f"{head}: they run as uid {', '.join(map(str, others))}, not the login user "
                f"(uid {uid}): log in as that user or as root, or grant CAP_SYS_PTRACE "
                f"(`sudo setcap cap_sys_ptrace+ep {py_spy}`)")
    if access.get("cap_sys_ptrace") is False and (uid == 0 or access.get("in_container")):
        return (f"{head}: this container lacks the SYS_PTRACE capability: run it with "
                "`--cap-add SYS_PTRACE` (Kubernetes: securityContext.capabilities.add: "
                "[\"SYS_PTRACE\"])")
    if isinstance(scope, int) and scope >= 1 and uid != 0:
        fix = ("no one may attach until a reboot (scope 3)" if scope == 3 else
               "`sudo sysctl kernel.yama.ptrace_scope=0`, or log in as root")
        return f"{head}: the kernel's Yama ptrace_scope is {scope}: {fix}"
    return (f"{head}: log in as root, or grant CAP_SYS_PTRACE "
            f"(`sudo setcap cap_sys_ptrace+ep {py_spy}`)")


def _name(process: Mapping[str, Any]) -> str:
    title = str(process.get("title") or process.get("comm") or "")
    return title if len(title) <= 120 else title[:119] + "…"


def _process(obj: Mapping[str, Any], container: str | None) -> ProcessStacks:
    pid = int(obj["pid"])
    base = ProcessStacks(pid, str(obj.get("role") or "other"), _name(obj), container,
                         stopped=obj.get("state") == "T")
    if obj.get("missing"):
        return replace(base, error=f"pid {pid}: no such process", failure="gone")
    dump = obj.get("dump") if isinstance(obj.get("dump"), dict) else None
    if dump is None:
        return replace(base, error="not dumped", failure="other")
    if dump.get("timed_out"):
        return replace(base, failure="timeout",
                       error=f"py-spy did not answer within {DUMP_TIMEOUT_S:g} s")
    parsed = parse_pyspy_dump(str(dump.get("stdout") or ""))
    if dump.get("exit") != 0 or not parsed.threads:
        failure = dump_failure(str(dump.get("stderr") or ""))
        return replace(base, error=failure.line, failure=failure.kind)
    return replace(base, threads=parsed.threads)


def report_from_facts(host: str, facts: Mapping[str, Any], *, python: str = "",
                      container: str | None = None, notes: Sequence[str] = ()) -> StacksReport:
    """The report from the host-side entry's answer."""
    raw = [p for p in facts.get("processes") or [] if isinstance(p, dict)]
    dumps = tuple(
        WatchdogDump(str(d.get("path")), dump_pid(str(d.get("path"))),
                     float(d["mtime"]) if isinstance(d.get("mtime"), int | float) else None,
                     str(d.get("text") or ""), d.get("error"))
        for d in facts.get("watchdog") or [] if isinstance(d, dict))
    tool = facts.get("tool") if isinstance(facts.get("tool"), dict) else None
    all_notes = list(notes)
    if tool is None:
        line = str(facts.get("tool_problem") or "") or install_line(
            host, python, [str(x) for x in facts.get("looked") or [] if x != "PATH"],
            container)
        offer = install_argv(python) if container is None and \
            not facts.get("tool_problem") else ()
        return StacksReport(host, None, tuple(_process(p, container) for p in raw), dumps,
                            tuple(all_notes), problem=line, install=offer)
    processes = tuple(_process(p, container) for p in raw)
    if not processes:
        return StacksReport(host, tool, (), dumps, tuple(all_notes),
                            problem=f"{host}: the server's processes are gone")
    problem = ""
    if all(p.failure == "permission" for p in processes):
        access: Mapping[str, Any] = facts.get("access") or {}
        problem = grant_line(host, access, raw, str(tool.get("path") or "py-spy"))
    for p in raw:
        if p.get("native_failed"):
            all_notes.append(f"pid {p['pid']}: no native frames (the blocking dump --native "
                             "needs failed: the process may be stopped); its Python stack "
                             "came from a nonblocking dump")
    stopped = [p.pid for p in processes if p.stopped]
    if stopped:
        all_notes.append(f"stopped (SIGSTOP or a debugger): pid "
                         f"{', '.join(map(str, stopped))}; dumped without suspending it")
    return StacksReport(host, tool, processes, dumps, tuple(all_notes), problem=problem)


async def collect_stacks(host: Host, serve: ServeSettings, *, native: bool = False,
                         pids: Sequence[int] = (), process: ServeProcess | None = None,
                         log: str = "",
                         timeout: float = DUMP_TIMEOUT_S) -> StacksReport:
    """The stacks of the chosen server's tree on `host` (or of `pids` alone). Raises HostError
    when the host cannot be reached or the server cannot be found."""
    notes: list[str] = []
    if process is None:
        resolution = await resolve_serve(host, serve, python=serve.python or "python3")
        process = resolution.process
        if process is None and not pids:
            raise HostError(f"{host.name}: no vLLM server runs for the login user"
                            + (f" ({'; '.join(resolution.notes)})" if resolution.notes else ""))
    python = serve.python or (process.python if process is not None else "") or ""
    container = process.container if process is not None else None
    # A container's log and dump paths are the container's: read there, never on the host.
    log = "" if container is not None else \
        log or serve.log or (process.log if process is not None and process.log else "")
    payload = {"root": process.pid if process is not None else 0,
               "start": process.start_ticks if process is not None else 0,
               "pids": list(pids), "native": native, "python": python, "timeout": timeout,
               "log": log,
               "since": process.start_time if process is not None else None}
    run = await run_json(host, "stacks", "python3", payload, timeout=timeout + 30)
    if run.data is None:
        raise HostError(f"{host.name}: cannot dump the stacks: {run.error}")
    facts = dict(run.data)
    if container is not None and process is not None:
        notes.append(f"the processes of the {container.runtime} container {container.ref} "
                     "were dumped from the host by their host pids")
        dumps, note = await container_watchdog_dumps(host, process)
        facts["watchdog"] = dumps
        notes.extend([note] if note else [])
    return report_from_facts(host.name, facts, python=python,
                             container=container.ref if container is not None else None,
                             notes=notes)
