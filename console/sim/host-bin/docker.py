"""`docker` for the simulated host ONLY (installed as ROOT/bin/docker): a stand-in for the Docker
CLI and its daemon, for the subcommands the console runs, answering as the real CLI does.

There is no daemon and no image: a container is a directory ROOT/.sim/container/ID/ holding its
configuration (`config.json`, the `docker inspect` body but its State), its state
(`state.json`) and its log (`ID-json.log`, docker's json-file driver's format: one JSON object
per line, `log`, `stream`, `time`). Its main process runs in a pid namespace of its own
(`unshare --pid`, with `--user --map-root-user` for a login user who is not root), so that the
host's /proc sees it as it sees a real container's: PID 1 of another namespace, never one of the
login user's bare processes. Everything else is shared with the host: the file system (the
container's paths are the host's, and `exec` runs its command on the host), the network (host
networking) and the cgroup (no `/docker/ID` in /proc/PID/cgroup).

A small shim (`__shim`, in a session of its own) starts the main process, reads its stdout and
stderr as they come and writes the json-file log, and records its exit, as containerd's shim and
the daemon do.

    ps [-a] [-q] [--no-trunc] [--format '{{json .}}'] [--filter KEY=VALUE]
    inspect [-f TEMPLATE] [--type container] REF...       ({{.A.B}} and {{json .A.B}})
    logs [-t|--timestamps] [--since T] [-f|--follow] [-n|--tail N] REF
    exec [-i] [-t] [-e K=V] [-w DIR] [-u USER] REF CMD...
    run [-d] [--name N] [-e K=V] [-v SRC:DST[:ro]] [--entrypoint P] [-w DIR] [--network M]
        [--restart P] [-l K=V] IMAGE [ARG...]
    start REF...   stop [-t N] REF...   restart [-t N] REF...   version   --version

Anything else gets docker's own error text and a non-zero exit. No restart policy is acted on.
Stdlib only, Python 3.9 like the host side.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".sim" / "container"
VERSION = "24.0.7"
API = "1.43"
ZERO_TIME = "0001-01-01T00:00:00Z"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class DockerError(Exception):
    """The CLI's message for stderr, and its exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# -- time ------------------------------------------------------------------------------------

def _stamp(ns: int, fixed: bool = False) -> str:
    """RFC 3339 in UTC with nanoseconds: Go's RFC3339Nano (trailing zeros trimmed, as in the
    inspect JSON and the json-file log), or `fixed` nine digits (as `logs --timestamps`)."""
    head = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000))
    frac = f"{ns % 1_000_000_000:09d}"
    if not fixed:
        frac = frac.rstrip("0")
    return f"{head}.{frac}Z" if frac else f"{head}Z"


_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)(?:T(\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?"
                      r"(Z|[+-]\d\d:\d\d)?)?$")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
            "m": 60_000_000_000, "h": 3_600_000_000_000}


def _ns_of_stamp(text: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 stamp (0 for docker's zero time)."""
    found = _RFC3339.match(text)
    if not found or text.startswith("0001-"):
        return 0
    year, month, day, hour, minute, sec, frac, zone = found.groups()
    fields = (int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(sec or 0))
    if zone is None:  # no zone: local time, as docker reads it
        seconds = int(time.mktime((*fields, 0, 0, -1)))
    else:
        seconds = _timegm(fields)
        if zone != "Z":
            sign = 1 if zone[0] == "+" else -1
            seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds * 1_000_000_000 + int((frac or "").ljust(9, "0") or 0)


def _timegm(fields: tuple[int, ...]) -> int:
    year, month, day, hour, minute, sec = fields
    days = _days_from_civil(year, month, day)
    return days * 86400 + hour * 3600 + minute * 60 + sec


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _since_ns(value: str, now_ns: int) -> int:
    """`--since`: Unix seconds (with a fraction), an RFC 3339 time, or a duration ago."""
    if re.match(r"^\d+(\.\d{1,9})?$", value):
        whole, _, frac = value.partition(".")
        return int(whole) * 1_000_000_000 + int(frac.ljust(9, "0") or 0)
    if _RFC3339.match(value):
        return _ns_of_stamp(value)
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return now_ns - int(sum(float(n) * _UNIT_NS[u] for n, u in parts))
    raise DockerError(f'invalid value for "since": failed to parse value as time or '
                      f'duration: "{value}"')


def _human(seconds: float) -> str:
    """Go's units.HumanDuration, as `docker ps` words it."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    minutes = int(seconds / 60)
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return f"{minutes} minutes"
    hours = int(seconds / 3600 + 0.5)
    if hours == 1:
        return "About an hour"
    if hours < 48:
        return f"{hours} hours"
    if hours < 24 * 7 * 2:
        return f"{hours // 24} days"
    if hours < 24 * 30 * 2:
        return f"{hours // 24 // 7} weeks"
    if hours < 24 * 365 * 2:
        return f"{hours // 24 // 30} months"
    return f"{int(seconds / 3600) // 24 // 365} years"


# -- the containers' records -----------------------------------------------------------------

def _read(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def _write(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def _state(cid: str) -> dict[str, Any]:
    """The container's state. One whose main process and shim were both killed from outside
    (SIGKILL to the tree's processes) is exited, as the daemon finds it."""
    state = _read(STATE / cid / "state.json", {})
    if state.get("Running") and not _alive(int(state.get("Pid") or 0)) and \
            not _alive(int(state.get("Shim") or 0)):
        state.update({"Status": "exited", "Running": False, "Pid": 0, "ExitCode": 137,
                      "FinishedAt": _stamp(time.time_ns())})
        _write(STATE / cid / "state.json", state)
    return state


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return pid > 0 and fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _all() -> list[dict[str, Any]]:
    found = []
    for config in sorted(STATE.glob("*/config.json")):
        body = _read(config, None)
        if isinstance(body, dict) and body.get("Id"):
            found.append(body)
    return sorted(found, key=lambda c: _ns_of_stamp(str(c.get("Created") or "")))


def _find(ref: str) -> dict[str, Any] | None:
    """A container by its name, its id or a unique prefix of its id."""
    containers = _all()
    for c in containers:
        if c["Id"] == ref or c["Name"] == "/" + ref.lstrip("/"):
            return c
    prefixed = [c for c in containers if ref and c["Id"].startswith(ref)]
    return prefixed[0] if len(prefixed) == 1 else None


def _need(ref: str, daemon: bool = True) -> dict[str, Any]:
    found = _find(ref)
    if found is None:
        where = "Error response from daemon" if daemon else "Error"
        raise DockerError(f"{where}: No such container: {ref}")
    return found


def _inspect(c: dict[str, Any]) -> dict[str, Any]:
    """The `docker inspect` body: the configuration with the state now."""
    state = {"Status": "created", "Running": False, "Paused": False, "Restarting": False,
             "OOMKilled": False, "Dead": False, "Pid": 0, "ExitCode": 0, "Error": "",
             "StartedAt": ZERO_TIME, "FinishedAt": ZERO_TIME}
    saved = _state(c["Id"])
    state.update({k: v for k, v in saved.items() if k in state})
    body: dict[str, Any] = {}
    for key, value in c.items():
        body[key] = value
        if key == "Args":
            body["State"] = state
    body["RestartCount"] = int(saved.get("RestartCount") or 0)
    return body


def _running(c: dict[str, Any]) -> bool:
    return bool(_state(c["Id"]).get("Running"))


# -- arguments -------------------------------------------------------------------------------

def _options(cmd: str, argv: list[str], flags: dict[str, str], values: dict[str, str],
             interspersed: bool = True) -> tuple[dict[str, Any], list[str]]:
    """Parse like the CLI's pflag: `flags` and `values` map each spelling to its name (a
    value flag may repeat: its values are listed). Stops at the first positional argument
    unless `interspersed`."""
    opts: dict[str, Any] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            rest.extend(argv[i + 1:])
            break
        if not word.startswith("-") or word == "-":
            rest.append(word)
            if not interspersed:
                rest.extend(argv[i + 1:])
                break
            i += 1
            continue
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if word.startswith("-") and not word.startswith("--") and len(word) > 2:
            name, inline, eq = word[:2], word[2:], "=" if word[2:] else ""
            if name in flags and inline:  # -it: two short flags
                opts[flags[name]] = True
                argv = argv[:i] + ["-" + inline] + argv[i + 1:]
                continue
        if name in flags:
            opts[flags[name]] = inline not in ("false", "0") if eq else True
        elif name in values:
            if not eq:
                i += 1
                if i >= len(argv):
                    raise DockerError(f"flag needs an argument: {name}\n"
                                      f"See 'docker {cmd} --help'.", 125)
                inline = argv[i]
            opts.setdefault(values[name], []).append(inline)
        elif name.startswith("--"):
            raise DockerError(f"unknown flag: {name}\nSee 'docker {cmd} --help'.", 125)
        else:
            raise DockerError(f"unknown shorthand flag: '{name[1:2]}' in {word}\n"
                              f"See 'docker {cmd} --help'.", 125)
        i += 1
    return opts, rest


def _last(opts: dict[str, Any], name: str, default: str = "") -> str:
    return str((opts.get(name) or [default])[-1])


def _at_least(cmd: str, rest: list[str], n: int, usage: str) -> None:
    if len(rest) < n:
        word = "argument" if n == 1 else "arguments"
        raise DockerError(f'"docker {cmd}" requires at least {n} {word}.\n'
                          f"See 'docker {cmd} --help'.\n\nUsage:  docker {cmd} {usage}", 1)


# -- ps and inspect --------------------------------------------------------------------------

def _command(c: dict[str, Any]) -> str:
    return " ".join([c["Path"], *c["Args"]]) if c["Path"] else " ".join(c["Args"])


def _ps_row(c: dict[str, Any], now: float, trunc: bool) -> dict[str, str]:
    body = _inspect(c)
    state = body["State"]
    created = _ns_of_stamp(c["Created"]) / 1e9
    command = _command(c)
    if trunc and len(command) > 20:
        command = command[:19] + "…"
    if state["Running"]:
        status = "Up " + _human(now - _ns_of_stamp(state["StartedAt"]) / 1e9)
    elif state["StartedAt"] == ZERO_TIME:
        status = "Created"
    else:
        status = (f"Exited ({state['ExitCode']}) "
                  f"{_human(now - _ns_of_stamp(state['FinishedAt']) / 1e9)} ago")
    labels = c["Config"].get("Labels") or {}
    mounts = [m.get("Name") or m.get("Source", "") for m in c.get("Mounts") or []]
    local = time.localtime(created)
    return {
        "Command": json.dumps(command, ensure_ascii=False),
        "CreatedAt": time.strftime("%Y-%m-%d %H:%M:%S %z %Z", local),
        "ID": c["Id"] if not trunc else c["Id"][:12],
        "Image": c["Config"]["Image"],
        "Labels": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        "LocalVolumes": str(sum(1 for m in c.get("Mounts") or [] if m.get("Type") == "volume")),
        "Mounts": ",".join(m if not trunc or len(m) <= 15 else m[:14] + "…" for m in mounts),
        "Names": c["Name"].lstrip("/"),
        "Networks": c["HostConfig"]["NetworkMode"] if c["HostConfig"]["NetworkMode"] !=
        "default" else "bridge",
        "Ports": "",
        "RunningFor": _human(now - created) + " ago",
        "Size": "0B",
        "State": state["Status"],
        "Status": status,
    }


def _ps_filter(c: dict[str, Any], row: dict[str, str], filters: list[str]) -> bool:
    for item in filters:
        key, _, value = item.partition("=")
        if key == "label":
            name, eq, want = value.partition("=")
            labels = c["Config"].get("Labels") or {}
            if name not in labels or (eq and labels[name] != want):
                return False
        elif key == "name":
            if value.lstrip("/") not in row["Names"]:
                return False
        elif key == "id":
            if not c["Id"].startswith(value):
                return False
        elif key == "status":
            if row["State"] != value:
                return False
        else:
            raise DockerError(f"Error response from daemon: invalid filter '{key}'")
    return True


def cmd_ps(argv: list[str]) -> int:
    opts, rest = _options("ps", argv, {"-a": "all", "--all": "all", "-q": "quiet",
                                       "--quiet": "quiet", "--no-trunc": "no_trunc"},
                          {"--format": "format", "-f": "filter", "--filter": "filter"})
    if rest:
        raise DockerError('"docker ps" accepts no arguments.\nSee \'docker ps --help\'.\n\n'
                          "Usage:  docker ps [OPTIONS]\n\nList containers")
    now = time.time()
    rows = []
    for c in reversed(_all()):  # newest first, as the daemon lists them
        if not (opts.get("all") or _running(c)):
            continue
        row = _ps_row(c, now, trunc=not opts.get("no_trunc"))
        if _ps_filter(c, row, opts.get("filter") or []):
            rows.append(row)
    fmt = _last(opts, "format")
    if opts.get("quiet"):
        print("\n".join(r["ID"] for r in rows) + ("\n" if rows else ""), end="")
    elif fmt in ("{{json .}}", "json"):
        for row in rows:
            print(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
    elif fmt and fmt != "table":
        for row in rows:
            print(_template(fmt, row))
    else:
        head = ["CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES"]
        table = [head] + [[r["ID"], r["Image"], r["Command"], r["RunningFor"], r["Status"],
                           r["Ports"], r["Names"]] for r in rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(head))]
        for line in table:
            print("   ".join(line[i].ljust(widths[i]) for i in range(len(head))).rstrip())
    return 0


_FIELD = re.compile(r"\{\{\s*(json\s+)?\.([A-Za-z0-9_.]*)\s*\}\}")


def _go_value(value: Any) -> str:
    """A value as Go's text/template prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    return str(value)


def _template(fmt: str, obj: dict[str, Any]) -> str:
    """The `--format` forms the console uses: {{.A.B}} and {{json .A.B}}, around text."""
    out, at = [], 0
    for found in _FIELD.finditer(fmt):
        out.append(fmt[at:found.start()])
        value: Any = obj
        for key in [k for k in found.group(2).split(".") if k]:
            if not isinstance(value, dict):
                raise DockerError(f'template: :1:{found.start() + 3}: executing "" at '
                                  f"<.{found.group(2)}>: can't evaluate field {key}")
            value = value.get(key, "<no value>")
        if found.group(1):
            out.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        else:
            out.append(_go_value(value))
        at = found.end()
    tail = fmt[at:]
    if "{{" in tail:
        word = tail.split("{{", 1)[1].split("}}", 1)[0].strip().split(" ")[0]
        raise DockerError(f'template parsing error: template: :1: function "{word}" not '
                          "defined")
    out.append(tail)
    return "".join(out)


def cmd_inspect(argv: list[str]) -> int:
    opts, rest = _options("inspect", argv, {"-s": "size", "--size": "size"},
                          {"-f": "format", "--format": "format", "--type": "type"})
    _at_least("inspect", rest, 1, "[OPTIONS] NAME|ID [NAME|ID...]")
    kind = _last(opts, "type", "container")
    found, missing = [], []
    for ref in rest:
        c = _find(ref) if kind == "container" else None
        if c is None:
            missing.append(ref)
        else:
            found.append(_inspect(c))
    fmt = _last(opts, "format")
    if fmt:
        for body in found:
            print(_template(fmt, body))
    else:
        print(json.dumps(found, indent=4, ensure_ascii=False))
    for ref in missing:
        print(f"Error: No such object: {ref}", file=sys.stderr)
    return 1 if missing else 0


# -- logs ------------------------------------------------------------------------------------

def _entries(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The whole json-file records from `offset`, and the offset after the last whole line."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return [], offset
    cut = data.rfind(b"\n") + 1
    records = []
    for line in data[:cut].splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records, offset + cut


def cmd_logs(argv: list[str]) -> int:
    opts, rest = _options("logs", argv, {"-t": "timestamps", "--timestamps": "timestamps",
                                         "-f": "follow", "--follow": "follow",
                                         "--details": "details"},
                          {"--since": "since", "--until": "until", "-n": "tail",
                           "--tail": "tail"})
    if len(rest) != 1:
        raise DockerError('"docker logs" requires exactly 1 argument.\n'
                          "See 'docker logs --help'.\n\nUsage:  docker logs [OPTIONS] "
                          "CONTAINER\n\nFetch the logs of a container")
    c = _need(rest[0], daemon=False)
    now = time.time_ns()
    since = _since_ns(_last(opts, "since"), now) if opts.get("since") else 0
    until = _since_ns(_last(opts, "until"), now) if opts.get("until") else 0
    tail = _last(opts, "tail", "all")
    path = STATE / c["Id"] / f"{c['Id']}-json.log"
    records, offset = _entries(path, 0)
    records = [r for r in records if _ns_of_stamp(r.get("time", "")) >= since and
               (not until or _ns_of_stamp(r.get("time", "")) <= until)]
    if tail != "all":
        records = records[-int(tail):] if int(tail) > 0 else []
    stamps = bool(opts.get("timestamps"))
    _emit(records, stamps)
    if not opts.get("follow") or until:
        return 0
    started = _state(c["Id"]).get("StartedAt")
    while True:
        state = _state(c["Id"])
        records, offset = _entries(path, offset)
        _emit([r for r in records if _ns_of_stamp(r.get("time", "")) >= since], stamps)
        if not state.get("Running") or state.get("StartedAt") != started:
            return 0  # the run ended: the shim wrote its last line before it said so
        time.sleep(0.1)


def _emit(records: list[dict[str, Any]], stamps: bool) -> None:
    for r in records:
        text = str(r.get("log", ""))
        if stamps:
            text = _stamp(_ns_of_stamp(r.get("time", "")), fixed=True) + " " + text
        stream = sys.stderr if r.get("stream") == "stderr" else sys.stdout
        stream.buffer.write(text.encode("utf-8", "surrogateescape"))
        stream.flush()


# -- exec ------------------------------------------------------------------------------------

def _environment(c: dict[str, Any], extra: list[str] | None = None) -> dict[str, str]:
    env = {}
    for item in [*(c["Config"].get("Env") or []), *(extra or [])]:
        key, sep, value = item.partition("=")
        if sep:
            env[key] = value
        elif key in os.environ:  # `-e NAME`: the caller's value
            env[key] = os.environ[key]
    return env


def cmd_exec(argv: list[str]) -> int:
    """Runs the command on the host, as the login user: the simulated container shares the
    host's paths (no mount namespace), so its files are the host's files. It gets the
    container's configured environment (with `-e`) and working directory (or `-w`), like a real
    `docker exec`, and stdin only with `-i`."""
    opts, rest = _options("exec", argv, {"-i": "interactive", "--interactive": "interactive",
                                         "-t": "tty", "--tty": "tty", "-d": "detach",
                                         "--detach": "detach", "--privileged": "privileged"},
                          {"-e": "env", "--env": "env", "-w": "workdir", "--workdir": "workdir",
                           "-u": "user", "--user": "user"}, interspersed=False)
    _at_least("exec", rest, 2, "[OPTIONS] CONTAINER COMMAND [ARG...]")
    c = _need(rest[0])
    if not _running(c):
        raise DockerError(f"Error response from daemon: Container {c['Id']} is not running")
    env = _environment(c, opts.get("env") or [])
    cwd = _last(opts, "workdir") or c["Config"].get("WorkingDir") or "/"
    command = rest[1:]
    found = command[0] if "/" in command[0] else \
        shutil.which(command[0], path=env.get("PATH", DEFAULT_PATH))
    if not found or not os.access(found, os.X_OK) or os.path.isdir(found):
        why = "executable file not found in $PATH" if "/" not in command[0] else \
            "no such file or directory"
        raise DockerError(f"OCI runtime exec failed: exec failed: unable to start container "
                          f'process: exec: "{command[0]}": {why}: unknown', 126)
    stdin = None if opts.get("interactive") else subprocess.DEVNULL
    try:
        return subprocess.run([found, *command[1:]], env=env, cwd=cwd, stdin=stdin,
                              check=False).returncode
    except OSError as exc:
        raise DockerError(f"OCI runtime exec failed: exec failed: unable to start container "
                          f"process: {exc}: unknown", 126) from None


# -- run, start, stop, restart ---------------------------------------------------------------

def _start(c: dict[str, Any], timeout: float = 30.0) -> None:
    """Start the container's main process through a shim of its own; back once it runs (or
    has already exited)."""
    cid = c["Id"]
    if _running(c):
        return
    run = int(_state(cid).get("Run") or 0) + 1
    with contextlib.suppress(OSError):
        (STATE / cid / "pid").unlink()
    subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "__shim", cid, str(run)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                     cwd="/")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state(cid)
        if int(state.get("Run") or 0) == run and (state.get("Running") or
                                                  state.get("FinishedAt", ZERO_TIME) !=
                                                  ZERO_TIME):
            if not state.get("Running") and state.get("Error"):
                raise DockerError(f"Error response from daemon: failed to create task for "
                                  f"container: {state['Error']}: unknown", 127)
            return
        time.sleep(0.02)
    raise DockerError(f"Error response from daemon: container {cid} did not start in "
                      f"{timeout:g} s")


def _stop(c: dict[str, Any], grace: float) -> None:
    """SIGTERM to the main process, SIGKILL after `grace` s, as the daemon does: the end of a
    pid namespace's PID 1 ends every other process in it. Back once the shim saw the exit."""
    state = _state(c["Id"])
    pid = int(state.get("Pid") or 0)
    if not state.get("Running") or not pid:
        return
    sent_kill = False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            raise DockerError(f"Error response from daemon: cannot stop container: "
                              f"{c['Id']}: {exc}") from None
        sent_kill = sig == signal.SIGKILL
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _state(c["Id"]).get("Running"):
                return
            time.sleep(0.05)
    if sent_kill:
        raise DockerError(f"Error response from daemon: cannot stop container: {c['Id']}: "
                          "tried to kill container, but did not receive an exit event")


def _grace(opts: dict[str, Any], c: dict[str, Any]) -> float:
    value = _last(opts, "time", str(c["Config"].get("StopTimeout") or 10))
    try:
        return max(0.0, float(int(value)))
    except ValueError:
        raise DockerError(f'invalid argument "{value}" for "-t, --time" flag: strconv.ParseInt:'
                          f' parsing "{value}": invalid syntax\nSee \'docker stop --help\'.',
                          125) from None


def _each(cmd: str, argv: list[str], act: Any) -> int:
    opts, rest = _options(cmd, argv, {}, {"-t": "time", "--time": "time"} if cmd != "start"
                          else {})
    _at_least(cmd, rest, 1, "[OPTIONS] CONTAINER [CONTAINER...]")
    errors = []
    for ref in rest:
        try:
            act(_need(ref), opts)
        except DockerError as exc:
            errors.append(str(exc))
            continue
        print(ref, flush=True)
    if errors:
        raise DockerError("\n".join(errors))
    return 0


def _restarted(c: dict[str, Any], opts: dict[str, Any]) -> None:
    _stop(c, _grace(opts, c))
    _start(c)


def cmd_start(argv: list[str]) -> int:
    return _each("start", argv, lambda c, _opts: _start(c))


def cmd_stop(argv: list[str]) -> int:
    return _each("stop", argv, lambda c, opts: _stop(c, _grace(opts, c)))


def cmd_restart(argv: list[str]) -> int:
    return _each("restart", argv, _restarted)


def cmd_run(argv: list[str]) -> int:
    opts, rest = _options("run", argv, {"-d": "detach", "--detach": "detach"},
                          {"--name": "name", "-e": "env", "--env": "env", "-v": "volume",
                           "--volume": "volume", "--entrypoint": "entrypoint", "-w": "workdir",
                           "--workdir": "workdir", "--network": "network", "--net": "network",
                           "--restart": "restart", "-l": "label", "--label": "label",
                           "--stop-timeout": "stop_timeout"}, interspersed=False)
    _at_least("run", rest, 1, "[OPTIONS] IMAGE [COMMAND] [ARG...]")
    image, cmd = rest[0], rest[1:]
    name = _last(opts, "name") or f"sim_{secrets.token_hex(4)}"
    taken = _find(name)
    if taken is not None and taken["Name"] == "/" + name:
        raise DockerError(f'docker: Error response from daemon: Conflict. The container name '
                          f'"/{name}" is already in use by container "{taken["Id"]}". You have '
                          "to remove (or rename) that container to be able to reuse that "
                          "name.\nSee 'docker run --help'.", 125)
    entrypoint = [_last(opts, "entrypoint")] if opts.get("entrypoint") else None
    main = (entrypoint or []) + cmd
    if not main:
        raise DockerError("docker: Error response from daemon: No command specified.\n"
                          "See 'docker run --help'.", 125)
    c = _create(name, image, entrypoint, cmd, opts)
    _start(c)
    if opts.get("detach"):
        print(c["Id"])
        return 0
    cmd_logs(["--follow", c["Id"]])
    return int(_state(c["Id"]).get("ExitCode") or 0)


def _create(name: str, image: str, entrypoint: list[str] | None, cmd: list[str],
            opts: dict[str, Any]) -> dict[str, Any]:
    cid = secrets.token_hex(32)
    env = [f"PATH={DEFAULT_PATH}"]
    for item in _environment({"Config": {"Env": opts.get("env") or []}}).items():
        env = [e for e in env if not e.startswith(item[0] + "=")] + ["=".join(item)]
    mounts, binds = [], []
    for spec in opts.get("volume") or []:
        parts = spec.split(":")
        source, dest = parts[0], parts[1] if len(parts) > 1 else parts[0]
        mode = parts[2] if len(parts) > 2 else ""
        binds.append(spec)
        mounts.append({"Type": "bind", "Source": source, "Destination": dest, "Mode": mode,
                       "RW": "ro" not in mode.split(","), "Propagation": "rprivate"})
    policy = _last(opts, "restart", "no")
    name_, _, retries = policy.partition(":")
    labels = dict(item.partition("=")[::2] for item in opts.get("label") or [])
    network = _last(opts, "network", "default")
    main = (entrypoint or []) + cmd
    d = STATE / cid
    d.mkdir(parents=True)
    config: dict[str, Any] = {
        "Id": cid, "Created": _stamp(time.time_ns()), "Path": main[0], "Args": main[1:],
        "Image": "sha256:" + secrets.token_hex(32),
        "ResolvConfPath": "/etc/resolv.conf", "HostnamePath": "/etc/hostname",
        "HostsPath": "/etc/hosts", "LogPath": str(d / f"{cid}-json.log"),
        "Name": "/" + name, "Driver": "overlay2", "Platform": "linux", "MountLabel": "",
        "ProcessLabel": "", "AppArmorProfile": "", "ExecIDs": None,
        "HostConfig": {
            "Binds": binds or None, "ContainerIDFile": "",
            "LogConfig": {"Type": "json-file", "Config": {}}, "NetworkMode": network,
            "PortBindings": {}, "RestartPolicy": {"Name": name_,
                                                  "MaximumRetryCount": int(retries or 0)},
            "AutoRemove": False, "VolumeDriver": "", "VolumesFrom": None, "CapAdd": None,
            "CapDrop": None, "Dns": [], "ExtraHosts": None, "IpcMode": "private",
            "PidMode": "", "Privileged": False, "ReadonlyRootfs": False, "ShmSize": 67108864,
            "Runtime": "runc", "Init": None,
        },
        "Mounts": mounts,
        "Config": {
            "Hostname": cid[:12], "Domainname": "", "User": "", "AttachStdin": False,
            "AttachStdout": not opts.get("detach"), "AttachStderr": not opts.get("detach"),
            "Tty": False, "OpenStdin": False, "StdinOnce": False, "Env": env,
            "Cmd": cmd or None, "Image": image, "Volumes": None,
            "WorkingDir": _last(opts, "workdir"), "Entrypoint": entrypoint, "OnBuild": None,
            "Labels": labels,
        },
        "NetworkSettings": {
            "Bridge": "", "SandboxID": secrets.token_hex(32), "HairpinMode": False,
            "LinkLocalIPv6Address": "", "LinkLocalIPv6PrefixLen": 0, "Ports": {},
            "SandboxKey": "/var/run/docker/netns/default" if network == "host" else "",
            "Networks": {network if network != "default" else "bridge": {
                "IPAMConfig": None, "Links": None, "Aliases": None,
                "NetworkID": secrets.token_hex(32), "EndpointID": "", "Gateway": "",
                "IPAddress": "", "IPPrefixLen": 0, "MacAddress": ""}},
        },
    }
    if opts.get("stop_timeout"):
        config["Config"]["StopTimeout"] = int(_last(opts, "stop_timeout"))
    _write(d / "config.json", config)
    _write(d / "state.json", {"Status": "created", "Run": 0})
    return config


def cmd_version(argv: list[str]) -> int:
    opts, _rest = _options("version", argv, {}, {"-f": "format", "--format": "format"})
    info = {"Client": {"Version": VERSION, "ApiVersion": API, "Os": "linux", "Arch": "amd64"},
            "Server": {"Version": VERSION, "ApiVersion": API, "MinAPIVersion": "1.12",
                       "Os": "linux", "Arch": "amd64"}}
    fmt = _last(opts, "format")
    if fmt:
        print(_template(fmt, info))
        return 0
    print(f"Client:\n Version:           {VERSION}\n API version:       {API}\n"
          f" OS/Arch:           linux/amd64\n\nServer:\n Engine:\n  Version:          "
          f"{VERSION}\n  API version:      {API} (minimum version 1.12)\n"
          f"  OS/Arch:          linux/amd64")
    return 0


# -- the shim and the container's init -------------------------------------------------------

def _json_line(text: str, stream: str, ns: int) -> bytes:
    """One json-file record (Go's encoder escapes <, > and & in strings)."""
    body = json.dumps({"log": text, "stream": stream, "time": _stamp(ns)},
                      ensure_ascii=False, separators=(",", ":"))
    body = body.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return body.encode("utf-8", "surrogateescape") + b"\n"


def _shim(cid: str, run: int) -> int:
    """Start the main process in a pid namespace of its own, log its output in the json-file
    format as it comes, and record its start and its exit."""
    c = _read(STATE / cid / "config.json", {})
    state = _state(cid)
    env = _environment(c)
    unshare = shutil.which("unshare", path=os.environ.get("PATH", DEFAULT_PATH))
    if unshare is None:
        state.update({"Status": "exited", "Running": False, "Pid": 0, "ExitCode": 127,
                      "Error": "unshare (util-linux) not found: the simulated container needs "
                               "a pid namespace", "Run": run, "FinishedAt": _stamp(time.time_ns())})
        _write(STATE / cid / "state.json", state)
        return 1
    userns = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
    argv = [unshare, "--pid", "--fork", "--kill-child", *userns, sys.executable,
            str(Path(__file__).resolve()), "__init", cid]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd="/")
    assert proc.stdout is not None
    assert proc.stderr is not None
    started = time.time_ns()
    pid_file = STATE / cid / "pid"
    deadline = time.monotonic() + 10
    pid = 0
    while not pid and proc.poll() is None and time.monotonic() < deadline:
        text = pid_file.read_text().strip() if pid_file.exists() else ""
        pid = int(text) if text.isdigit() else 0
        time.sleep(0.005)
    state.update({"Status": "running" if pid else "exited", "Running": bool(pid), "Pid": pid,
                  "ExitCode": 0, "Error": "", "StartedAt": _stamp(started),
                  "FinishedAt": ZERO_TIME, "Run": run, "Shim": os.getpid()})
    _write(STATE / cid / "state.json", state)
    names = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
    pending = {fd: b"" for fd in names}
    with open(STATE / cid / f"{cid}-json.log", "ab") as log:
        while pending:
            ready, _, _ = select.select(list(pending), [], [], 1.0)
            for fd in ready:
                chunk = os.read(fd, 65536)
                now = time.time_ns()
                if not chunk:
                    if pending[fd]:
                        log.write(_json_line(pending.pop(fd).decode("utf-8", "replace"),
                                             names[fd], now))
                    else:
                        pending.pop(fd)
                    continue
                data = pending[fd] + chunk
                cut = data.rfind(b"\n") + 1
                pending[fd] = data[cut:]
                for line in data[:cut].splitlines(keepends=True):
                    log.write(_json_line(line.decode("utf-8", "replace"), names[fd], now))
            log.flush()
    code = proc.wait()
    why = ""
    if not pid:
        why = _read(STATE / cid / "error.json", {}).get("error", "") or \
            f"the main process exited with status {code} before it started"
    state.update({"Status": "exited", "Running": False, "Pid": 0,
                  "ExitCode": 128 - code if code < 0 else code, "Error": why,
                  "FinishedAt": _stamp(time.time_ns())})
    _write(STATE / cid / "state.json", state)
    return 0


def _init(cid: str) -> int:
    """PID 1 of the container's pid namespace: say its pid on the host (the host's /proc is
    still mounted, so /proc/self names it), then become the main command."""
    c = _read(STATE / cid / "config.json", {})
    host_pid = os.readlink("/proc/self")
    argv = [c["Path"], *c["Args"]]
    env = dict(os.environ)
    try:
        os.chdir(c["Config"].get("WorkingDir") or "/")
        found = argv[0] if "/" in argv[0] else \
            shutil.which(argv[0], path=env.get("PATH", DEFAULT_PATH))
        if found is None:
            raise FileNotFoundError(f'exec: "{argv[0]}": executable file not found in $PATH')
        _write(STATE / cid / "pid", int(host_pid))
        os.execve(found, argv, env)
    except OSError as exc:
        _write(STATE / cid / "error.json", {"error": str(exc)})
        with contextlib.suppress(OSError):
            (STATE / cid / "pid").unlink()
        print(f"exec {argv[0]}: {exc}", file=sys.stderr)
        return 127
    return 0


def cmd_image(argv: list[str]) -> int:
    """`docker image inspect REF...`: the image a container was made from, as the daemon
    describes it (no entry point, no command of its own: the stand-in's containers set both)."""
    if argv[:1] != ["inspect"]:
        raise DockerError(f"docker: 'image {' '.join(argv[:1])}' is not a docker command.\n"
                          "See 'docker --help'", 1)
    _opts, rest = _options("image inspect", argv[1:], {}, {"-f": "format", "--format": "format"})
    _at_least("image inspect", rest, 1, "[OPTIONS] IMAGE [IMAGE...]")
    made = {c["Image"]: c for c in _all()}
    made.update({c["Config"]["Image"]: c for c in _all()})
    found = [{"Id": made[ref]["Image"], "RepoTags": [made[ref]["Config"]["Image"]],
              "Config": {"Env": [f"PATH={DEFAULT_PATH}"], "Entrypoint": None, "Cmd": None,
                         "WorkingDir": "", "Labels": None, "Healthcheck": None}}
             for ref in rest if ref in made]
    print(json.dumps(found, indent=4))
    for ref in rest:
        if ref not in made:
            print(f"Error response from daemon: No such image: {ref}", file=sys.stderr)
    return 0 if len(found) == len(rest) else 1


def cmd_create(argv: list[str]) -> int:
    """Making a container again (a traced restart, an edited launch) is proven on a real
    daemon only (tests/containers): the stand-in says so, and the console stops nothing."""
    raise DockerError("docker: the simulated host's docker stand-in does not create "
                      "containers: a traced restart or an edited launch of a container is for "
                      "a real Docker daemon", 125)


COMMANDS = {"ps": cmd_ps, "inspect": cmd_inspect, "logs": cmd_logs, "exec": cmd_exec,
            "run": cmd_run, "start": cmd_start, "stop": cmd_stop, "restart": cmd_restart,
            "version": cmd_version, "image": cmd_image, "create": cmd_create}


def main(argv: list[str]) -> int:
    if argv[:1] == ["__shim"]:
        return _shim(argv[1], int(argv[2]))
    if argv[:1] == ["__init"]:
        return _init(argv[1])
    if argv[:1] in (["--version"], ["-v"]):
        print(f"Docker version {VERSION}, build afdd53b")
        return 0
    if not argv or argv[0] in ("--help", "-h", "help"):
        print("Usage:  docker [OPTIONS] COMMAND\n\nA self-sufficient runtime for containers\n\n"
              "Commands:\n  " + "\n  ".join(sorted(COMMANDS)))
        return 0
    if argv[0] == "container" and len(argv) > 1 and argv[1] in COMMANDS:
        argv = argv[1:]
    if argv[0].startswith("-"):
        print(f"unknown flag: {argv[0]}\nSee 'docker --help'.", file=sys.stderr)
        return 125
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"docker: '{argv[0]}' is not a docker command.\nSee 'docker --help'",
              file=sys.stderr)
        return 1
    try:
        return command(argv[1:])
    except DockerError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
