"""A containerised server's restart in place: `docker restart NAME`, checked and bounded.

The container is the unit: its runtime stops its processes (SIGTERM, SIGKILL after the
timeout) and starts its command again, as it is (same id, name, mounts, network). Before
anything is stopped: this is still the container that was planned (its id, and its main
process the planned pid: not restarted meanwhile), each bind mount's source is still on the
host (else the start would fail and leave it stopped), and the port is this container's
server's. Ready: the container's new main process tree owns the port and /health and
/v1/models answer. When the new server exits and the daemon starts it again (a restart
policy), that is the daemon's restart, never reported as this one.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Callable

from ..containers import inspect
from ..procfs import (
    listen_inodes,
    listening,
    port_holders,
    read_proc,
    same_process,
    tree_pids,
)
from .launch import wait_ready
from .status import StatusFile


class ContainerFailed(Exception):
    """The container restart cannot go on (or did not come up); the message says why."""


def _state(plan: dict[str, Any]) -> dict[str, Any]:
    """The container's state now (its `docker inspect`), checked to be the planned one."""
    box = plan["container"]
    try:
        found = inspect([box["id"]], box["runtime"])
    except Exception as exc:  # the CLI's one line (no access, no daemon)
        raise ContainerFailed(f"cannot inspect the container {box['ref']}: {exc}") from None
    if not found or found[0].get("Id") != box["id"]:
        raise ContainerFailed(f"the container {box['ref']} ({box['id'][:12]}) is gone")
    return found[0]


def _main_pid(info: dict[str, Any]) -> int:
    state = info.get("State") or {}
    return int(state.get("Pid") or 0) if state.get("Running") else 0


def owner(port: int, pid: int) -> str:
    """"" when the tree of the container's main process `pid` holds the listening socket on
    `port` (or no port is known), else who does."""
    if not port:
        return ""
    holders = port_holders(port)
    if any(h.pid in tree_pids(pid) for h in holders):
        return ""
    who = ", ".join(f"pid {h.pid} ({h.comm})" for h in holders) or \
        "nobody this user can see"
    return f"port {port} is held by {who}, not by the container's server pid {pid}"


def published(info: dict[str, Any], port: int) -> bool:
    """Whether `port` on the host is this container's published binding: then the runtime
    (its proxy or NAT rule), not the server's tree, holds it, for this container alone."""
    host = info.get("HostConfig") or {}
    if host.get("NetworkMode") == "host":
        return False
    return any(str((b or {}).get("HostPort") or "") == str(port)
               for bindings in (host.get("PortBindings") or {}).values()
               for b in bindings or [])


def preflight(plan: dict[str, Any]) -> dict[str, Any]:
    """Everything that would make the restart unsound, before anything is stopped."""
    box = plan["container"]
    info = _state(plan)
    pid = _main_pid(info)
    # The planned pid is the server: the main process, or its child behind an init or a
    # shell wrapper (`containers.server_process`).
    if pid != plan.get("pid") and (not pid or plan.get("pid") not in tree_pids(pid)):
        raise ContainerFailed(f"nothing was stopped: the container {box['ref']}'s main process "
                              f"is {pid or 'not running'} now, not the planned pid "
                              f"{plan.get('pid')} (it restarted meanwhile?)")
    for mount in info.get("Mounts") or []:
        source = str(mount.get("Source") or "")
        if mount.get("Type") == "bind" and source and not os.path.exists(source):
            raise ContainerFailed(f"nothing was stopped: {source}, mounted into the container "
                                  "at " + str(mount.get("Destination")) + ", is gone: it "
                                  "would not start again")
    port = int(plan.get("port") or 0)
    if port and published(info, port):
        plan["published"] = True
        return info
    if port and listen_inodes(port) and not port_holders(port):
        # Ready means the new server owns the port: a user who cannot see who holds it
        # could never prove that, and would wait out the whole start-up for nothing.
        raise ContainerFailed(f"nothing was stopped: this user cannot see which process "
                              f"holds port {port} (the container's processes are another "
                              "user's), so the restarted server could not be verified")
    other = owner(port, pid) if port and listening(port) else ""
    if other:
        raise ContainerFailed(f"nothing was stopped: {other}")
    return info


def cli(runtime: str, *args: str, timeout: float, what: str = "") -> str:
    """Run the runtime's CLI; its stdout, or ContainerFailed with its last error line."""
    return run_tool([runtime, *args], timeout=timeout, what=what or f"{runtime} {args[0]}")


def run_tool(argv: list[str], *, timeout: float, what: str, stdin: bytes | None = None
             ) -> str:
    """Run a container tool (`docker`, `docker-compose`); its stdout, or ContainerFailed
    with what it said (`why_failed`)."""
    try:
        done = subprocess.run(argv, input=stdin if stdin is not None else b"",
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ContainerFailed(f"{what} did not finish in {timeout:g} s") from None
    except OSError as exc:
        raise ContainerFailed(f"cannot run {argv[0]}: {exc}") from None
    if done.returncode != 0:
        raise ContainerFailed(f"{what} failed: "
                              f"{why_failed(done.stderr.decode('utf-8', 'replace'))}"
                              if done.stderr.strip() else f"{what} failed: exit "
                              f"{done.returncode}")
    return done.stdout.decode("utf-8", "replace")


_NO_CAUSE = ("Run '", "See '", "Error: failed to start containers:")


def why_failed(stderr: str, limit: int = 600) -> str:
    """The cause in a tool's error output: its lines without the CLI's closing boilerplate
    ("Run 'docker create --help'", "Error: failed to start containers: ID"), which is no
    cause; the whole output when that is all there is."""
    lines = [" ".join(line.split()) for line in stderr.splitlines() if line.strip()]
    causes = [line for line in lines if not line.startswith(_NO_CAUSE)] or lines
    text = "; ".join(causes)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _restart(plan: dict[str, Any], timeout: float) -> None:
    box = plan["container"]
    cli(box["runtime"], "restart", "-t", str(int(plan["timeouts"]["term"])), box["id"],
        timeout=timeout, what=f"{box['runtime']} restart {box['ref']}")


def run(plan: dict[str, Any], status: StatusFile, left: Callable[[], bool],
        api_key: str) -> None:
    """Restart the container in place and wait until its new server is ready."""
    box = plan["container"]
    t = plan["timeouts"]
    before = preflight(plan)
    old_pid = _main_pid(before)
    status.write("stopping", f"{box['runtime']} restart {box['ref']} (its processes get "
                 f"SIGTERM, SIGKILL after {float(t['term']):g} s)", processes=[
                     {"pid": old_pid, "comm": box["ref"]}])
    status.write("term-sent", f"{box['runtime']} restart {box['ref']}")
    _restart(plan, float(t["term"]) + float(t["kill"]) + 60)
    after = _state(plan)
    pid = _main_pid(after)
    if not pid:
        again = _daemon_start(plan, 0)
        raise ContainerFailed(
            f"the container {box['ref']} is not running after {box['runtime']} restart (exit "
            f"code {(after.get('State') or {}).get('ExitCode')})" + (
                f"; the daemon started it again (pid {again}, restart policy "
                f"{box.get('restart_policy')}): that restart is the daemon's, not this one"
                if again else ""))
    if pid == old_pid:
        raise ContainerFailed(f"the container {box['ref']}'s main process is still pid {pid}: "
                              "it was not restarted")
    status.write("stopped", f"the container's old server (pid {old_pid}) is gone",
                 pids=[old_pid], killed=[])
    follow_start(plan, status, pid, left, api_key,
                 f"new server pid {pid} (the container {box['ref']} started again)")


def follow_start(plan: dict[str, Any], status: StatusFile, pid: int, left: Callable[[], bool],
                 api_key: str, launched: str, failed_note: str = "",
                 on_ready: Callable[[], None] = lambda: None) -> bool:
    """From the container's new main process `pid` to ready (its tree owns the port, the
    server answers) or a failure, written to the status file; whether it is ready."""
    box = plan["container"]
    proc = read_proc(pid)
    start = proc.start if proc is not None else 0
    status.write("launched", launched, pid=pid, start=start)

    def alive() -> bool:  # asked ten times a second: /proc, not the daemon
        return same_process(pid, start) is not None

    port = int(plan.get("port") or 0)

    def ours() -> str:
        return "" if plan.get("published") else owner(port, pid)

    t = plan["timeouts"]
    outcome, message, code = wait_ready(None, alive, None, plan.get("url") or "",
                                        float(t["startup"]), ours,
                                        api_key=api_key, left=left)
    if outcome == "ready":
        on_ready()
        status.write("ready", message, final=True, pid=pid, start=start, ok=True)
        return True
    now = _daemon_start(plan, pid) if outcome == "exited" else 0
    if now:
        message = (f"the server pid {pid} exited before it was ready, and the daemon started "
                   f"the container again (pid {now}, restart policy "
                   f"{box.get('restart_policy')}): that restart is the daemon's, not this one")
    status.write("failed", message + failed_note, final=True, pid=pid, outcome=outcome,
                 exit_status=code, ok=False)
    return False


def _daemon_start(plan: dict[str, Any], pid: int, within: float = 5.0) -> int:
    """The container's new main pid when the daemon started it again after `pid` exited (its
    restart policy: it waits 100 ms, doubling, before it does), else 0."""
    policy = str(plan["container"].get("restart_policy") or "no")
    deadline = time.monotonic() + (within if policy != "no" else 0)
    while True:
        try:
            now = _main_pid(_state(plan))
        except ContainerFailed:
            now = 0
        if (now and now != pid) or time.monotonic() >= deadline:
            return now if now != pid else 0
        time.sleep(0.2)


def wait_s(plan: dict[str, Any]) -> float:
    """The bound on the whole container restart (the step's `bounded`)."""
    t = plan["timeouts"]
    return float(t["term"]) + float(t["kill"]) + float(t["startup"]) + 360
