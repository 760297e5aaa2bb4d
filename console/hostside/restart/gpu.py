"""Which processes hold GPU memory: NVML when the interpreter has it, else nvidia-smi.

Used after the serve tree is gone, to see that the memory it held is released before the next
start (a survivor holding memory makes the next start run out of it).
"""

from __future__ import annotations

import contextlib
import subprocess


def _nvml() -> dict[int, int] | None:
    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except Exception:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        held: dict[int, int] = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                mib = int((proc.usedGpuMemory or 0) // (1024 * 1024))
                held[int(proc.pid)] = held.get(int(proc.pid), 0) + mib
        return held
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _nvidia_smi(command: str) -> tuple[dict[int, int] | None, str]:
    argv = [command, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{command}: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip() or done.stdout.decode(
            "utf-8", "replace").strip()
        return None, f"{command} exited {done.returncode}: {why[:200]}"
    held: dict[int, int] = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            mib = int(parts[1]) if parts[1].isdigit() else 0
            held[int(parts[0])] = held.get(int(parts[0]), 0) + mib
    return held, ""


def gpu_holders(nvidia_smi: str) -> tuple[dict[int, int] | None, str]:
    """(pid -> MiB held, source) where source is `nvml` or `nvidia-smi`; (None, why) when neither
    can be asked."""
    held = _nvml()
    if held is not None:
        return held, "nvml"
    held, why = _nvidia_smi(nvidia_smi or "nvidia-smi")
    if held is not None:
        return held, "nvidia-smi"
    return None, f"neither NVML nor nvidia-smi answered ({why})"
