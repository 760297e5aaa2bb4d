"""The one GPU reader on the host: NVML (through `pynvml` when importable, else straight from
libnvidia-ml through ctypes), else `nvidia-smi`, else none, with the reason.

The agent samples through `open_gpu_source` (a long-running `nvidia-smi -lms` loop when it comes
to that: never a process per tick); the restart step asks `gpu_holders` which processes still
hold memory before it starts the server again (a survivor holding memory makes the next start
run out of it).
"""

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time

GPU_FIELDS = ("index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,"
              "power.draw")
APP_FIELDS = "pid,used_memory,gpu_uuid"
MIB = 1024 * 1024
SMI_RESTART_S = 10.0     # at most one nvidia-smi restart this often


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


def _pdeathsig():
    """In a child: ask Linux to SIGTERM it when the agent dies (best effort)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


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
