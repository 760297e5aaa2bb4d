"""GPU readings from NVML: through the `pynvml` module when the host's Python has it, else
straight from libnvidia-ml through ctypes (no pynvml needed on the host)."""

import contextlib

from .common import MIB, GpuUnavailable


class PynvmlCalls:
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
        self.memory_v2 = getattr(pynvml, "nvmlMemory_v2", None)

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
        # The first memory call counts the driver's reservation as used (615 MiB on an idle
        # H200, driver 580); v2 does not, and is what nvidia-smi shows.
        if self.memory_v2 is not None:
            try:
                mem = self.nv.nvmlDeviceGetMemoryInfo(h, version=self.memory_v2)
                return mem.used, mem.total
            except Exception:
                self.memory_v2 = None  # a driver without it: the first call from now on
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


class CtypesCalls:
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

        class MemoryV2(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                        ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                        ("used", ctypes.c_ulonglong)]

        class ProcessInfo(ctypes.Structure):
            _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                        ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]

        self.Utilization, self.Memory, self.ProcessInfo = Utilization, Memory, ProcessInfo
        self.MemoryV2 = MemoryV2
        # NVML_STRUCT_VERSION(Memory, 2): the struct's size and the version in the top byte.
        self.memory_v2 = getattr(lib, "nvmlDeviceGetMemoryInfo_v2", None)
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
        # As PynvmlCalls.memory: v2 leaves the driver's reservation out, as nvidia-smi does.
        if self.memory_v2 is not None:
            m = self.MemoryV2()
            m.version = self.ct.sizeof(self.MemoryV2) | (2 << 24)
            if self.memory_v2(h, self.ct.byref(m)) == 0:
                return m.used, m.total
            self.memory_v2 = None
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
