"""Finding the running `vllm serve` on a host, and what it was started with.

`resolve_serve(host, settings)` runs one stdlib script on the host (`hostside/discover.py`, one
pass over /proc) and returns the serve process chosen by the one rule written there (a server
entry point of the login user, never another user's; with a configured `url`, the one that
listens on its port), with what else it found: look-alikes, the port's holders, orphaned
engines, a supervising parent. `discover_serve` is its process alone. From its
command line it reads the target (`serve TARGET` or `--model`), the draft and number of
speculative tokens (`--speculative-config JSON`, also `--speculative_config` and the dotted
`--speculative-config.model X` form) and the URL (`--host`/`--port`, default 127.0.0.1:8000).

`effective_serve(settings, process)` is the console's one precedence rule, used by telemetry
(the log pane, the URL it asks), the checks and the restart (the log it appends to, the
interpreter, the URL it verifies): a configured value wins; a discovered one fills the gap; with
no process, this host entry's last launch by the console fills in, else the configuration is all
there is. Where a configured value disagrees with what the running process really uses (a stale
`log` in the hosts file), the answer carries a warning naming both, which `status`, `check` and
the TUI show: the console keeps to the configuration (the restart relaunches into the configured
log too, so the log pane and the new run agree) and never silently overrides it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vllm_console.console.hostside.vocabulary import (
    DEFAULT_MATCH,
    DEFAULT_PORT,
    argv_host,
    argv_port,
    last_option,
    reachable,
)
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import run_json

if TYPE_CHECKING:  # the hosts file's models: not loaded by a console on a URL alone
    from vllm_console.console.settings import ServeSettings

DEFAULT_HOST = "127.0.0.1"


class DiscoveryError(HostError):
    """Discovery could not run on the host; the message says why."""


@dataclass(frozen=True)
class ChildProcess:
    """A process below the serve process (EngineCore, workers), as /proc shows it."""

    pid: int
    ppid: int
    comm: str
    """The kernel's name for it: `VLLM::EngineCor` after vLLM renames it."""
    cmdline: str = ""


@dataclass(frozen=True)
class ServeArgs:
    """What a `vllm serve` command line asks for."""

    target: str | None = None
    draft: str | None = None
    num_speculative_tokens: int | None = None
    speculative_method: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    speculative: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """The whole speculative config asked for (`--speculative-config`, its dotted keys and the
    `--spec-*` flags): the checks judge its numbers (n-gram's `prompt_lookup_*`)."""
    max_model_len: int | None = None

    @property
    def url(self) -> str:
        """The server's base URL as seen from the host."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@dataclass(frozen=True)
class ServeContainer:
    """The container whose main process is the server (`console.hostside.containers`): the
    paths on the server's command line are the container's, its output is `docker logs`."""

    runtime: str
    id: str
    name: str
    image: str = ""
    started_at: float | None = None
    """When the container (so the server) last started, seconds since the epoch."""
    restart_policy: str = "no"
    compose_project: str | None = None
    compose_service: str | None = None

    @classmethod
    def from_facts(cls, obj: Mapping[str, Any]) -> ServeContainer:
        started = obj.get("started_at")
        return cls(runtime=str(obj.get("runtime") or "docker"), id=str(obj["id"]),
                   name=str(obj.get("name") or ""), image=str(obj.get("image") or ""),
                   started_at=float(started) if isinstance(started, int | float) else None,
                   restart_policy=str(obj.get("restart_policy") or "no"),
                   compose_project=_str_or_none(obj.get("compose_project")),
                   compose_service=_str_or_none(obj.get("compose_service")))

    @property
    def ref(self) -> str:
        """How the runtime's CLI names it: its name, else its id."""
        return self.name or self.id


@dataclass(frozen=True)
class ServerRow:
    """One vLLM server of the host, as discovery lists every one (`status --json`'s
    `servers`, the TUI's switcher, the SSH fleet's rows)."""

    pid: int
    port: int | None
    """Where it answers on the host (a container's published port); None when it does not."""
    url: str | None
    model: str | None
    """What its command line serves (`serve TARGET` / `--model`)."""
    container: str | None
    """The container's name when the server is a container's main process."""
    unit: str | None
    """The systemd service whose cgroup holds it."""
    state: str
    """`ready`, `starting`, `failed`, `down` or `unknown`: its `/health`, asked at discovery
    (`console.hostside.servers.health_state`)."""
    chosen: bool
    start_time: float | None = None
    tree: tuple[int, ...] = ()
    """Its pid and its descendants' (the GPUs it holds are theirs)."""
    container_id: str | None = None
    matched: bool = True
    """Whether its command line matches the entry's `match` (a pinned port's server may not)."""

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "port": self.port, "url": self.url, "model": self.model,
                "container": self.container, "unit": self.unit, "state": self.state,
                "chosen": self.chosen}

    @property
    def label(self) -> str:
        """How a person tells it from the others: its port (`:8001`), else its pid."""
        return f":{self.port}" if self.port else f"pid {self.pid}"


def server_rows(facts: Mapping[str, Any]) -> tuple[ServerRow, ...]:
    """The `servers` of discovery's answer, the chosen first (rows of the wrong shape left
    out: a host's python3 that is not what it says never breaks the rest)."""
    rows: list[ServerRow] = []
    found = facts.get("servers")
    for obj in found if isinstance(found, list) else []:
        try:
            argv = [str(a) for a in obj.get("argv") or []]
            port, start = obj.get("port"), obj.get("start_time")
            rows.append(ServerRow(
                pid=int(obj["pid"]), port=port if isinstance(port, int) else None,
                url=_str_or_none(obj.get("url")), model=parse_serve_argv(argv).target,
                container=_str_or_none(obj.get("container")),
                unit=_str_or_none(obj.get("unit")), state=str(obj.get("state") or "unknown"),
                chosen=bool(obj.get("chosen")),
                start_time=float(start) if isinstance(start, int | float) else None,
                tree=tuple(int(p) for p in obj.get("tree") or ()),
                container_id=_str_or_none(obj.get("container_id")),
                matched=bool(obj.get("matched", True))))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            continue
    return tuple(rows)


def entry_servers(rows: Sequence[ServerRow]) -> tuple[ServerRow, ...]:
    """The servers this host entry can work on: those its `match` admits, and the chosen one
    (a pinned port's server whatever its command line). The one list every surface shows:
    `status --json`'s `servers` and its line, the TUI's header count and its switcher, the
    SSH fleet's rows (a server outside `match` is another entry's: `left_out_line`)."""
    return tuple(r for r in rows if r.matched or r.chosen)


def left_out_line(rows: Sequence[ServerRow], match: str) -> str:
    """What `entry_servers` leaves out of `rows`, in one line ("" when nothing)."""
    out = [r for r in rows if not (r.matched or r.chosen)]
    if not out:
        return ""
    return (f"{len(out)} other vLLM server{'s' if len(out) > 1 else ''} on this host "
            f"({', '.join(r.label for r in out)}) outside match {match!r}: not listed "
            "(another hosts-file entry, or --port N, works on it)")


def several_line(rows: Sequence[ServerRow]) -> str:
    """The one line for a host with several servers and none pinned ("" otherwise)."""
    chosen = next((r for r in rows if r.chosen), None)
    if len(rows) < 2 or chosen is None:
        return ""
    others = ", ".join(r.label for r in rows if not r.chosen)
    return (f"{len(rows)} vLLM servers on this host: this is {chosen.label} (pid "
            f"{chosen.pid}); the others: {others}")


def _str_or_none(value: Any) -> str | None:
    return str(value) if value else None


@dataclass(frozen=True)
class ServeProcess:
    """The running serve process. `environ` is complete (the probes need it): never print it
    whole (it may hold tokens); its repr leaves it out."""

    pid: int
    ppid: int
    start_time: float | None
    """Seconds since the epoch (from /proc/PID/stat and the boot time)."""
    uid: int
    user: str
    argv: tuple[str, ...]
    cwd: str | None
    exe: str | None
    """/proc/PID/exe: the binary, links resolved (a venv's python resolves to the base one)."""
    python: str | None
    """The interpreter as named (argv[0] or the script's shebang): keeps the venv."""
    python_from: str
    log: str | None
    """The file fd 1 (else fd 2) writes to, when it is a regular file."""
    log_deleted: bool
    """The log's name is gone (rotated or deleted) while the process still writes to it."""
    stdout_target: str | None
    args: ServeArgs
    children: tuple[ChildProcess, ...] = ()
    others: tuple[int, ...] = ()
    """Other top-most matching processes (more than one server matches `match`)."""
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    start_ticks: int = 0
    """Start time in clock ticks since boot: with the pid, the process's identity."""
    matched: bool = True
    """Whether its command line matches `match` (a server found by its port may not)."""
    supervisor: str = ""
    """Why its parent would start it again by itself (a shell loop, supervisord), or ""."""
    notes: tuple[str, ...] = ()
    """What the resolver wants said about its choice (other candidates, look-alikes)."""
    container: ServeContainer | None = None
    """Where the server runs when it is a container's main process (None: a bare process)."""

    @property
    def target(self) -> str | None:
        return self.args.target

    @property
    def draft(self) -> str | None:
        return self.args.draft

    @property
    def url(self) -> str:
        return self.args.url

    @property
    def tree_pids(self) -> tuple[int, ...]:
        """This process and every descendant."""
        return (self.pid, *(c.pid for c in self.children))


def _spellings(option: str) -> list[str]:
    return [option, option.replace("-", "_").replace("__", "--", 1)]


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None


def _dotted(argv: Sequence[str], prefix: str) -> dict[str, str]:
    """`--speculative-config.model X` / `--speculative-config.model=X` pairs."""
    out: dict[str, str] = {}
    for i, word in enumerate(argv):
        for spelling in _spellings(prefix):
            if word.startswith(spelling + "."):
                key, sep, value = word[len(spelling) + 1:].partition("=")
                if sep:
                    out[key] = value
                elif i + 1 < len(argv):
                    out[key] = argv[i + 1]
    return out


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value)
    return None


def parse_serve_argv(argv: Sequence[str]) -> ServeArgs:
    """Read target, draft, speculative tokens and address from a serve command line."""
    argv = list(argv)
    target = None
    if "serve" in argv:
        i = argv.index("serve")
        if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            target = argv[i + 1]
    target = last_option(argv, *_spellings("--model")) or target
    spec: dict[str, Any] = {}
    raw = last_option(argv, *_spellings("--speculative-config"))
    if raw is not None:
        loaded = _loads(raw)
        if isinstance(loaded, dict):
            spec.update(loaded)
    spec.update(_dotted(argv, "--speculative-config"))
    # `--spec-method M --spec-model D --spec-tokens N` (vLLM 0.30+) fill what the config lacks.
    for flag, key in (("--spec-method", "method"), ("--spec-model", "model"),
                      ("--spec-tokens", "num_speculative_tokens")):
        value = last_option(argv, *_spellings(flag))
        if value is not None and spec.get(key) is None:
            spec[key] = value
    draft = spec.get("model")
    method = spec.get("method")
    n = spec.get("num_speculative_tokens", spec.get("num_spec_tokens"))
    host = reachable(argv_host(argv))
    port = argv_port(argv)
    return ServeArgs(
        target=target,
        draft=draft if isinstance(draft, str) else None,
        num_speculative_tokens=_int(n),
        speculative_method=method if isinstance(method, str) else None,
        host=host,
        port=port,
        speculative=spec,
        max_model_len=_int(last_option(argv, *_spellings("--max-model-len"))),
    )


def _child(obj: Mapping[str, Any]) -> ChildProcess:
    return ChildProcess(int(obj["pid"]), int(obj.get("ppid", 0)), str(obj.get("comm", "")),
                        str(obj.get("cmdline", "")))


def configured_port(url: str) -> int | None:
    """The port of a configured server URL (None when no URL is configured)."""
    if not url:
        return None
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def serve_port(settings: ServeSettings) -> int | None:
    """The port that pins this entry's server: `serve.port` (`--port`), else the configured
    `url`'s; None when neither is set (the resolver's rule chooses)."""
    return settings.port or configured_port(settings.url)


def discovery_params(settings: ServeSettings) -> dict[str, Any]:
    """What the host's discovery is asked (`hostside/discover.py`): every pin of the entry."""
    return {"match": settings.match.split(), "port": serve_port(settings),
            "container": settings.container, "unit": settings.unit,
            "runtime": settings.runtime}


def _shown(argv: Sequence[Any], limit: int = 160) -> str:
    text = " ".join(str(a) for a in argv)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def resolution_notes(facts: Mapping[str, Any], match: str) -> tuple[str, ...]:
    """One line per thing the resolver found besides the server, for status, checks and the
    restart's confirm dialog."""
    notes: list[str] = []
    serves = [s for s in facts.get("serves") or [] if isinstance(s, dict)]
    first = serves[0] if serves else None
    port = facts.get("port") if isinstance(facts.get("port"), dict) else None
    every = server_rows(facts)
    rows = entry_servers(every)
    pinned = bool(facts.get("port")) or bool(facts.get("pinned"))
    if first is not None and len(serves) > 1 and len(rows) > 1 and not pinned:
        notes.append(f"{several_line(rows)}; chosen by the lowest port, then the oldest "
                     "start: pin one with --port N (or serve.port in the hosts file)")
    if left_out_line(every, match):
        notes.append(left_out_line(every, match))
    if first is not None and not first.get("matched", True):
        notes.append(f"pid {first['pid']} listens on the configured port but does not match "
                     f"{match!r}: it is the server all the same")
    if first is not None and first.get("supervisor"):
        notes.append(f"pid {first['pid']}: {first['supervisor']}")
    for item in facts.get("lookalikes") or []:
        notes.append(f"pid {item['pid']} matches {match!r} but is no vLLM server "
                     f"({_shown(item.get('argv') or [])}): left alone")
    if port is not None and first is None and port.get("listening"):
        holders = port.get("holders") or []
        who = "; ".join(f"pid {h['pid']} ({h.get('comm')}: {_shown(h.get('argv') or [])})"
                        for h in holders) or "a process of another user (not visible)"
        notes.append(f"port {port['port']} is held by {who}, which is no vLLM server "
                     "of this user")
    for item in facts.get("other_ports") or []:
        notes.append(f"pid {item['pid']} serves port {item['port']}, not the configured "
                     f"{port['port'] if port else '?'}: not this host entry's server")
    if first is not None and isinstance(first.get("container"), dict):
        notes.append(f"pid {first['pid']} is the main process of the "
                     f"{first['container'].get('runtime')} container "
                     f"{first['container'].get('name')}: the paths on its command line are "
                     "the container's, its log is the container's output")
    elif first is None and facts.get("containers_problem"):
        notes.append(str(facts["containers_problem"]))
    for orphan in facts.get("orphans") or []:
        members = ", ".join(f"{m['comm']} {m['pid']}" for m in orphan.get("tree") or [])
        notes.append(f"orphaned engine pid {orphan['pid']} ({orphan.get('comm')}"
                     f"{'; ' + members if members else ''}) runs without its server"
                     f"{' and holds the port' if orphan.get('holds_port') else ''}")
    return tuple(notes)


def serve_from_facts(facts: Mapping[str, Any], match: str = DEFAULT_MATCH
                     ) -> ServeProcess | None:
    """Build the ServeProcess from the probe's answer (None when nothing matched). An answer
    of the wrong shape (a host's python3 that is not what it says) is a DiscoveryError: the
    telemetry retries on that, where any other exception would end it."""
    try:
        return _serve_from_facts(facts, match)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise DiscoveryError(f"the discovery probe's answer is not what it should be: "
                             f"{type(exc).__name__}: {exc}") from None


def _serve_from_facts(facts: Mapping[str, Any], match: str) -> ServeProcess | None:
    serves = facts.get("serves") or []
    if not serves:
        return None
    obj = serves[0]
    argv = tuple(str(a) for a in obj.get("argv") or ())
    log, deleted, target = None, False, None
    info = obj.get("log")  # the host's one rule: `hostside.discover.serve_log`
    if isinstance(info, dict):
        target = str(info.get("target", ""))
        deleted = bool(info.get("deleted"))
        log = target[: -len(" (deleted)")] if deleted else target
    if log is None and isinstance(obj.get("stdout"), dict):
        target = str(obj["stdout"].get("target", ""))
    start = obj.get("start_time")
    return ServeProcess(
        pid=int(obj["pid"]),
        ppid=int(obj.get("ppid", 0)),
        start_time=float(start) if isinstance(start, int | float) else None,
        uid=int(facts.get("uid", obj.get("uid", -1))),
        user=str(facts.get("user", "")),
        argv=argv,
        cwd=obj.get("cwd"),
        exe=obj.get("exe"),
        python=obj.get("python"),
        python_from=str(obj.get("python_from", "")),
        log=log,
        log_deleted=deleted,
        stdout_target=target,
        args=parse_serve_argv(argv),
        children=tuple(_child(c) for c in obj.get("children") or ()),
        others=tuple(int(s["pid"]) for s in serves[1:]),
        environ=MappingProxyType(dict(obj.get("environ") or {})),
        start_ticks=int(obj.get("start") or 0),
        matched=bool(obj.get("matched", True)),
        supervisor=str(obj.get("supervisor") or ""),
        notes=resolution_notes(facts, match),
        container=(ServeContainer.from_facts(obj["container"])
                   if isinstance(obj.get("container"), dict) else None),
    )


@dataclass(frozen=True)
class Resolution:
    """The resolver's whole answer: the server (None when none qualifies) and the rest."""

    process: ServeProcess | None
    facts: Mapping[str, Any] = field(repr=False)
    notes: tuple[str, ...] = ()

    @property
    def servers(self) -> tuple[ServerRow, ...]:
        """The host's servers this entry works on, the chosen first (`entry_servers`): what
        `status` lists and the TUI counts."""
        return entry_servers(server_rows(self.facts))

    @property
    def orphans(self) -> list[dict[str, Any]]:
        return [o for o in self.facts.get("orphans") or [] if isinstance(o, dict)]

    @property
    def lookalikes(self) -> list[dict[str, Any]]:
        return [o for o in self.facts.get("lookalikes") or [] if isinstance(o, dict)]

    @property
    def port(self) -> dict[str, Any]:
        port = self.facts.get("port")
        return port if isinstance(port, dict) else {}


async def discover_serve(host: Host, settings: ServeSettings, *,
                         python: str = "python3") -> ServeProcess | None:
    """The serve process on `host` (see `resolve_serve`), or None when none runs.
    Raises DiscoveryError when discovery itself cannot run (no python3, link lost)."""
    return (await resolve_serve(host, settings, python=python)).process


async def resolve_serve(host: Host, settings: ServeSettings, *,
                        python: str = "python3") -> Resolution:
    """The serve process on `host` by the one rule (`console.hostside.discover`), and what else
    was found. Raises DiscoveryError when discovery itself cannot run."""
    run = await run_json(host, "discover", python, discovery_params(settings), timeout=30)
    if run.data is None:
        raise DiscoveryError(f"{host.name}: cannot look for the serve process: {run.error}")
    facts = dict(run.data)
    process = serve_from_facts(facts, settings.match)
    return Resolution(process, facts, resolution_notes(facts, settings.match))


@dataclass(frozen=True)
class Resolved:
    """One effective setting and where it came from."""

    value: str
    source: str
    """`configured`, `discovered (pid N)`, or empty when unknown."""


@dataclass(frozen=True)
class EffectiveServe:
    """The settings the checks use: configured ones win, discovered ones fill in."""

    python: Resolved
    log: Resolved
    target: Resolved
    draft: Resolved
    url: Resolved
    process: ServeProcess | None
    notes: tuple[str, ...] = ()
    """Everything worth saying about the resolution, warnings included."""
    warnings: tuple[str, ...] = ()
    """Where the configuration disagrees with the running process (also among `notes`)."""


_WHAT = {"log": "writes its output to", "python": "runs", "target": "serves",
         "draft": "drafts with", "url": "listens on"}


def disagreement(key: str, configured: str, pid: int, really: str) -> str:
    """The warning for a configured value the running process does not use."""
    return (f"warning: configured {key} {configured} is not what pid {pid} uses (it "
            f"{_WHAT[key]} {really}); the console and a restart keep to the configured one: "
            f"correct or remove `{key}` in the hosts file")


def _same(key: str, configured: str, process: ServeProcess) -> bool:
    """Whether a configured value names what the process uses: a URL by its port (the host
    part is how the laptop or a config file spells the address), a path without its trailing
    slash."""
    if key == "url":
        return configured_port(configured) == process.args.port
    found = {"log": process.log, "python": process.python, "target": process.target,
             "draft": process.draft}[key] or ""
    return configured.rstrip("/") == found.rstrip("/")


def effective_serve(settings: ServeSettings, process: ServeProcess | None,
                    match_words: str | None = None, *,
                    last: Mapping[str, Any] | None = None,
                    found_notes: tuple[str, ...] = ()) -> EffectiveServe:
    """Merge the configuration with the discovered process; with no process, with this host
    entry's last launch by the console (`last`, from `console.hostclient.launch_record`), when there
    is one: the log it appended to, its interpreter and models. `found_notes`: what the resolver
    found when it found no server (`Resolution.notes`: an orphaned engine, a port held by something
    else, a look-alike)."""
    found = f"discovered (pid {process.pid})" if process else ""
    discovered = {
        "python": (process.python or "") if process else "",
        "log": (process.log or "") if process else "",
        "target": (process.target or "") if process else "",
        "draft": (process.draft or "") if process else "",
        "url": process.url if process else "",
    }
    notes: list[str] = []
    if process is None and last and last.get("argv"):
        argv = [str(a) for a in last["argv"]]
        args = parse_serve_argv(argv)
        found = f"the console's last launch (pid {last.get('pid')})"
        discovered = {
            "python": argv[0] if argv[0].rsplit("/", 1)[-1].startswith("python") else "",
            "log": str(last.get("log") or ""), "target": args.target or "",
            "draft": args.draft or "", "url": str(last.get("url") or args.url),
        }
        notes.append(f"no process matching {match_words or settings.match!r} runs for the "
                     f"login user: using this host entry's last launch by the console (pid "
                     f"{last.get('pid')}): its log, interpreter and models")
    elif process is None:
        notes.append(f"no process matching {match_words or settings.match!r} runs for the "
                     "login user: using the configured settings")
    if process is None:
        notes.extend(found_notes)
    else:
        notes.extend(process.notes)
    if process is not None and process.log_deleted:
        notes.append(f"the serve log {process.log} was rotated or deleted while pid "
                     f"{process.pid} still writes to it")
    resolved: dict[str, Resolved] = {}
    warnings: list[str] = []
    for key, found_value in discovered.items():
        configured = getattr(settings, key)
        if configured:
            resolved[key] = Resolved(configured, "configured")
            if process is not None and found_value and not _same(key, configured, process):
                warnings.append(disagreement(key, configured, process.pid, found_value))
        elif found_value:
            resolved[key] = Resolved(found_value, found)
        else:
            resolved[key] = Resolved("", "")
    return EffectiveServe(process=process, notes=(*notes, *warnings),
                          warnings=tuple(warnings), **resolved)
