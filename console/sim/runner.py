"""Start and stop a simulated host's `vllm serve`: in the foreground for `vllm-console sim`, in
the background for the demo and the tests.

The server runs in a session of its own, so stopping it means signalling its process group,
which also reaches its forked EngineCore. `stop(tree)` also finds processes of the tree started
by anyone else (another launcher, an orphaned engine) by their executable and GPU claims.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

from vllm_console.console.sim.tree import SimTree


def launch_environment(tree: SimTree, extra: Mapping[str, str] | None = None
                       ) -> dict[str, str]:
    """The whole environment `start_background` gives the server (the demo records it as its
    launch, so that `r` can start it again once it exited)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHOME"}
    env.update(tree.serve_env())
    env.update(extra or {})
    return env


def start_background(tree: SimTree, *, env: Mapping[str, str] | None = None,
                     argv: list[str] | None = None) -> subprocess.Popen[bytes]:
    """Launch the fake `vllm serve` in a new session, appending its output to `tree.log`."""
    tree.log.parent.mkdir(parents=True, exist_ok=True)
    with open(tree.log, "ab") as log:
        return subprocess.Popen(argv or tree.serve_argv(), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, cwd=tree.root,
                                env=launch_environment(tree, env), start_new_session=True)


def health(tree: SimTree, timeout: float = 0.5) -> int | None:
    """HTTP status of /health, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"{tree.url}/health", timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (OSError, ValueError):
        return None


def wait_ready(tree: SimTree, proc: subprocess.Popen[bytes] | None = None,
               timeout: float = 60.0) -> bool:
    """True once /health answers 200; False on timeout or when `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health(tree) == 200:
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Running (a zombie counts as gone: its owner reaps it)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _group(pgid: int) -> list[int]:
    """Live members of process group `pgid`."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and int(stat[2]) == pgid and stat[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def tree_processes(tree: SimTree) -> list[int]:
    """Live processes of this tree: its venv's interpreter, its nvidia-smi, its GPU holders."""
    prefixes = (str(tree.root / "venv") + "/", str(tree.nvidia_smi))
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv[:2]]
        if any(w.startswith(prefixes) for w in words):
            found.add(int(entry.name))
    for path in (tree.sim_dir / "gpu").glob("*.json"):
        try:
            found.add(int(json.loads(path.read_text())["pid"]))
        except (OSError, ValueError, KeyError):
            continue
    found.discard(os.getpid())
    return sorted(pid for pid in found if _alive(pid))


def _kill(pids: Iterable[int], sig: int, group: int | None) -> None:
    """`sig` to the group and to each of `pids` outside it, once: a second SIGTERM could find
    a server past its shutdown, its handler gone, and kill it (exit -15, not 0)."""
    if group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    for pid in pids:
        stat = _stat(pid)
        if stat is None or group is not None and int(stat[2]) == group:
            continue  # gone, or the group's signal reached it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop(target: SimTree | subprocess.Popen[bytes] | int, timeout: float = 10.0) -> list[int]:
    """Stop a server and everything it started (SIGTERM, then SIGKILL after `timeout`).

    `target` is a Popen from `start_background` or the pid of a session leader (its whole
    process group is stopped, engine included), or a tree (each of its processes, wherever
    they were started from). Returns the pids that were signalled.
    """
    group: int | None = None
    if isinstance(target, SimTree):
        pids = tree_processes(target)
    else:
        leader = target.pid if isinstance(target, subprocess.Popen) else int(target)
        group = None if leader == os.getpgid(0) else leader  # never our own group
        pids = sorted(p for p in {leader, *_group(leader)} if _alive(p))

    def living() -> list[int]:
        more = _group(group) if group is not None else []
        return sorted({p for p in pids if _alive(p)} | set(more))

    _kill(pids, signal.SIGTERM, group)
    deadline = time.monotonic() + timeout
    while living() and time.monotonic() < deadline:
        time.sleep(0.05)
    if living():
        _kill(living(), signal.SIGKILL, group)
    if isinstance(target, subprocess.Popen):
        target.wait(timeout=5)
    return pids


RELAUNCH_WAIT_S = 10.0
"""After the server stops on someone else's signal, how long `vllm-console sim` waits for a
restart (the console's `r`) to relaunch it before it exits: the restart launches the new
server once the old one's GPU memory and port are free, a second or two after it exited."""


def relaunched_server(tree: SimTree, gone: int) -> int | None:
    """The tree's server that someone else launched after `gone` stopped (a restart's
    relaunch): a process of the tree's interpreter running `serve` whose parent is not one."""
    servers = {}
    for pid in tree_processes(tree):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        stat = _stat(pid)
        if pid != gone and b"serve" in argv and stat is not None:
            servers[pid] = int(stat[1])
    tops = sorted(pid for pid, ppid in servers.items() if ppid not in servers)
    return tops[0] if tops else None


def _stop_one(pid: int) -> None:
    """SIGTERM to a server this process did not start: to its group when it leads one."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid and pid != os.getpgid(0):
            os.killpg(pid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)


def run_foreground(tree: SimTree, *, out: TextIO | None = None,
                   relaunch_wait_s: float = RELAUNCH_WAIT_S) -> int:
    """Run the server until it exits or Ctrl-C/SIGTERM arrives (forwarded to the whole tree);
    return the server's exit status.

    A restart from the console stops the server and launches a new one, which is not this
    process's child: it is followed as the server from then on (Ctrl-C stops it), so that
    `sim` neither exits under a restart nor leaves the relaunched server behind."""
    out = out or sys.stdout
    proc = start_background(tree)
    current = proc.pid  # the server followed now: ours, or a restart's relaunch
    adopted = False
    stopping = False

    def forward(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        if current == proc.pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        else:
            _stop_one(current)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Outside the main thread this raises ValueError: the caller handles signals then.
        with contextlib.suppress(ValueError):
            previous[sig] = signal.signal(sig, forward)
    print(f"simulated host: {tree.root} (scenario {tree.scenario})", file=out)
    print(f"  vllm serve pid {proc.pid}; output appended to {tree.log}", file=out)
    print(f"  url {tree.url}   python {tree.python}   nvidia-smi {tree.nvidia_smi}", file=out)
    print("  Ctrl-C stops the server and its engine.", file=out, flush=True)
    rc: int | None = None
    try:
        while True:
            announced = False
            while (proc.poll() is None) if current == proc.pid else _alive(current):
                if not announced and health(tree) == 200:
                    print(f"ready: {tree.url}/health answers 200", file=out, flush=True)
                    announced = True
                time.sleep(0.5)
            rc = proc.returncode if current == proc.pid else None
            if stopping or (rc is not None and rc > 0):
                break  # stopped here, or failed on its own: no restart relaunches that
            how = f"status {rc}" if rc is not None else "its end"
            print(f"vllm serve pid {current} stopped ({how}) by another hand; waiting up to "
                  f"{relaunch_wait_s:g} s for a restart to relaunch it (Ctrl-C: leave)",
                  file=out, flush=True)
            deadline = time.monotonic() + relaunch_wait_s
            found = None
            while found is None and not stopping and time.monotonic() < deadline:
                found = relaunched_server(tree, current)
                time.sleep(0.2)
            if found is None:
                break
            current, adopted = found, True
            print(f"relaunched: following vllm serve pid {found}; Ctrl-C stops it",
                  file=out, flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stop(proc, timeout=5)
        if adopted:
            stop(tree, timeout=5)  # the relaunched server and its engine
    if rc is None:
        print(f"vllm serve pid {current} stopped", file=out, flush=True)
        return 0
    print(f"vllm serve exited with status {rc}", file=out, flush=True)
    return rc
