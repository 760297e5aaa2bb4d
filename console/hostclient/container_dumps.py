"""vLLM's watchdog dumps of a server inside a container: read where they are.

The `[Watchdog]Dumped stack to PATH` lines are in the container's output (`docker logs`), and
PATH is the container's (its dump dir, e.g. `/tmp/...`): the host's file of that name is
another file or none. So the paths come from the container's current run, and the files are
read inside it by the host side's `watchdog-dumps` entry run with the container's interpreter
(`docker exec`, as the probes run).
"""

from __future__ import annotations

from typing import Any

from vllm_console.console.hostclient.container_log import read_container_log
from vllm_console.console.hostclient.discovery import ServeProcess
from vllm_console.console.hostside.watchdog import paths_in
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import Inside, python_inside, run_json


async def container_watchdog_dumps(host: Host, process: ServeProcess, *, timeout: float = 30.0
                                   ) -> tuple[list[dict[str, Any]], str]:
    """The dumps the container's current run named, as the host side's `stacks` answers them
    (`path`, `mtime`, `text` or `error`), and a note when its output could not be read."""
    container = process.container
    if container is None:
        return [], ""
    try:
        log = await read_container_log(host, container, timeout=timeout)
    except HostError as exc:
        return [], f"watchdog dumps not looked for: {exc}"
    paths = paths_in("\n".join(log.lines).encode("utf-8", "replace"))
    if not paths:
        return [], ""
    inside = Inside(container.runtime, container.ref)
    python, why = await python_inside(host, inside,
                                      process.argv[0] if process.argv else "vllm", timeout)
    if not python:
        return [{"path": p, "error": why} for p in paths], ""
    run = await run_json(host, "watchdog-dumps", python,
                         {"paths": paths, "since": process.start_time}, inside=inside,
                         timeout=timeout)
    if run.data is None:
        return [{"path": p, "error": run.error} for p in paths], ""
    return [d for d in run.data.get("watchdog") or [] if isinstance(d, dict)], ""
