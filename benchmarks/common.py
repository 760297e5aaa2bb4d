"""What the benchmarks share: a flood writer, percentiles, CPU and memory readings, a private
sshd, and running one benchmark in a fresh process (so that its memory peak is its own)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil

from benchmarks.bench_follower import FLOODS, WRITER
from benchmarks.output import emit
from benchmarks.stamps import pct, stamp_of
from tests.sshd import Sshd, chown_to, start_sshd

ROOT = Path(__file__).resolve().parent.parent
ACCESS_LINE = FLOODS["access"]
DEBUG_LINE = FLOODS["debug"]
__all__ = ["ACCESS_LINE", "DEBUG_LINE", "WRITER", "ROOT", "chown_to", "pct", "stamp_of"]




def peak_rss_mb() -> float:
    """This process's peak resident memory so far (MiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def rss_mb(pid: int | None = None) -> float:
    try:
        return round(psutil.Process(pid).memory_info().rss / 2**20, 1)
    except psutil.Error:
        return -1.0


def cpu_s(pid: int | None = None) -> float:
    """CPU seconds (user + system) a process has used, its children excluded."""
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system


class CpuMeter:
    """% of one core a set of processes used between `start()` and `read()`."""

    def __init__(self, pids: Sequence[int | None]) -> None:
        self.pids = list(pids)
        self.t0 = 0.0
        self.c0 = 0.0

    def _total(self) -> float:
        return sum(cpu_s(p) for p in self.pids)

    def start(self) -> CpuMeter:
        self.t0, self.c0 = time.monotonic(), self._total()
        return self

    def read(self) -> float:
        wall = time.monotonic() - self.t0
        return round(100 * (self._total() - self.c0) / wall, 2) if wall > 0 else -1.0


def find_pids(needle: bytes, env_needle: bytes | None = None) -> list[int]:
    """Processes whose command line holds `needle` (and whose environment holds `env_needle`:
    the console's host helpers carry their arguments there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "cmdline").read_bytes():
                continue
            if env_needle is not None and env_needle not in (entry / "environ").read_bytes():
                continue
        except OSError:
            continue
        found.append(int(entry.name))
    return found


def peer_python(venv: Path, requirement: str, module: str) -> Path:
    """The interpreter of a peer tool's own venv (its pins must not touch the project's),
    made with the project's base Python and `pip install requirement` when `module` does not
    import there yet; reused after."""
    python = venv / "bin" / "python"
    check = [str(python), "-c", f"import {module}"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True,
                   capture_output=True)
    result = subprocess.run([str(python), "-m", "pip", "install", "-q", requirement],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"pip install {requirement} failed: "
                           f"{result.stderr.strip()[-300:]}")
    return python


@contextlib.contextmanager
def private_sshd() -> Iterator[Sshd]:
    """A real OpenSSH sshd on loopback (as the integration tests start it), removed after."""
    sshd = start_sshd()
    try:
        yield sshd
    finally:
        sshd.kill()
        shutil.rmtree(sshd.directory, ignore_errors=True)


def writer_argv(path: Path, rate: float, seconds: float, line: str = ACCESS_LINE) -> list[str]:
    """A process that appends stamped lines (`... n=I t=NS`) to `path` at `rate` lines/s for
    `seconds`, then prints how many it wrote and how long it took."""
    return [sys.executable, "-c", WRITER, str(path), str(rate), str(seconds), line]


def private_env(tmp: Path) -> dict[str, str]:
    """An environment whose XDG folders are throwaway: a benchmark never touches the person's
    remembered theme or exports."""
    env = dict(os.environ)
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        path = tmp / name.lower()
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    return env


def run_json(module: str, args: Sequence[str], timeout: float) -> dict:
    """Run `python -m benchmarks.MODULE ARGS --json` in a fresh process with private XDG
    folders; its last stdout line is the result. A failure comes back as {"error": ...}."""
    with tempfile.TemporaryDirectory(prefix="vc-bench-xdg-") as tmp:
        proc = subprocess.Popen([sys.executable, "-m", f"benchmarks.{module}", *args, "--json"],
                                cwd=ROOT, env=private_env(Path(tmp)), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.communicate()
            return {"error": f"{module} {' '.join(args)}: no result within {timeout:.0f} s"}
    lines = stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (stderr or stdout).strip().splitlines()[-6:]
        return {"error": f"{module} {' '.join(args)} exited {proc.returncode}: "
                         + " | ".join(tail)}
    try:  # the whole output (a colleague's indented JSON), else the last line
        result = json.loads(stdout)
    except ValueError:
        try:
            result = json.loads(lines[-1])
        except ValueError:
            return {"error": f"{module}: no JSON result: {lines[-1][:200]}"}
    return result if isinstance(result, dict) else {"error": f"{module}: not an object"}


def kill_tree(pid: int) -> None:
    """A benchmark process that overran, and everything it started (some of it in sessions of
    its own, like the console's local streams)."""
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=5)


def report(result: dict[str, object], as_json: bool, unit: str = "", width: int = 20) -> None:
    """A benchmark's result for its caller (`--json`: one JSON line) or for a person (each value
    followed by `unit` when all share one, the keys right-aligned in `width` columns)."""
    if as_json:
        emit(result)
    else:
        for key, value in result.items():
            print(f"{key:>{width}}: {value}{f' {unit}' if unit else ''}")
