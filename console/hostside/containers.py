"""Where the server runs, the container kind: a `vllm serve` that is a container's main process.

The official vLLM image's ENTRYPOINT is `vllm serve`, so the server is PID 1 of its container.
Found through the `docker` CLI on the host, as the login user (its own access to the Docker
socket; `DOCKER_HOST` and the CLI's context honoured, since the CLI reads them itself): `docker
ps` lists the running containers, one `docker inspect` describes them, and a container whose main
command (`Path` and `Args`) is a server entry point (`discover.server_entry`, also behind a
container init such as `docker-init`/`tini`) is a candidate. With a configured port, the one that
publishes it (its host port: the same port on the host network, else the published binding).

A server found here is described in discovery's own shape (`discover._serve`), with the paths on
its command line being the container's, plus `container`: the runtime, id, name, image, start,
restart policy and compose labels. The host's /proc adds its tree when this user may read it.

The socket is root on the host: it is only ever used through the CLI, on the host, by the login
user; nothing here forwards or exposes it.
"""

from __future__ import annotations

import contextlib
import datetime
import heapq
import json
import os
import pwd
import subprocess
import tempfile
from typing import Any, Callable

from .argv import matches
from .procfs import cmdline, container_from_cgroup, in_other_pid_namespace, read_stat
from .wire import answer, read_params

RUNTIME = "docker"
RUNTIMES = ("docker", "podman")
"""The CLIs the console runs (`serve.runtime`): nothing else is ever executed by name."""
TIMEOUT_S = 20
_INITS = ("docker-init", "tini", "dumb-init", "catatonit")
_FIGHTING_POLICIES = ("always", "unless-stopped")
_COMPOSE_PROJECT = "com.docker.compose.project"
_COMPOSE_SERVICE = "com.docker.compose.service"


class ContainersUnavailable(Exception):
    """The runtime's CLI answered, but not with containers: the message is the one line to show
    (no access to the socket, and how to grant it). `unreachable`: the daemon could not be
    asked at all (it did not answer in time, or answered with an error): whether a server runs
    in a container is then unknown, never "no container"."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


_TIMED_OUT = 124


def _cli(runtime: str, *args: str) -> tuple[int, str, str]:
    try:
        done = subprocess.run([runtime, *args], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        return 127, "", ""
    except subprocess.TimeoutExpired:
        return _TIMED_OUT, "", f"`{runtime} {args[0]}` did not answer in {TIMEOUT_S} s"
    except OSError as exc:
        return 1, "", str(exc)
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))


def _user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _refusal(runtime: str, stderr: str) -> str | None:
    """The one line for a CLI that could not reach its daemon, or None when there is simply no
    daemon here (no containers to look at is not a problem worth a line)."""
    text = " ".join(stderr.split())
    where = os.environ.get("DOCKER_HOST") or "/var/run/docker.sock"
    if "permission denied" in text.lower():
        user = _user()
        return (f"cannot list containers: {user} has no access to the {runtime} socket "
                f"({where}); to let the console find a server in a container, grant it "
                f"(`sudo usermod -aG docker {user}`, then log in again; the docker group is "
                f"root-equivalent) or log in as a user that has it")
    if "cannot connect to the docker daemon" in text.lower() and \
            not os.environ.get("DOCKER_HOST"):
        return None
    return f"cannot list containers: `{runtime} ps` failed: {text[:300]}" if text else None


def running_ids(runtime: str = RUNTIME) -> list[str]:
    """The ids of the running containers ([] when the CLI is not installed or no daemon runs).
    Raises ContainersUnavailable when the CLI cannot reach a daemon it should."""
    code, out, err = _cli(runtime, "ps", "--no-trunc", "--format", "{{json .}}")
    if code == 127 and not err:
        return []
    if code == _TIMED_OUT:
        raise ContainersUnavailable(f"cannot list containers: the {runtime} daemon is not "
                                    f"answering ({err}): whether a server runs in a "
                                    "container is unknown", unreachable=True)
    if code != 0:
        line = _refusal(runtime, err)
        if line:
            raise ContainersUnavailable(line, unreachable="permission denied" not in
                                        line and "has no access" not in line)
        return []
    ids = []
    for row in out.splitlines():
        try:
            obj = json.loads(row)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("ID"):
            ids.append(str(obj["ID"]))
    return ids


def inspect(ids: list[str], runtime: str = RUNTIME) -> list[dict[str, Any]]:
    """`docker inspect` of `ids` ([] when none, or when they went away meanwhile)."""
    if not ids:
        return []
    code, out, err = _cli(runtime, "inspect", *ids)
    if code == _TIMED_OUT:
        raise ContainersUnavailable(f"cannot inspect containers: the {runtime} daemon is not "
                                    f"answering ({err})", unreachable=True)
    try:
        found = json.loads(out) if out.strip() else []
    except ValueError:
        return []
    if code != 0 and not found:
        return []
    return [c for c in found if isinstance(c, dict)]


def main_argv(info: dict[str, Any]) -> list[str]:
    """The container's main command: its entry point and arguments as the daemon ran them."""
    path = info.get("Path") or ""
    args = info.get("Args") or []
    return [str(a) for a in ([path] if path else []) + list(args)]


def server_argv(argv: list[str], server_entry: Callable[[list[str]], bool]
                ) -> list[str] | None:
    """The server's command line when the container's main command starts one (itself, or
    behind a container init: `docker-init -- vllm serve ...`), else None."""
    if server_entry(argv):
        return argv
    if argv and os.path.basename(argv[0]) in _INITS:
        rest = argv[argv.index("--") + 1:] if "--" in argv else argv[1:]
        if server_entry(rest):
            return rest
    return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (one pass over /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = read_stat(int(name))
            if st is not None and st.ppid == pid:
                out.append(int(name))
    return sorted(out)


def server_process(info: dict[str, Any], server_entry: Callable[[list[str]], bool]
                   ) -> tuple[list[str], int] | None:
    """The container's vLLM server, (its command line, its host pid), by the container's own
    process list, or None when it runs none: its main command is a server entry point (itself
    or behind a container init, then the init's child is the server), or its main process
    (`State.Pid`) is one now (an image whose CMD is a shell script that execs `vllm serve`),
    or that process's child is (a shell wrapper that did not exec)."""
    pid = int((info.get("State") or {}).get("Pid") or 0)
    main = main_argv(info)
    argv = server_argv(main, server_entry)
    if argv is not None:
        if argv == main or not pid:
            return argv, pid
        child = next((c for c in _children(pid) if server_entry(cmdline(c) or [])), pid)
        return argv, child
    if not pid:
        return None
    live = server_argv(cmdline(pid) or [], server_entry)
    if live is not None:
        return live, pid
    for child in _children(pid):
        words = cmdline(child) or []
        if server_entry(words):
            return words, child
    return None


_OWN: list[str] = []


def _own_container() -> str:
    """The container this helper itself runs in ("" on the host): its fellows are no other
    container's."""
    if not _OWN:
        _OWN.append(container_from_cgroup(os.getpid()))
    return _OWN[0]


def in_container(pid: int, own_namespace: str | None) -> bool:
    """The one rule for "this process is a container's" (discovery, the agent and the restart
    use it): its cgroup names a container other than the one this helper runs in, or it runs
    in another pid namespace. The pid namespace alone is not enough: a `--pid host` container
    shares the host's, and stopping its main process would end the container."""
    box = container_from_cgroup(pid)
    if box and box != _own_container():
        return True
    return in_other_pid_namespace(pid, own_namespace)


def host_port(info: dict[str, Any], port: int) -> int:
    """The port on the host where the container's `port` answers: the same on the host
    network, else its published binding (0 when it is not published)."""
    host = info.get("HostConfig") or {}
    if host.get("NetworkMode") == "host":
        return port
    for binding in ((host.get("PortBindings") or {}).get(f"{port}/tcp") or []):
        value = str((binding or {}).get("HostPort") or "")
        if value.isdigit():
            return int(value)
    return 0


def started_at(info: dict[str, Any]) -> float | None:
    """`State.StartedAt` (RFC 3339, nanoseconds) as seconds since the epoch."""
    text = str((info.get("State") or {}).get("StartedAt") or "")
    if not text or text.startswith("0001-"):
        return None
    head, _, frac = text.rstrip("Z").partition(".")
    try:
        when = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    digits = "".join(ch for ch in frac if ch.isdigit())[:6]
    micro = int(digits.ljust(6, "0")) if digits else 0
    return when.replace(microsecond=micro, tzinfo=datetime.timezone.utc).timestamp()


def describe(info: dict[str, Any], runtime: str = RUNTIME) -> dict[str, Any]:
    """The `container` object of the server (DESIGN.md's `serve.container`)."""
    config = info.get("Config") or {}
    labels = config.get("Labels") or {}
    policy = ((info.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name") or "no"
    return {"runtime": runtime, "id": str(info.get("Id") or ""),
            "name": str(info.get("Name") or "").lstrip("/"),
            "image": str(config.get("Image") or info.get("Image") or ""),
            "started_at": started_at(info), "restart_policy": policy,
            "compose_project": labels.get(_COMPOSE_PROJECT) or None,
            "compose_service": labels.get(_COMPOSE_SERVICE) or None}


def environment(info: dict[str, Any]) -> dict[str, str]:
    """The container's environment as configured (`Config.Env`)."""
    out = {}
    for item in (info.get("Config") or {}).get("Env") or []:
        key, sep, value = str(item).partition("=")
        if sep:
            out[key] = value
    return out


def restart_note(container: dict[str, Any]) -> str:
    """Why the daemon would start the server again by itself, or ""."""
    policy = container.get("restart_policy")
    if policy in _FIGHTING_POLICIES:
        return (f"its container {container['name']} has restart policy {policy}: the "
                f"{container['runtime']} daemon starts it again by itself")
    return ""


def pinned_one(ref: str, server_entry: Callable[[list[str]], bool], runtime: str = RUNTIME
               ) -> list[tuple[dict[str, Any], list[str], bool]]:
    """`serve.container`: that container (by name or id), when it runs a vLLM server as its
    main process; else ContainersUnavailable saying why, in one line."""
    running = running_ids(runtime)  # raises the socket's one line first
    found = inspect([ref], runtime) if running else []
    info = found[0] if found else None
    if info is None or not (info.get("State") or {}).get("Running") or \
            str(info.get("Id") or "") not in running:
        state = "is not running" if info is not None or not running else "does not exist"
        raise ContainersUnavailable(f"the container {ref} (serve.container) {state} "
                                    f"({runtime} ps)")
    found_server = server_process(info, server_entry)
    if found_server is None:
        raise ContainersUnavailable(f"the container {ref} (serve.container) does not run a "
                                    "vLLM server as its main process: "
                                    f"{' '.join(main_argv(info))[:200]}")
    return [(info, found_server[0], True)]


def candidates(words: list[str], port: int | None,
               server_entry: Callable[[list[str]], bool],
               argv_port: Callable[[list[str]], int],
               runtime: str = RUNTIME) -> list[tuple[dict[str, Any], list[str], bool]]:
    """The running containers whose main process is a vLLM server, as (inspect, server argv,
    matches `words`): with a port, those that answer on it on the host; else the matching
    ones. Oldest first. Raises ContainersUnavailable (one line) when the CLI cannot look."""
    found = []
    for info in inspect(running_ids(runtime), runtime):
        if not (info.get("State") or {}).get("Running"):
            continue
        found_server = server_process(info, server_entry)
        if found_server is None:
            continue
        argv = found_server[0]
        matched = matches(argv, words)
        if port:
            if host_port(info, argv_port(argv)) != port:
                continue
        elif not matched:
            continue
        found.append((info, argv, matched))
    found.sort(key=lambda item: started_at(item[0]) or 0.0)
    return found


def _server_pid(table: Any, info: dict[str, Any], argv: list[str],
                server_entry: Callable[[list[str]], bool]) -> int:
    """The host pid of the server (`server_process`): the container's main process, or its
    child that is the server entry point (behind an init or a shell wrapper)."""
    found = server_process(info, server_entry)
    return found[1] if found else int((info.get("State") or {}).get("Pid") or 0)


def serve_facts(table: Any, info: dict[str, Any], argv: list[str], matched: bool,
                server_entry: Callable[[list[str]], bool], runtime: str = RUNTIME
                ) -> dict[str, Any]:
    """The server in discovery's shape (`discover._serve`). Its paths are the container's: no
    interpreter, working directory or log file is read at the host path of the same name (the
    log is the container's output, `docker logs`)."""
    pid = _server_pid(table, info, argv, server_entry)
    container = describe(info, runtime)
    comm, ppid, start = table.procs.get(pid, ("", 0, 0))
    start_time = table.start_time(pid) if pid in table.procs else container["started_at"]
    return {
        "pid": pid, "ppid": ppid, "comm": comm, "start": start, "start_time": start_time,
        "uid": table.uid, "argv": argv,
        "cwd": str((info.get("Config") or {}).get("WorkingDir") or "/"), "exe": None,
        "python": None, "python_from": f"inside the container {container['name']}",
        "environ": environment(info), "stdout": None, "stderr": None, "log": None,
        "children": table.tree(pid) if pid in table.procs else [], "matched": matched,
        "holds_port": True, "supervisor": restart_note(container),
        "parent": {"pid": ppid, "comm": table.comm(ppid), "argv": []},
        "container": container,
    }


def find(facts: dict[str, Any], table: Any, words: list[str], port: int | None,
         server_entry: Callable[[list[str]], bool], argv_port: Callable[[list[str]], int],
         runtime: str = RUNTIME, pinned: str = "") -> dict[str, Any]:
    """Discovery's `facts` with the container's server in `serves` when one qualifies (the
    `pinned` one alone, when set); when the CLI cannot look, or the pinned container is no
    server, with `containers_problem` (the one line) instead."""
    try:
        found = pinned_one(pinned, server_entry, runtime) if pinned else \
            candidates(words, port, server_entry, argv_port, runtime)
    except ContainersUnavailable as exc:
        return {**facts, "containers_problem": str(exc),
                "containers_unreachable": exc.unreachable}
    if not found:
        return facts
    info, argv, matched = found[0]
    serves = [serve_facts(table, info, argv, matched, server_entry, runtime)]
    for other, other_argv, _matched in found[1:]:
        described = describe(other, runtime)
        serves.append({"pid": int((other.get("State") or {}).get("Pid") or 0), "ppid": 0,
                       "comm": "", "start": 0, "argv": other_argv[:40],
                       "start_time": described["started_at"], "container": described})
    return {**facts, "serves": serves}


def _sort_key(line: bytes) -> bytes:
    """A `--timestamps` line's stamp in a form that sorts as bytes: docker trims the trailing
    zeros of the nanoseconds, so the fraction is padded to nine digits."""
    stamp = line.split(b" ", 1)[0]
    head, _, frac = stamp.rstrip(b"Z").partition(b".")
    return head + b"." + frac.ljust(9, b"0")


def _unstamped(line: bytes) -> bytes:
    stamp, sep, rest = line.partition(b" ")
    return rest if sep and stamp[:1].isdigit() and stamp.endswith(b"Z") else line


def export_log(ref: str, since: float | None, runtime: str = RUNTIME,
               keep_stamps: bool = False) -> tuple[str | None, str]:
    """The container's output since `since` (its current start) as one temporary file, the
    stdout and stderr lines (the CLI hands them back apart) in the order of their stamps, the
    stamps dropped (kept with `keep_stamps`): (its path, "") for the caller to read and
    remove, or (None, why)."""
    argv = [runtime, "logs", "--timestamps"]
    if since is not None:
        argv += ["--since", f"{since:.6f}"]
    names = []
    try:
        for part in ("out", "err", "merged"):
            fd, name = tempfile.mkstemp(prefix=f"vllm-console-log-{part}-")
            os.close(fd)
            names.append(name)
        with open(names[0], "wb") as out, open(names[1], "wb") as err:
            try:
                done = subprocess.run([*argv, ref], stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=err, timeout=120, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return _removed(names, None), f"`{runtime} logs {ref}` failed: {exc}"
        if done.returncode != 0:
            with open(names[1], "rb") as err_in:
                why = " ".join(err_in.read(600).decode("utf-8", "replace").split())
            return _removed(names, None), f"`{runtime} logs {ref}` exited " \
                                         f"{done.returncode}: {why}"
        with open(names[0], "rb") as a, open(names[1], "rb") as b, \
                open(names[2], "wb") as merged:
            for line in heapq.merge(a, b, key=_sort_key):
                merged.write(line if keep_stamps else _unstamped(line))
        return _removed(names[:2], names[2]), ""
    except OSError as exc:
        return _removed(names, None), f"cannot keep `{runtime} logs {ref}` in a file: {exc}"


def _removed(names: list[str], keep: str | None) -> str | None:
    for name in names:
        if name != keep:
            with contextlib.suppress(OSError):
                os.unlink(name)
    return keep


def log_excerpt(params: dict[str, Any]) -> dict[str, Any]:
    """The container's current run (`export_log`) for `status`: whole when it is at most
    `head_bytes + tail_bytes`, else its first `head_bytes` (the start-up: the engine's config)
    and its last `tail_bytes` (the recent figures), each cut at a line's end."""
    runtime = str(params.get("runtime") or RUNTIME)
    since = params.get("since")
    path, why = export_log(str(params.get("ref") or ""),
                           since if isinstance(since, (int, float)) else None, runtime)
    if path is None:
        return {"error": why}
    head_bytes = int(params.get("head_bytes") or 1 << 20)
    tail_bytes = int(params.get("tail_bytes") or 3 << 20)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            if size <= head_bytes + tail_bytes:
                head, tail = fh.read(), b""
            else:
                head = fh.read(head_bytes)
                head = head[:head.rfind(b"\n") + 1]
                fh.seek(size - tail_bytes)
                tail = fh.read()
                tail = tail[tail.find(b"\n") + 1:]
    finally:
        os.unlink(path)
    return {"head": head.decode("utf-8", "replace"), "tail": tail.decode("utf-8", "replace"),
            "size": size, "skipped": size - len(head) - len(tail)}


def main(argv: list[str]) -> int:
    """The `container-log` entry point: parameters on stdin, the answer after the marker."""
    return answer(log_excerpt(read_params()))
