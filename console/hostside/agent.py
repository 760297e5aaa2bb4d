"""vllm-console host agent: one long-lived sampler per host, one JSON line per sample.

Runs on the serving host with its own `python3`, standard library only (Python 3.6+), started by
the console over the SSH link. Every `--interval` seconds it writes one line to stdout:

    {"t": "sample", "v": 1, "seq": N, "ts": EPOCH, "gpu_source": "nvml|nvidia-smi|none",
     "gpu_reason": "...", "gpu_age_s": S, "gpus": [...], "gpu_procs": [...], "host": {...},
     "serve": {...}, "agent": {...}}

after a first `{"t": "hello", ...}` line (see `console/agent/samples.py` for every field).

GPU source, best first: NVML through `pynvml` when importable, NVML through ctypes
(`libnvidia-ml.so.1`), then ONE long-running `nvidia-smi --query-gpu=... -lms N` child read as it
prints (plus one for `--query-compute-apps`), else none, with the reason. Nothing is spawned per
tick. The serve process tree is tracked from /proc (the login user's processes only).

It stops on SIGTERM/SIGINT/SIGHUP, when stdout goes away, when its parent goes away, and at EOF of
stdin when stdin is a pipe or socket (under the console's stream wrapper stdin is /dev/null and the
wrapper ends the process group instead).
"""

import argparse
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

PROTOCOL = 1
GPU_FIELDS = ("index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,"
              "power.draw")
APP_FIELDS = "pid,used_memory,gpu_uuid"
MIB = 1024 * 1024
ARGV_CAP = 8192          # bytes of one process's command line sent per sample
RECHECK_NEW_S = 5.0      # re-read the command line of processes this young (they may exec)
RESCAN_S = 10.0          # re-read every own process's command line this often
SMI_RESTART_S = 10.0     # at most one nvidia-smi restart this often

_stop = threading.Event()


# ---------------------------------------------------------------------------------------------
# small helpers

def _read(path, limit=65536):
    """A /proc file's bytes (chunked, at most `limit`), or None when it is gone or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        parts = []
        size = 0
        while size < limit:
            chunk = os.read(fd, min(65536, limit - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def _number(text):
    """A value from nvidia-smi's CSV: a float, or None for `[N/A]`, `[Not Supported]`, junk."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if abs(value) < float("inf") else None  # NaN and inf are no figures


def _round(value, digits=1):
    return None if value is None else round(value, digits)


def matches(argv, words):
    """True when each word is a substring of a distinct argv element, in that order."""
    if not words:
        return False
    i = 0
    for element in argv:
        if words[i] in element:
            i += 1
            if i == len(words):
                return True
    return False


def _pdeathsig():
    """In a child: ask Linux to SIGTERM it when the agent dies (best effort)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


# ---------------------------------------------------------------------------------------------
# GPU sources

class GpuUnavailable(Exception):
    """This GPU source cannot be used; the message says why."""


def parse_gpu_row(line):
    """One `--query-gpu=GPU_FIELDS` CSV row as a dict, or None when it is not one."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < 8:
        return None
    try:
        index = int(parts[0])
    except ValueError:
        return None
    # A GPU name could hold a comma: the name is everything between uuid and the last 5 values.
    name = ",".join(parts[2:len(parts) - 5]).strip()
    util, used, total, temp, power = (_number(p) for p in parts[-5:])
    return {"index": index, "uuid": parts[1], "name": name, "util_pct": _round(util),
            "mem_used_mib": _round(used), "mem_total_mib": _round(total),
            "temp_c": _round(temp), "power_w": _round(power)}


def parse_app_row(line):
    """One `--query-compute-apps=APP_FIELDS` CSV row as a dict, or None when it is not one."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < 3:
        return None
    try:
        pid = int(parts[0])
    except ValueError:
        return None
    return {"pid": pid, "used_mib": _round(_number(parts[1])), "gpu_uuid": parts[2]}


class _PynvmlCalls:
    """NVML through the `pynvml` module (nvidia-ml-py)."""

    detail = "pynvml"

    def __init__(self):
        try:
            import pynvml
        except Exception as exc:
            raise GpuUnavailable(f"pynvml not importable ({type(exc).__name__})") from None
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            raise GpuUnavailable(f"pynvml: nvmlInit failed: {exc}") from None
        self.nv = pynvml

    def count(self):
        return self.nv.nvmlDeviceGetCount()

    def handle(self, index):
        return self.nv.nvmlDeviceGetHandleByIndex(index)

    def text(self, value):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    def name(self, h):
        return self.text(self.nv.nvmlDeviceGetName(h))

    def uuid(self, h):
        return self.text(self.nv.nvmlDeviceGetUUID(h))

    def util(self, h):
        return self.nv.nvmlDeviceGetUtilizationRates(h).gpu

    def memory(self, h):
        mem = self.nv.nvmlDeviceGetMemoryInfo(h)
        return mem.used, mem.total

    def temp(self, h):
        return self.nv.nvmlDeviceGetTemperature(h, 0)  # NVML_TEMPERATURE_GPU

    def power_mw(self, h):
        return self.nv.nvmlDeviceGetPowerUsage(h)

    def procs(self, h):
        return [(p.pid, p.usedGpuMemory) for p in self.nv.nvmlDeviceGetComputeRunningProcesses(h)]

    def close(self):
        with contextlib.suppress(Exception):
            self.nv.nvmlShutdown()


class _CtypesCalls:
    """NVML straight from libnvidia-ml.so.1 through ctypes (no pynvml needed on the host)."""

    detail = "libnvidia-ml via ctypes"
    NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF

    def __init__(self, names=("libnvidia-ml.so.1", "libnvidia-ml.so")):
        import ctypes

        self.ct = ctypes
        lib = None
        for name in names:
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise GpuUnavailable(f"{names[0]} not found")
        self.lib = lib
        lib.nvmlErrorString.restype = ctypes.c_char_p

        class Utilization(ctypes.Structure):
            _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

        class Memory(ctypes.Structure):
            _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                        ("used", ctypes.c_ulonglong)]

        class ProcessInfo(ctypes.Structure):
            _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                        ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]

        self.Utilization, self.Memory, self.ProcessInfo = Utilization, Memory, ProcessInfo
        try:
            self._call(("nvmlInit_v2", "nvmlInit"))
        except RuntimeError as exc:
            raise GpuUnavailable(f"NVML: {exc}") from None

    def _fn(self, *names):
        for name in names:
            fn = getattr(self.lib, name, None)
            if fn is not None:
                return fn
        raise RuntimeError(f"{names[0]} missing from libnvidia-ml")

    def _check(self, ret, what):
        if ret != 0:
            message = self.lib.nvmlErrorString(ret) or b"error"
            raise RuntimeError("{}: {}".format(what, message.decode("utf-8", "replace")))

    def _call(self, names, *args):
        """Call the first of `names` (newest symbol first) the library has; raise on error."""
        self._check(self._fn(*names)(*args), names[0])

    def count(self):
        n = self.ct.c_uint()
        self._call(("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"), self.ct.byref(n))
        return n.value

    def handle(self, index):
        h = self.ct.c_void_p()
        self._call(("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
                   self.ct.c_uint(index), self.ct.byref(h))
        return h

    def _string(self, fn_name, h):
        buf = self.ct.create_string_buffer(96)
        self._call((fn_name,), h, buf, self.ct.c_uint(96))
        return buf.value.decode("utf-8", "replace")

    def name(self, h):
        return self._string("nvmlDeviceGetName", h)

    def uuid(self, h):
        return self._string("nvmlDeviceGetUUID", h)

    def util(self, h):
        u = self.Utilization()
        self._call(("nvmlDeviceGetUtilizationRates",), h, self.ct.byref(u))
        return u.gpu

    def memory(self, h):
        m = self.Memory()
        self._call(("nvmlDeviceGetMemoryInfo",), h, self.ct.byref(m))
        return m.used, m.total

    def temp(self, h):
        t = self.ct.c_uint()
        self._call(("nvmlDeviceGetTemperature",), h, self.ct.c_int(0), self.ct.byref(t))
        return t.value

    def power_mw(self, h):
        p = self.ct.c_uint()
        self._call(("nvmlDeviceGetPowerUsage",), h, self.ct.byref(p))
        return p.value

    def procs(self, h):
        fn = self._fn("nvmlDeviceGetComputeRunningProcesses_v3",
                      "nvmlDeviceGetComputeRunningProcesses_v2")
        count = self.ct.c_uint(0)
        ret = fn(h, self.ct.byref(count), None)
        if ret == 0:
            return []
        if ret != 7:  # NVML_ERROR_INSUFFICIENT_SIZE
            self._check(ret, "nvmlDeviceGetComputeRunningProcesses")
        count.value = count.value * 2 + 5
        array = (self.ProcessInfo * count.value)()
        self._check(fn(h, self.ct.byref(count), array), "nvmlDeviceGetComputeRunningProcesses")
        out = []
        for i in range(count.value):
            used = array[i].usedGpuMemory
            out.append((array[i].pid, None if used == self.NOT_AVAILABLE else used))
        return out

    def close(self):
        with contextlib.suppress(Exception):
            self._fn("nvmlShutdown")()


class NvmlSource:
    """GPU readings from NVML, one call per field per GPU per sample (microseconds each)."""

    source = "nvml"

    def __init__(self, calls):
        self.calls = calls
        self.detail = calls.detail
        self.reason = ""
        try:
            self.handles = [calls.handle(i) for i in range(calls.count())]
            self.names = [self._try(calls.name, h) or "" for h in self.handles]
            self.uuids = [self._try(calls.uuid, h) or "" for h in self.handles]
        except Exception as exc:
            calls.close()
            raise GpuUnavailable(f"NVML ({calls.detail}): {exc}") from None
        if not self.handles:
            calls.close()
            raise GpuUnavailable(f"NVML ({calls.detail}): no GPU")
        try:
            calls.memory(self.handles[0])  # a source that cannot say this says nothing useful
        except Exception as exc:
            calls.close()
            raise GpuUnavailable(f"NVML ({calls.detail}): {exc}") from None

    @staticmethod
    def _try(fn, *args):
        try:
            return fn(*args)
        except Exception:
            return None

    def read(self):
        gpus, procs = [], []
        c = self.calls
        for index, h in enumerate(self.handles):
            mem = self._try(c.memory, h)
            power = self._try(c.power_mw, h)
            util = self._try(c.util, h)
            temp = self._try(c.temp, h)
            gpus.append({
                "index": index, "uuid": self.uuids[index], "name": self.names[index],
                "util_pct": None if util is None else float(util),
                "mem_used_mib": None if mem is None else round(mem[0] / MIB, 1),
                "mem_total_mib": None if mem is None else round(mem[1] / MIB, 1),
                "temp_c": None if temp is None else float(temp),
                "power_w": None if power is None else round(power / 1000.0, 1),
            })
            for pid, used in self._try(c.procs, h) or []:
                procs.append({"pid": int(pid), "gpu": index,
                              "used_mib": None if used is None else round(used / MIB, 1)})
        return gpus, procs, 0.0

    def children(self):
        return []

    def close(self):
        self.calls.close()


class _LoopReader:
    """One long-running `nvidia-smi ... -lms N` child, read in chunks by a thread."""

    def __init__(self, argv, on_line):
        self.argv = argv
        self.on_line = on_line
        self.messages = []      # lines that were not data (errors, notices), last few
        self.exited = None      # exit status once the child ended
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, preexec_fn=_pdeathsig)
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        fd = self.proc.stdout.fileno()
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()[-65536:]
            for raw in lines:
                line = raw.decode("utf-8", "replace").strip()
                if line and not self.on_line(line):
                    self.messages = (self.messages + [line[:300]])[-5:]
        self.exited = self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.terminate()
                self.proc.wait(2)
            except Exception:
                try:
                    self.proc.kill()
                    self.proc.wait(2)
                except Exception:
                    pass
        with contextlib.suppress(Exception):
            self.proc.stdout.close()


class SmiSource:
    """GPU readings from one long-running `nvidia-smi --query-gpu=... -lms N` (and one for the
    compute apps), parsed as they print: never a process per tick."""

    source = "nvidia-smi"

    def __init__(self, smi, interval, first_timeout=None, reason=""):
        self.path = shutil.which(smi) if os.sep not in smi else smi
        if not self.path or not os.access(self.path, os.X_OK):
            raise GpuUnavailable(f"nvidia-smi not found ({smi})")
        self.detail = self.path
        self.reason = reason
        self.ms = max(100, int(interval * 1000))
        self.interval = interval
        self.lock = threading.Lock()
        self.rows = {}
        self.expected = None
        self.latest = None
        self.latest_t = 0.0
        self.burst = []
        self.burst_t = 0.0
        self.last_app_t = 0.0
        self.restarted_t = time.monotonic()
        self.gpu_loop = None
        self.app_loop = None
        self._start()
        deadline = time.monotonic() + (first_timeout or max(5.0, 3 * interval))
        while time.monotonic() < deadline and self.latest is None:
            if self.gpu_loop.exited is not None:
                break
            time.sleep(0.02)
        if self.latest is None:
            why = "; ".join(self.gpu_loop.messages) or (
                f"exit {self.gpu_loop.exited}" if self.gpu_loop.exited is not None
                else "no output")
            self.close()
            raise GpuUnavailable(f"nvidia-smi: {why}")

    def _start(self):
        common = ["--format=csv,noheader,nounits", "-lms", str(self.ms)]
        self.gpu_loop = _LoopReader([self.path, "--query-gpu=" + GPU_FIELDS] + common,
                                    self._gpu_line)
        self.app_loop = _LoopReader([self.path, "--query-compute-apps=" + APP_FIELDS] + common,
                                    self._app_line)

    def _gpu_line(self, line):
        row = parse_gpu_row(line)
        if row is None:
            return False
        with self.lock:
            # A sample is one row per GPU; an index seen again starts the next sample.
            if row["index"] in self.rows:
                self._publish()
            self.rows[row["index"]] = row
            if self.expected is not None and len(self.rows) >= self.expected:
                self._publish()
        return True

    def _publish(self):
        self.expected = len(self.rows)
        self.latest = [self.rows[k] for k in sorted(self.rows)]
        self.latest_t = time.monotonic()
        self.rows = {}

    def _app_line(self, line):
        row = parse_app_row(line)
        if row is None:
            return False
        now = time.monotonic()
        with self.lock:
            # The apps of one sample come out together; a pause starts the next sample.
            if now - self.last_app_t > min(0.5 * self.interval, 0.25):
                self.burst = []
                self.burst_t = now
            self.burst.append(row)
            self.last_app_t = now
        return True

    def read(self):
        now = time.monotonic()
        self._revive(now)
        with self.lock:
            gpus = [dict(g) for g in self.latest or []]
            age = now - self.latest_t
            fresh_apps = now - self.last_app_t <= 1.5 * self.interval + 0.25
            apps = list(self.burst) if fresh_apps else []
        by_uuid = {g["uuid"]: g["index"] for g in gpus}
        procs = [{"pid": a["pid"], "gpu": by_uuid.get(a["gpu_uuid"]), "used_mib": a["used_mib"]}
                 for a in apps]
        return gpus, procs, round(age, 2)

    def _revive(self, now):
        """Restart a loop child that died (driver reset, killed), at most every few seconds."""
        for name in ("gpu_loop", "app_loop"):
            loop = getattr(self, name)
            if loop.exited is None or now - self.restarted_t < SMI_RESTART_S:
                continue
            self.restarted_t = now
            self.reason = "nvidia-smi exited ({}), restarted".format(
                "; ".join(loop.messages) or f"exit {loop.exited}")
            loop.close()
            fields = GPU_FIELDS if name == "gpu_loop" else APP_FIELDS
            query = "--query-gpu=" if name == "gpu_loop" else "--query-compute-apps="
            handler = self._gpu_line if name == "gpu_loop" else self._app_line
            setattr(self, name, _LoopReader(
                [self.path, query + fields, "--format=csv,noheader,nounits", "-lms",
                 str(self.ms)], handler))

    def children(self):
        return [loop.proc.pid for loop in (self.gpu_loop, self.app_loop)
                if loop is not None and loop.proc.poll() is None]

    def close(self):
        for loop in (self.gpu_loop, self.app_loop):
            if loop is not None:
                loop.close()


class SmiOnceSource:
    """`--once`: one `nvidia-smi` run per query (a one-shot status needs no loop)."""

    source = "nvidia-smi"

    def __init__(self, smi, reason=""):
        self.path = shutil.which(smi) if os.sep not in smi else smi
        if not self.path or not os.access(self.path, os.X_OK):
            raise GpuUnavailable(f"nvidia-smi not found ({smi})")
        self.detail = self.path
        self.reason = reason
        out, status = self._run("--query-gpu=" + GPU_FIELDS)
        self.gpus = [r for r in (parse_gpu_row(x) for x in out) if r is not None]
        if not self.gpus:
            raise GpuUnavailable("nvidia-smi: {}".format(
                "; ".join(out)[:300] or f"exit {status}"))
        apps, _ = self._run("--query-compute-apps=" + APP_FIELDS)
        by_uuid = {g["uuid"]: g["index"] for g in self.gpus}
        self.procs = [{"pid": a["pid"], "gpu": by_uuid.get(a["gpu_uuid"]),
                       "used_mib": a["used_mib"]}
                      for a in (parse_app_row(x) for x in apps) if a is not None]

    def _run(self, query):
        try:
            proc = subprocess.Popen([self.path, query, "--format=csv,noheader,nounits"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            out, _ = proc.communicate(timeout=20)
        except Exception as exc:
            return [str(exc)], -1
        lines = [x.strip() for x in out.decode("utf-8", "replace").splitlines() if x.strip()]
        return lines, proc.returncode

    def read(self):
        return self.gpus, self.procs, 0.0

    def children(self):
        return []

    def close(self):
        pass


class NoGpuSource:
    source = "none"
    detail = ""

    def __init__(self, reason):
        self.reason = reason

    def read(self):
        return [], [], None

    def children(self):
        return []

    def close(self):
        pass


def open_gpu_source(choice, smi, interval, once=False, nvml_lib=None):
    """The best GPU source available (or the one asked for), with why better ones were not."""
    reasons = []
    if choice in ("auto", "nvml"):
        makers = [(_PynvmlCalls.detail, _PynvmlCalls),
                  (_CtypesCalls.detail,
                   lambda: _CtypesCalls((nvml_lib,)) if nvml_lib else _CtypesCalls())]
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


# ---------------------------------------------------------------------------------------------
# host figures

class HostStatsReader:
    """CPU % (from /proc/stat deltas), memory (/proc/meminfo) and load."""

    def __init__(self):
        self.prev = self._cpu_times()

    @staticmethod
    def _cpu_times():
        data = _read("/proc/stat", 4096) or b""
        first = data.split(b"\n", 1)[0].split()
        if not first or first[0] != b"cpu":
            return None
        values = [int(v) for v in first[1:9]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        return sum(values), idle

    def read(self):
        now = self._cpu_times()
        cpu = None
        if now is not None and self.prev is not None and now[0] > self.prev[0]:
            total, idle = now[0] - self.prev[0], now[1] - self.prev[1]
            cpu = round(100.0 * (total - idle) / total, 1)
        self.prev = now
        mem = {}
        for line in (_read("/proc/meminfo", 16384) or b"").split(b"\n"):
            key, _, rest = line.partition(b":")
            if key in (b"MemTotal", b"MemAvailable"):
                mem[key] = int(rest.split()[0]) / 1024.0
        total_mib = mem.get(b"MemTotal")
        avail_mib = mem.get(b"MemAvailable")
        try:
            load = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            load = None
        return {"cpu_pct": cpu, "ncpu": os.cpu_count(),
                "mem_used_mib": (round(total_mib - avail_mib, 1)
                                 if total_mib is not None and avail_mib is not None else None),
                "mem_total_mib": None if total_mib is None else round(total_mib, 1),
                "load": load}


# ---------------------------------------------------------------------------------------------
# the serve process tree

def boot_time():
    for line in (_read("/proc/stat") or b"").split(b"\n"):
        if line.startswith(b"btime "):
            return int(line.split()[1])
    return 0


def read_stat(pid):
    """The parts of /proc/PID/stat used here, or None when the process is gone."""
    data = _read(f"/proc/{pid}/stat", 4096)
    if not data:
        return None
    open_, close = data.find(b"("), data.rfind(b")")
    if open_ < 0 or close < 0:
        return None
    fields = data[close + 2:].split()
    if len(fields) < 22:
        return None
    return {"comm": data[open_ + 1:close].decode("utf-8", "replace"),
            "state": fields[0].decode("ascii", "replace"), "ppid": int(fields[1]),
            "cpu_ticks": int(fields[11]) + int(fields[12]), "threads": int(fields[17]),
            "start_ticks": int(fields[19]), "rss_pages": int(fields[21])}


def read_argv(pid):
    data = _read(f"/proc/{pid}/cmdline", ARGV_CAP)
    if data is None:
        return None
    return [a.decode("utf-8", "replace") for a in data.rstrip(b"\0").split(b"\0")] if data else []


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


class _Proc:
    __slots__ = ("own", "ppid", "argv", "matched", "first_seen", "start_ticks", "comm")

    def __init__(self, own):
        self.own = own
        self.ppid = 0
        self.argv = []
        self.matched = False
        self.first_seen = time.monotonic()
        self.start_ticks = 0
        self.comm = ""


class ServeTracker:
    """Finds the serve process (top-most match of the login user's processes) and its
    descendants each tick, caching what does not change so a tick stays cheap."""

    def __init__(self, words, uid, exclude):
        self.words = words
        self.uid = uid
        self.exclude = set(exclude)
        self.me = os.getpid()
        # The directory the bundle was installed in (sys.argv[0] is the bundle).
        self.helper_dir = os.path.dirname(os.path.abspath(sys.argv[0])) + os.sep
        self.known = {}
        self.last_rescan = time.monotonic()
        self.clk = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.btime = boot_time()
        self.page_mib = (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096) / MIB
        self.prev_cpu = {}
        self.prev_t = time.monotonic()

    def _learn(self, pid, info):
        st = read_stat(pid)
        argv = read_argv(pid)
        if st is None or argv is None:
            return False
        info.ppid, info.start_ticks, info.comm = st["ppid"], st["start_ticks"], st["comm"]
        info.argv = argv
        info.matched = (pid not in self.exclude and info.ppid != self.me
                        and not self._helper(argv) and matches(argv, self.words))
        return True

    def _helper(self, argv):
        """A console helper (this agent, a log follower, a probe: run from a bundle installed
        beside this one) is never the serve process, whatever its arguments say."""
        return len(argv) > 1 and argv[1].startswith(self.helper_dir)

    def scan(self):
        now = time.monotonic()
        try:
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        except OSError:
            pids = []
        alive = set(pids)
        for gone in [p for p in self.known if p not in alive]:
            del self.known[gone]
        rescan = now - self.last_rescan >= RESCAN_S
        if rescan:
            self.last_rescan = now
        for pid in pids:
            info = self.known.get(pid)
            if info is None:
                try:
                    own = os.stat(f"/proc/{pid}").st_uid == self.uid
                except OSError:
                    continue
                info = _Proc(own)
                if own and not self._learn(pid, info):
                    continue
                self.known[pid] = info
            elif info.own and (rescan or now - info.first_seen < RECHECK_NEW_S):
                self._learn(pid, info)
        return self._tree(now)

    def _is_topmost(self, pid):
        seen = 0
        parent = self.known[pid].ppid
        while parent > 1 and seen < 4096:
            info = self.known.get(parent)
            if info is None:
                return True
            if info.matched:
                return False
            parent = info.ppid
            seen += 1
        return True

    def _tree(self, now):
        roots = [p for p, i in self.known.items() if i.matched and self._is_topmost(p)]
        if not roots:
            self.prev_cpu = {}
            return {"match": self.words, "root": None, "others": [], "procs": []}
        roots.sort(key=lambda p: (self.known[p].start_ticks, p))
        root = roots[0]
        children = {}
        for pid, info in self.known.items():
            if info.own:
                children.setdefault(info.ppid, []).append(pid)
        procs = []
        cpu_now = {}
        elapsed = max(now - self.prev_t, 1e-6)
        stack = [(root, 0)]
        while stack and len(procs) < 512:
            pid, depth = stack.pop()
            st = read_stat(pid)
            if st is None:
                continue
            info = self.known[pid]
            cpu_now[pid] = st["cpu_ticks"]
            prev = self.prev_cpu.get(pid)
            cpu = (None if prev is None
                   else round(100.0 * (st["cpu_ticks"] - prev) / self.clk / elapsed, 1))
            if info.comm != st["comm"]:  # renamed itself (setproctitle): argv changed too
                info.comm, info.argv = st["comm"], read_argv(pid) or info.argv
            argv = info.argv
            entry = {"pid": pid, "ppid": st["ppid"], "depth": depth, "comm": st["comm"],
                     "argv": argv, "state": st["state"],
                     "start_time": round(self.btime + st["start_ticks"] / float(self.clk), 2),
                     "rss_mib": round(st["rss_pages"] * self.page_mib, 1),
                     "cpu_pct": cpu, "threads": st["threads"]}
            if pid == root:
                entry["cwd"] = _readlink(f"/proc/{pid}/cwd")
                entry["stdout"] = _readlink(f"/proc/{pid}/fd/1")
            procs.append(entry)
            for child in sorted(children.get(pid, ()), reverse=True):
                stack.append((child, depth + 1))
        self.prev_cpu = cpu_now
        self.prev_t = now
        return {"match": self.words, "root": root, "others": roots[1:], "procs": procs}


# ---------------------------------------------------------------------------------------------
# the loop

def _ancestors():
    out = [os.getpid()]
    pid = os.getppid()
    while pid > 1 and len(out) < 64:
        out.append(pid)
        st = read_stat(pid)
        if st is None:
            break
        pid = st["ppid"]
    return out


def _process_cpu_s(pid, clk):
    st = read_stat(pid)
    return 0.0 if st is None else st["cpu_ticks"] / float(clk)


def _watch_stdin():
    """End at EOF of stdin when it is a pipe or socket (not /dev/null, not a terminal)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return

    def watch():
        while not _stop.is_set():
            try:
                ready, _, _ = select.select([0], [], [], 1.0)
                if ready and not os.read(0, 4096):
                    break
            except OSError:
                break
        _stop.set()

    threading.Thread(target=watch, daemon=True).start()


def _emit(obj):
    line = json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n"
    try:
        sys.stdout.write(line)
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        _stop.set()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="vllm-console host agent (stdlib only)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--match", default="vllm serve", help="words that find the serve process")
    p.add_argument("--nvidia-smi", default="nvidia-smi", help="fallback GPU source")
    p.add_argument("--gpu-source", default="auto", choices=("auto", "nvml", "nvidia-smi", "none"))
    p.add_argument("--nvml-lib", default="", help="NVML library (default libnvidia-ml.so.1)")
    p.add_argument("--once", action="store_true", help="one sample, then exit")
    p.add_argument("--count", type=int, default=0, help="stop after this many samples")
    return p.parse_args(argv)


def main(argv=None):
    """The `agent` entry point; an unexpected error ends it with one `{"t": "error"}` line
    (the console shows it instead of a silent end)."""
    try:
        return run(argv)
    except Exception as exc:
        _emit({"t": "error", "msg": f"{type(exc).__name__}: {exc}"})
        return 1


def run(argv=None):
    args = parse_args(argv)
    interval = max(0.05, args.interval)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: _stop.set())
    if not args.once:  # a one-shot run is over in a moment, whatever its stdin does
        _watch_stdin()
    parent = os.getppid()
    clk = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    gpu = open_gpu_source(args.gpu_source, args.nvidia_smi, interval, once=args.once,
                          nvml_lib=args.nvml_lib)
    words = args.match.split()
    tracker = ServeTracker(words, os.getuid(), _ancestors())
    hoststats = HostStatsReader()
    local = time.localtime()
    _emit({"t": "hello", "v": PROTOCOL, "pid": os.getpid(), "ts": round(time.time(), 3),
           "python": sys.version.split()[0], "hostname": socket.gethostname(),
           "uid": os.getuid(), "boot_time": tracker.btime, "clk_tck": clk,
           "tz_offset_s": getattr(local, "tm_gmtoff", None) or -time.timezone,
           "interval_s": interval, "match": words, "gpu_source": gpu.source,
           "gpu_detail": gpu.detail, "gpu_reason": gpu.reason})
    if args.once:
        # A CPU figure needs two readings of /proc/stat.
        _stop.wait(min(0.25, interval))
    seq = 0
    next_t = time.monotonic()
    try:
        while not _stop.is_set():
            gpus, gpu_procs, age = gpu.read()
            seq += 1
            child_cpu = sum(_process_cpu_s(pid, clk) for pid in gpu.children())
            times = os.times()
            _emit({"t": "sample", "v": PROTOCOL, "seq": seq, "ts": round(time.time(), 3),
                   "gpu_source": gpu.source, "gpu_reason": gpu.reason, "gpu_age_s": age,
                   "gpus": gpus, "gpu_procs": gpu_procs, "host": hoststats.read(),
                   "serve": tracker.scan(),
                   "agent": {"cpu_s": round(times[0] + times[1], 3),
                             "children_cpu_s": round(child_cpu, 3)}})
            if args.once or (args.count and seq >= args.count) or os.getppid() != parent:
                break
            next_t += interval
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (suspended, overloaded): do not burst to catch up
                next_t = time.monotonic()
                delay = 0
            _stop.wait(delay)
    finally:
        gpu.close()
    return 0
