"""The simulated GPUs' driver state (installed as ROOT/bin/sim_gpu.py), which the host's nvidia-smi
and the fake vLLM's CUDA platform both read, as both read the real driver.

ROOT/.sim/gpu/<pid>.json is one process's claim on device memory: counted only while that process
lives (not a zombie) and is still the process that wrote it (same start time), so a killed
EngineCore frees its memory and an orphaned one keeps holding it.

Stdlib only: nvidia-smi imports it from beside itself, vLLM loads it by path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def start_ticks(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot, /proc/PID/stat field 22); None: gone."""
    stat = _stat(pid)
    return None if stat is None else int(stat[19])


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first); None: gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def holder_alive(record: dict[str, Any]) -> bool:
    """Whether the process behind a claim still lives (and is that process)."""
    pid = int(record.get("pid", 0))
    if pid <= 0:
        return False
    # By /proc alone, not os.kill: a claim names a host pid, and a process in the simulated
    # container (a pid namespace of its own, the host's /proc mounted) signals by its own.
    stat = _stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    start = record.get("start_ticks")
    return start is None or int(stat[19]) == start


def live_holders(gpu_dir: Path) -> list[dict[str, Any]]:
    """The claims in `gpu_dir` whose process still holds them, by file name."""
    records = []
    for path in sorted(gpu_dir.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if holder_alive(record):
            records.append(record)
    return records
