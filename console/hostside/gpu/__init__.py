"""The one GPU reader on the host: NVML (`nvml`), else `nvidia-smi` (`smi`), else none, with
the reason.

The agent samples through `open_gpu_source`; the restart step asks `gpu_holders` which processes
still hold memory before it starts the server again (a survivor holding memory makes the next
start run out of it).
"""

from .common import GpuUnavailable, NoGpuSource
from .nvml import CtypesCalls, NvmlSource, PynvmlCalls
from .smi import SmiOnceSource, SmiSource


def open_gpu_source(choice, smi, interval, once=False, nvml_lib=None):
    """The best GPU source available (or the one asked for), with why better ones were not."""
    reasons = []
    if choice in ("auto", "nvml"):
        makers = [(PynvmlCalls.detail, PynvmlCalls),
                  (CtypesCalls.detail,
                   lambda: CtypesCalls((nvml_lib,)) if nvml_lib else CtypesCalls())]
        for detail, make in makers:
            try:
                source = NvmlSource(make())
                source.read()
                return source
            except GpuUnavailable as exc:
                reasons.append(str(exc))
            except Exception as exc:
                reasons.append(f"NVML ({detail}): {exc}")
    if choice in ("auto", "nvidia-smi"):
        try:
            if once:
                return SmiOnceSource(smi, "; ".join(reasons))
            return SmiSource(smi, interval, reason="; ".join(reasons))
        except GpuUnavailable as exc:
            reasons.append(str(exc))
    if choice == "none":
        reasons.append("GPU telemetry turned off")
    return NoGpuSource("; ".join(reasons) or "no GPU source")


def gpu_holders(nvidia_smi):
    """(pid -> MiB held, source) where source is `nvml` or `nvidia-smi`; (None, why) when neither
    can be asked."""
    source = open_gpu_source("auto", nvidia_smi or "nvidia-smi", 1.0, once=True)
    try:
        if source.source == "none":
            return None, f"neither NVML nor nvidia-smi answered ({source.reason})"
        _, procs, _ = source.read()
    finally:
        source.close()
    held = {}
    for proc in procs:
        held[proc["pid"]] = held.get(proc["pid"], 0) + int(proc["used_mib"] or 0)
    return held, source.source
