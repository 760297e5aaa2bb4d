"""Every vLLM server the login user can see on the host, in one list (DESIGN.md, "Several
servers on one host"), and the one rule that picks this host entry's server from it.

A server is a top-most server entry point of the login user (a bare process, a systemd
unit's too) or a running container whose main process is one (`containers`). All are listed
in one pass (the /proc table discovery already built, one `docker ps` + one `docker inspect`,
and one short `/health` request per server, all at once): never an SSH round trip per server.

The choice follows what pins it, in this order: `container`, `port` (or the `url`'s), `unit`,
`match`; among what is left, the lowest port, then the oldest start. That rule does not ask
which kind of place a server runs in, so `status`, `check`, the restart and the TUI pick the
same server, and it stays picked while the set of servers does not change.
"""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any, Callable

from . import containers
from .argv import matches
from .procfs import service_from_cgroup
from .vocabulary import argv_host, argv_port, reachable

HEALTH_TIMEOUT_S = 1.0


def rank(port: int | None, start_time: float | None) -> tuple[int, float]:
    """The order of the rule when nothing pins a server: lowest port, then oldest start."""
    return (port if port else 1 << 17, start_time if start_time is not None else 0.0)


def bare_servers(table: Any, words: list[str]) -> list[dict[str, Any]]:
    """The login user's top-most server entry points, each as a row of the list."""
    tops = [pid for pid in table.entries
            if not any(a in table.entries for a in table.ancestors(pid))]
    rows = []
    for pid in tops:
        argv = table.argvs[pid]
        port = argv_port(argv)
        unit, _user = service_from_cgroup(pid)
        rows.append({"pid": pid, "port": port, "host": reachable(argv_host(argv)),
                     "start_time": table.start_time(pid), "argv": argv[:40],
                     "matched": matches(argv, words), "container": None,
                     "unit": unit if unit and not unit.startswith(("ssh", "sshd")) else None,
                     "tree": [pid, *table.descendants(pid)]})
    return rows


def container_servers(table: Any, words: list[str],
                      server_entry: Callable[[list[str]], bool], runtime: str
                      ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], list[str]]],
                                 containers.ContainersUnavailable | None]:
    """The running containers whose main process is a vLLM server: (rows, their (inspect,
    server argv) in the same order, why the CLI cannot look or None)."""
    try:
        infos = containers.inspect(containers.running_ids(runtime), runtime)
    except containers.ContainersUnavailable as exc:
        return [], [], exc
    rows, found = [], []
    for info in infos:
        if not (info.get("State") or {}).get("Running"):
            continue
        # The one rule for a container's server (behind an init, or a shell that exec'd it
        # or runs it as its child), as the restart and a pinned container read it.
        server = containers.server_process(info, server_entry)
        if server is None:
            continue
        argv, pid = server
        described = containers.describe(info, runtime)
        pid = pid or int((info.get("State") or {}).get("Pid") or 0)
        port = containers.host_port(info, argv_port(argv)) or None
        start = table.start_time(pid) if pid in table.procs else described["started_at"]
        rows.append({"pid": pid, "port": port, "host": "127.0.0.1", "start_time": start,
                     "argv": argv[:40], "matched": matches(argv, words),
                     "container": described, "unit": None,
                     "tree": [pid, *table.descendants(pid)] if pid in table.procs else [pid]})
        found.append((info, argv))
    return rows, found, None


STARTING_GRACE_S = 300.0
"""A server younger than this whose port refuses is taken as starting: vLLM takes its port
only once its imports are done (about 20 s on a CPU build, longer on a loaded host)."""


def health_state(host: str, port: int | None, start_time: float | None,
                 now: float | None = None) -> str:
    """A server's `state` from one `/health` request (vLLM keeps `/health` open whatever
    `--api-key` says; a container's is asked at its published port):

    - `ready`: 200;
    - `failed`: 500 or 503 (vLLM's answer once its engine died);
    - `starting`: the port refuses and the process is young (`STARTING_GRACE_S`);
    - `down`: the port refuses and the process is older: nothing serves where it says;
    - `unknown`: no port on the host, no answer in time (a server still loading behind the
      port it took, or a hung one: one short request cannot tell), another answer.
    """
    if not port:
        return "unknown"
    conn = http.client.HTTPConnection(host, port, timeout=HEALTH_TIMEOUT_S)
    try:
        conn.request("GET", "/health")
        status = conn.getresponse().status
        return "ready" if status == 200 else "failed" if status in (500, 503) else "unknown"
    except ConnectionRefusedError:
        age = (now if now is not None else time.time()) - start_time \
            if start_time is not None else None
        return "starting" if age is not None and age < STARTING_GRACE_S else "down"
    except (OSError, http.client.HTTPException):
        return "unknown"
    finally:
        conn.close()


def health_states(rows: list[dict[str, Any]]) -> None:
    """Each row's `state` (`health_state`), every server asked at once: the whole pass takes
    one request's timeout at most, however many servers hang."""
    found: dict[int, str] = {}

    def ask(n: int, row: dict[str, Any]) -> None:
        found[n] = health_state(row["host"], row.get("port"), row.get("start_time"))

    threads = [threading.Thread(target=ask, args=(n, row), daemon=True)
               for n, row in enumerate(rows)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + HEALTH_TIMEOUT_S + 0.5
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    answered = dict(found)  # a thread that is still asking answers too late: unknown
    for n, row in enumerate(rows):
        row["state"] = answered.get(n, "unknown")


def choose(rows: list[dict[str, Any]], *, port: int | None, unit: str,
           container: str) -> list[dict[str, Any]]:
    """The rows that qualify under the pins, the chosen first (see the module docstring). A
    pinned port or container is the server whether or not it matches `match`."""
    if container:
        qualify = [r for r in rows if names_container(r["container"], container)]
    elif port:
        qualify = [r for r in rows if r["port"] == port]
    elif unit and any(r["unit"] == unit for r in rows):
        qualify = [r for r in rows if r["unit"] == unit]
    else:  # (a unit whose server's cgroup does not name it: `match` decides, as before)
        qualify = [r for r in rows if r["matched"]]
    return sorted(qualify, key=lambda r: rank(r["port"], r["start_time"]))


def names_container(box: dict[str, Any] | None, ref: str) -> bool:
    """Whether `ref` (`serve.container`) names the container: its name, its id or a prefix
    of the id (12 characters at least, as `docker ps` shows it)."""
    return box is not None and (ref in (box["name"], box["id"]) or
                                (len(ref) >= 12 and box["id"].startswith(ref)))


def url(host: str, port: int | None) -> str | None:
    """A server's URL as seen from the host (None without a port there)."""
    if not port:
        return None
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def key(server: dict[str, Any]) -> tuple[str, Any]:
    """Which server a row or discovery's `serves` entry is: a container by its id (its
    server may be the child of a container init, its main process the init), else the pid."""
    box = server.get("container")
    return ("container", box.get("id")) if isinstance(box, dict) else ("pid", server["pid"])


def listing(rows: list[dict[str, Any]], chosen: tuple[str, Any] | None
            ) -> list[dict[str, Any]]:
    """The `servers` list of the answer: the chosen first, then by the rule's order."""
    out = []
    for row in sorted(rows, key=lambda r: (key(r) != chosen, rank(r["port"],
                                                                  r["start_time"]))):
        box = row["container"]
        out.append({"pid": row["pid"], "port": row["port"],
                    "url": url(row["host"], row["port"]),
                    "argv": row["argv"], "container": box["name"] if box else None,
                    "container_id": box["id"] if box else None, "unit": row["unit"],
                    "state": row.get("state", "unknown"), "start_time": row["start_time"],
                    "matched": row["matched"], "chosen": key(row) == chosen,
                    "tree": row["tree"]})
    return out
