"""This host entry's last launch, read back for when no serve process runs.

A relaunch that failed (or a server that died) leaves nothing to discover: no process, so no
log, interpreter or model paths. The restart records every launch it makes per host entry
(`last-launch-<key>.json` on the host, see `hostside/restart/step.py`); the checks read it
back so that `check` after a failed restart judges the run that failed, from the log it wrote,
instead of asking for `--log`. A server started by hand leaves no record: the TUI keeps what it
saw of it (`seen_launch`), so that after it exits `r` can start it again all the same.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import time
from collections.abc import Mapping, Sequence
from typing import Any

from vllm_console.console.hostclient.discovery import ServeProcess, serve_port
from vllm_console.console.hostclient.launch_env import original_env
from vllm_console.console.hostside.argv import matches
from vllm_console.console.hostside.vocabulary import DEFAULT_MATCH, last_launch_file
from vllm_console.console.settings import ServeSettings
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import run_json


def last_key(entry: str) -> str:
    """The file name part of a host entry's last-launch record (entries never share one)."""
    return hashlib.sha256(entry.encode("utf-8", "surrogateescape")).hexdigest()[:16]


async def read_last_launch(host: Host, settings: ServeSettings) -> dict[str, Any]:
    """The record of this host entry's last launch ({} when there is none, it cannot be read,
    or it belongs to another entry or port, or its command line does not match `match`: a
    record is never borrowed)."""
    try:
        bundle = await host.scripts.bundle()
        run = await run_json(host, "restart", settings.python or "python3",
                             args=("last", "--dir", posixpath.dirname(bundle),
                                   "--key", last_key(host.name)), timeout=30.0)
    except HostError:
        return {}
    if run.data is None:
        return {}
    record = dict(run.data)
    port = serve_port(settings)
    argv = [str(a) for a in record.get("argv") or []]
    if record.get("entry") not in (None, host.name) or \
            (port and record.get("port") not in (None, port)) or \
            not matches(argv, (settings.match or DEFAULT_MATCH).split()):
        return {}
    return record


def seen_launch(process: ServeProcess, entry: str) -> dict[str, Any]:
    """A server this console saw running, as a last-launch record (the shape
    `hostside/restart/step.py` writes): its command line, directory, environment (without a
    trace hook), log and port. Kept on the laptop only, for as long as the session lasts."""
    return {
        "entry": entry, "argv": list(process.argv), "cwd": process.cwd or "",
        "env": original_env(dict(process.environ)), "log": process.log or "",
        "url": process.url, "port": process.args.port, "pid": process.pid,
        "start": process.start_ticks, "at": process.start_time or 0.0,
        "by": f"{process.user or 'its user'}, seen running by this console",
        # Where it ran: a container's server is never started again as a host process.
        "container": {"runtime": process.container.runtime, "name": process.container.ref,
                      "id": process.container.id} if process.container else None,
    }


def launch_record(entry: str, argv: Sequence[str], *, cwd: str, env: Mapping[str, str],
                  log: str, url: str, port: int | None, pid: int, by: str) -> dict[str, Any]:
    """A launch the console made itself outside a restart (the demo's first start), in the
    shape `hostside/restart/step.py` records its relaunches."""
    return {"entry": entry, "argv": list(argv), "cwd": cwd, "env": original_env(dict(env)),
            "log": log, "url": url, "port": port, "unit": "", "user_unit": False,
            "pid": pid, "start": 0, "at": time.time(), "by": by}


async def record_launch(host: Host, record: Mapping[str, Any]) -> None:
    """Write `record` as its entry's last launch on the host, where a restart and
    `read_last_launch` look for it (private: 0600 in the helpers' 0700 directory)."""
    bundle = await host.scripts.bundle()
    path = posixpath.join(posixpath.dirname(bundle),
                          last_launch_file(last_key(str(record["entry"]))))
    await host.write_file(path, json.dumps(dict(record)).encode(), mode=0o600)
