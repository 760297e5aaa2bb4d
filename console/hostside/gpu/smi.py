"""GPU readings from `nvidia-smi`: one long-running `--query-gpu=... -lms N` child (and one for
the compute apps) read as it prints, never a process per tick; or one run per query for a
one-shot sample."""

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time

from .common import GpuUnavailable

GPU_FIELDS = ("index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,"
              "power.draw")
APP_FIELDS = "pid,used_memory,gpu_uuid"
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


def _csv_row(line, min_fields):
    """A CSV row's stripped parts and its first one as a whole number (the GPU index, the
    pid), or None when the row is too short or starts with no number (a header, an error)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < min_fields:
        return None
    try:
        return int(parts[0]), parts
    except ValueError:
        return None


def parse_gpu_row(line):
    """One `--query-gpu=GPU_FIELDS` CSV row as a dict, or None when it is not one."""
    row = _csv_row(line, 8)
    if row is None:
        return None
    index, parts = row
    # A GPU name could hold a comma: the name is everything between uuid and the last 5 values.
    name = ",".join(parts[2:len(parts) - 5]).strip()
    util, used, total, temp, power = (_number(p) for p in parts[-5:])
    return {"index": index, "uuid": parts[1], "name": name, "util_pct": _round(util),
            "mem_used_mib": _round(used), "mem_total_mib": _round(total),
            "temp_c": _round(temp), "power_w": _round(power)}


def parse_app_row(line):
    """One `--query-compute-apps=APP_FIELDS` CSV row as a dict, or None when it is not one."""
    row = _csv_row(line, 3)
    if row is None:
        return None
    pid, parts = row
    return {"pid": pid, "used_mib": _round(_number(parts[1])), "gpu_uuid": parts[2]}


# nvidia-smi prints a reading's rows together; this long without another row ends the first.
FIRST_QUIET_S = 0.1


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
        self.last_row_t = 0.0
        self.restarted_t = time.monotonic()
        self.gpu_loop = None
        self.app_loop = None
        self._start()
        deadline = time.monotonic() + (first_timeout or max(5.0, 3 * interval))
        while time.monotonic() < deadline and self.latest is None:
            if self.gpu_loop.exited is not None:
                break
            time.sleep(0.02)
            self._first_reading()
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
            self.last_row_t = time.monotonic()
            if self.expected is not None and len(self.rows) >= self.expected:
                self._publish()
            elif self.latest is not None and self.expected is None:
                self.latest = self._reading()  # a straggler joins
        return True

    def _first_reading(self):
        """The first reading, shown once its rows stop coming (FIRST_QUIET_S): how many GPUs
        a reading has is known only when the next one begins, a whole period later. Its rows
        stay pending, so a row that comes later joins it and the next reading still counts
        them."""
        with self.lock:
            if self.rows and time.monotonic() - self.last_row_t >= FIRST_QUIET_S:
                self.latest = self._reading()
                self.latest_t = self.last_row_t

    def _reading(self):
        """The rows taken so far, in GPU order."""
        return [self.rows[k] for k in sorted(self.rows)]

    def _publish(self):
        self.expected = len(self.rows)
        self.latest = self._reading()
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
