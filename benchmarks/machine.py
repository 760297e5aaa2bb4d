"""What the benchmarks ran on: CPU, cores, memory, OS, and the versions that matter."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import subprocess
import time
from pathlib import Path

import psutil


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _os() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return f"{line.split('=', 1)[1].strip(chr(34))}, Linux {platform.release()}"
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _command_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) \
        else "unknown"


def busy_processes(threshold: float = 20.0, sample_s: float = 1.0) -> str:
    """Other processes using more than `threshold`% of a core (over `sample_s`): the machine
    may be shared, and its figures are lower for it."""
    procs = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            proc.cpu_percent(None)
            procs.append(proc)
    time.sleep(sample_s)
    busy = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            used = proc.cpu_percent(None)
            if used >= threshold and proc.pid != os.getpid():
                cmd = " ".join(proc.info["cmdline"] or [proc.name()])
                busy.append(f"{used:.0f}% `{cmd[:70]}`")
    return "; ".join(busy) or "none"


def describe(toolong: str = "") -> dict[str, str]:
    """One line per item, for the report."""
    load = os.getloadavg()
    return {
        "CPU": f"{_cpu_model()}, {os.cpu_count()} cores",
        "Memory": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "OS": _os(),
        "Python": platform.python_version(),
        "Textual": _version("textual"),
        "asyncssh": _version("asyncssh"),
        "OpenSSH": _command_version(["ssh", "-V"]),
        "tmux": _command_version(["tmux", "-V"]),
        "toolong": toolong or "not run",
        "Load average at start": f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        "Other processes busy at start (> 20% of a core)": busy_processes(),
    }
