"""Typed, immutable views of the agent's JSON lines (`console/hostside/agent.py` writes them).

Parsing is tolerant: a field of the wrong type or missing reads as None (or empty), never raises,
so a newer or older agent degrades to "unknown" figures instead of a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Any


def _float(obj: Mapping[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _items(obj: Mapping[str, Any], key: str, kind: type | UnionType) -> tuple[Any, ...]:
    """The `kind` items of a list value (others dropped); () when the value is no list."""
    value = obj.get(key)
    return tuple(v for v in value if isinstance(v, kind)) if isinstance(value, list) else ()


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant. None: the source could not say."""

    index: int
    name: str
    uuid: str = ""
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> GpuReading:
        return cls(index=_int(obj, "index") or 0, name=_str(obj, "name"), uuid=_str(obj, "uuid"),
                   util_pct=_float(obj, "util_pct"), mem_used_mib=_float(obj, "mem_used_mib"),
                   mem_total_mib=_float(obj, "mem_total_mib"), temp_c=_float(obj, "temp_c"),
                   power_w=_float(obj, "power_w"))

    def to_json(self) -> dict[str, Any]:
        """The `gpus[]` object of `status --json`."""
        return {"index": self.index, "name": self.name, "util_pct": self.util_pct,
                "mem_used_mib": self.mem_used_mib, "mem_total_mib": self.mem_total_mib,
                "temp_c": self.temp_c, "power_w": self.power_w}


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding GPU memory (from NVML or nvidia-smi's compute apps)."""

    pid: int
    gpu: int | None
    used_mib: float | None
    container: str = ""
    """The id of the container it runs in (from its cgroup), "" for none."""

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> GpuProcess:
        return cls(pid=_int(obj, "pid") or 0, gpu=_int(obj, "gpu"),
                   used_mib=_float(obj, "used_mib"), container=_str(obj, "container"))


@dataclass(frozen=True, slots=True)
class HostStats:
    """The host as a whole: CPU busy % over the last interval, memory, load averages."""

    cpu_pct: float | None = None
    ncpu: int | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    load: tuple[float, ...] = ()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> HostStats:
        return cls(cpu_pct=_float(obj, "cpu_pct"), ncpu=_int(obj, "ncpu"),
                   mem_used_mib=_float(obj, "mem_used_mib"),
                   mem_total_mib=_float(obj, "mem_total_mib"),
                   load=tuple(float(x) for x in _items(obj, "load", int | float)))


@dataclass(frozen=True, slots=True)
class ServeProc:
    """One process of the serve tree. `comm` is the kernel's 15-character name (e.g.
    `VLLM::EngineCor`); `name` the fuller one from argv when the process renamed itself."""

    pid: int
    ppid: int
    depth: int
    comm: str
    argv: tuple[str, ...]
    state: str
    start_time: float | None
    rss_mib: float | None = None
    cpu_pct: float | None = None
    threads: int | None = None
    cwd: str | None = None
    stdout: str | None = None
    log: str | None = None
    """The serve log by the host's one rule (stdout's file, else stderr's; the server only)."""
    gpu_mem_mib: float | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], gpu_mem: Mapping[int, float]) -> ServeProc:
        pid = _int(obj, "pid") or 0
        return cls(pid=pid, ppid=_int(obj, "ppid") or 0, depth=_int(obj, "depth") or 0,
                   comm=_str(obj, "comm"), argv=_items(obj, "argv", str),
                   state=_str(obj, "state"), start_time=_float(obj, "start_time"),
                   rss_mib=_float(obj, "rss_mib"), cpu_pct=_float(obj, "cpu_pct"),
                   threads=_int(obj, "threads"), cwd=obj.get("cwd") or None,
                   stdout=obj.get("stdout") or None, log=obj.get("log") or None,
                   gpu_mem_mib=gpu_mem.get(pid))

    @property
    def name(self) -> str:
        """`VLLM::EngineCore` for a renamed engine core, else the command's base name."""
        first = self.argv[0].split(" ")[0] if self.argv else ""
        # comm is argv[0] cut to 15 characters when a process renamed itself (setproctitle).
        if first and "/" not in first and self.comm and first.startswith(self.comm):
            return first
        return self.comm

    @property
    def is_engine_core(self) -> bool:
        return "EngineCor" in self.comm or "EngineCore" in self.name

    @property
    def cmdline(self) -> str:
        return " ".join(self.argv)


@dataclass(frozen=True, slots=True)
class ServeTree:
    """The serve process (top-most match of `match`) and its descendants, root first."""

    match: tuple[str, ...] = ()
    root: int | None = None
    others: tuple[int, ...] = ()
    procs: tuple[ServeProc, ...] = ()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], gpu_mem: Mapping[int, float]) -> ServeTree:
        return cls(match=_items(obj, "match", str), root=_int(obj, "root"),
                   others=_items(obj, "others", int),
                   procs=tuple(ServeProc.from_json(p, gpu_mem) for p in _dicts(obj.get("procs"))))

    @property
    def running(self) -> bool:
        return self.root is not None

    @property
    def root_proc(self) -> ServeProc | None:
        return next((p for p in self.procs if p.pid == self.root), None)

    @property
    def shape(self) -> tuple[tuple[int, str, str, bool], ...]:
        """What makes the tree different to a person: pids, names, states, and which processes
        hold GPU memory (an EngineCore that has loaded its weights; nvidia-smi may list it a
        sample after the process itself appeared)."""
        return tuple((p.pid, p.name, p.state, p.gpu_mem_mib is not None) for p in self.procs)

    @property
    def gpu_mem_mib(self) -> float | None:
        """GPU memory the tree holds, summed (None when no process of it holds any)."""
        held = [p.gpu_mem_mib for p in self.procs if p.gpu_mem_mib is not None]
        return sum(held) if held else None


@dataclass(frozen=True, slots=True)
class AgentHello:
    """The agent's first line: who and where it is, and which GPU source it chose."""

    pid: int
    ts: float
    python: str
    hostname: str
    uid: int | None
    boot_time: float | None
    tz_offset_s: float | None
    interval_s: float
    match: tuple[str, ...]
    gpu_source: str
    gpu_detail: str
    gpu_reason: str

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AgentHello:
        return cls(pid=_int(obj, "pid") or 0, ts=_float(obj, "ts") or 0.0,
                   python=_str(obj, "python"), hostname=_str(obj, "hostname"),
                   uid=_int(obj, "uid"), boot_time=_float(obj, "boot_time"),
                   tz_offset_s=_float(obj, "tz_offset_s"),
                   interval_s=_float(obj, "interval_s") or 1.0,
                   match=_items(obj, "match", str),
                   gpu_source=_str(obj, "gpu_source") or "none",
                   gpu_detail=_str(obj, "gpu_detail"), gpu_reason=_str(obj, "gpu_reason"))


@dataclass(frozen=True, slots=True)
class AgentSample:
    """One sample: GPUs, the processes on them, the host, the serve tree. `ts` is the host's
    clock (epoch s); `received` this machine's when the line arrived. `gpu_age_s` is how old
    the GPU figures are (nvidia-smi prints on its own clock; None: no GPU source)."""

    seq: int
    ts: float
    received: float
    gpu_source: str
    gpu_reason: str
    gpu_age_s: float | None
    gpus: tuple[GpuReading, ...]
    gpu_procs: tuple[GpuProcess, ...]
    host: HostStats
    serve: ServeTree
    agent_cpu_s: float | None = None
    agent_children_cpu_s: float | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], received: float) -> AgentSample:
        procs = tuple(GpuProcess.from_json(p) for p in _dicts(obj.get("gpu_procs")))
        gpu_mem: dict[int, float] = {}
        for p in procs:
            if p.used_mib is not None:
                gpu_mem[p.pid] = gpu_mem.get(p.pid, 0.0) + p.used_mib
        host = obj.get("host")
        serve = obj.get("serve")
        agent = obj.get("agent")
        agent = agent if isinstance(agent, Mapping) else {}
        return cls(seq=_int(obj, "seq") or 0, ts=_float(obj, "ts") or received,
                   received=received, gpu_source=_str(obj, "gpu_source") or "none",
                   gpu_reason=_str(obj, "gpu_reason"), gpu_age_s=_float(obj, "gpu_age_s"),
                   gpus=tuple(GpuReading.from_json(g) for g in _dicts(obj.get("gpus"))),
                   gpu_procs=procs,
                   host=HostStats.from_json(host if isinstance(host, Mapping) else {}),
                   serve=ServeTree.from_json(serve if isinstance(serve, Mapping) else {},
                                             gpu_mem),
                   agent_cpu_s=_float(agent, "cpu_s"),
                   agent_children_cpu_s=_float(agent, "children_cpu_s"))

    def gpus_json(self) -> list[dict[str, Any]]:
        return [g.to_json() for g in self.gpus]


def split_json_lines(pending: bytes, chunk: bytes, limit: int = 4 * 1024 * 1024
                     ) -> tuple[list[bytes], bytes]:
    """Complete lines of `pending + chunk` and the unfinished rest (cut at `limit`)."""
    lines = (pending + chunk).split(b"\n")
    rest = lines.pop()
    return lines, rest[-limit:]
