"""vllm-console host agent: one long-lived sampler per host, one JSON line per sample.

The `agent` entry point: runs on the serving host with its own `python3` (see the package for the
oldest one), started by the console over the SSH link. Every `--interval` seconds it writes one
line to stdout:

    {"t": "sample", "v": 1, "seq": N, "ts": EPOCH, "gpu_source": "nvml|nvidia-smi|none",
     "gpu_reason": "...", "gpu_age_s": S, "gpus": [...], "gpu_procs": [...], "host": {...},
     "serve": {...}, "agent": {...}}

after a first `{"t": "hello", ...}` line (see `console/hostclient/agent/samples.py` for every
field).

GPU source (`console.hostside.gpu`), best first: NVML through `pynvml` when importable, NVML
through ctypes (`libnvidia-ml.so.1`), then ONE long-running `nvidia-smi --query-gpu=... -lms N`
child read as it prints (plus one for `--query-compute-apps`), else none, with the reason.
Nothing is spawned per tick. The serve process tree is tracked from /proc (the login user's
processes only).

It stops on SIGTERM/SIGINT/SIGHUP, when stdout goes away, when its parent goes away, and at EOF of
stdin when stdin is a pipe or socket (under the console's stream wrapper stdin is /dev/null and the
wrapper ends the process group instead).
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from .argv import matches
from .containers import in_container
from .discover import choose_servers, holds, port_names, serve_log, server_entry
from .gpu import open_gpu_source
from .gpu.common import MIB
from .lifeline import on_stdin_eof
from .procfs import (
    boot_time,
    cmdline,
    container_from_cgroup,
    pid_namespace,
    read_bytes,
    read_stat,
    readlink,
)
from .vocabulary import DEFAULT_MATCH

PROTOCOL = 1
ARGV_CAP = 8192          # bytes of one process's command line sent per sample
RECHECK_NEW_S = 5.0      # re-read the command line of processes this young (they may exec)
RESCAN_S = 10.0          # re-read every own process's command line this often

_stop = threading.Event()


# ---------------------------------------------------------------------------------------------
# host figures

class HostStatsReader:
    """CPU % (from /proc/stat deltas), memory (/proc/meminfo) and load."""

    def __init__(self):
        self.prev = self._cpu_times()

    @staticmethod
    def _cpu_times():
        data = read_bytes("/proc/stat", 4096) or b""
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
        for line in (read_bytes("/proc/meminfo", 16384) or b"").split(b"\n"):
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

class _Proc:
    __slots__ = ("own", "ppid", "argv", "matched", "entry", "first_seen", "start_ticks", "comm")

    def __init__(self, own):
        self.own = own
        self.ppid = 0
        self.argv = []
        self.matched = False
        self.entry = False
        self.first_seen = time.monotonic()
        self.start_ticks = 0
        self.comm = ""


class ServeTracker:
    """Finds the serve process and its descendants each tick, by discovery's rule
    (`discover.choose_servers`: top-most server entry points of the login user that match, the
    port's holder first), caching what does not change so a tick stays cheap."""

    def __init__(self, words, uid, exclude, port=None):
        self.words = words
        self.port = port
        self._holders = (None, [])  # (what they were found for, the top entries holding the port)
        self.uid = uid
        self.exclude = set(exclude)
        self.me = os.getpid()
        self.own_namespace = pid_namespace()
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
        argv = cmdline(pid, limit=ARGV_CAP)
        if st is None or argv is None:
            return False
        info.ppid, info.start_ticks, info.comm = st.ppid, st.start, st.comm
        info.argv = argv
        ours = pid not in self.exclude and info.ppid != self.me and not self._helper(argv)
        # A process that renamed itself VLLM::* is an engine or a worker, never the server.
        info.entry = ours and server_entry(argv) and not st.comm.startswith("VLLM::")
        info.matched = info.entry and matches(argv, self.words)
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
                    # A container's process (`containers.in_container`) is never a bare one of
                    # this user: discovery's container kind finds it (`containers`).
                    own = os.stat(f"/proc/{pid}").st_uid == self.uid and \
                        not in_container(pid, self.own_namespace)
                except OSError:
                    continue
                info = _Proc(own)
                if own and not self._learn(pid, info):
                    continue
                self.known[pid] = info
            elif info.own and (rescan or now - info.first_seen < RECHECK_NEW_S):
                self._learn(pid, info)
        return self._tree(now, rescan)

    def _is_topmost(self, pid):
        seen = 0
        parent = self.known[pid].ppid
        while parent > 1 and seen < 4096:
            info = self.known.get(parent)
            if info is None:
                return True
            if info.entry:
                return False
            parent = info.ppid
            seen += 1
        return True

    def _subtree(self, root, children):
        out, stack = [], [root]
        while stack and len(out) < 4096:
            pid = stack.pop()
            out.append(pid)
            stack.extend(children.get(pid, ()))
        return out

    def _holder_tops(self, tops, children, names, rescan):
        """The top-most entries whose tree holds a socket of `names` (an fd scan: only when
        the listening sockets or the entries changed, or at a rescan)."""
        key = (frozenset(names), tuple(sorted(tops)))
        if key == self._holders[0] and not rescan:
            return self._holders[1]
        found = [top for top in tops
                 if names and any(holds(p, names) for p in self._subtree(top, children))]
        self._holders = (key, found)
        return found

    def _choose(self, children, rescan):
        tops = [p for p, i in self.known.items() if i.entry and self._is_topmost(p)]
        names = port_names(self.port)
        return choose_servers([p for p in tops if self.known[p].matched], self.port,
                              bool(names), self._holder_tops(tops, children, names, rescan),
                              lambda p: self.known[p].argv,
                              lambda p: self.known[p].start_ticks)

    def _tree(self, now, rescan=False):
        children = {}
        for pid, info in self.known.items():
            if info.own:
                children.setdefault(info.ppid, []).append(pid)
        roots = self._choose(children, rescan)
        if not roots:
            self.prev_cpu = {}
            return {"match": self.words, "root": None, "others": [], "procs": []}
        root = roots[0]
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
            cpu_now[pid] = st.cpu_ticks
            prev = self.prev_cpu.get(pid)
            cpu = (None if prev is None
                   else round(100.0 * (st.cpu_ticks - prev) / self.clk / elapsed, 1))
            if info.comm != st.comm:  # renamed itself (setproctitle): argv changed too
                info.comm, info.argv = st.comm, cmdline(pid, limit=ARGV_CAP) or info.argv
            argv = info.argv
            entry = {"pid": pid, "ppid": st.ppid, "depth": depth, "comm": st.comm,
                     "argv": argv, "state": st.state,
                     "start_time": round(self.btime + st.start / float(self.clk), 2),
                     "rss_mib": round(st.rss_pages * self.page_mib, 1),
                     "cpu_pct": cpu, "threads": st.threads}
            if pid == root:
                entry["cwd"] = readlink(f"/proc/{pid}/cwd") or None
                entry["stdout"] = readlink(f"/proc/{pid}/fd/1") or None
                log = serve_log(pid)
                entry["log"] = log["target"] if log is not None else None
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
        pid = st.ppid
    return out


def _process_cpu_s(pid, clk):
    st = read_stat(pid)
    return 0.0 if st is None else st.cpu_ticks / float(clk)


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
    p.add_argument("--match", default=DEFAULT_MATCH, help="words that find the serve process")
    p.add_argument("--port", type=int, default=0, help="the server's port (0: none configured)")
    p.add_argument("--nvidia-smi", default="nvidia-smi", help="fallback GPU source")
    p.add_argument("--gpu-source", default="auto", choices=("auto", "nvml", "nvidia-smi", "none"))
    p.add_argument("--nvml-lib", default="", help="NVML library (default libnvidia-ml.so.1)")
    p.add_argument("--once", action="store_true", help="one sample, then exit")
    p.add_argument("--count", type=int, default=0, help="stop after this many samples")
    return p.parse_args(argv)



def _with_container(proc: dict[str, Any]) -> dict[str, Any]:
    """A GPU process with the id of the container it runs in, when it runs in one."""
    box = container_from_cgroup(int(proc.get("pid") or 0))
    return {**proc, "container": box} if box else proc

def main(argv=None):
    """The `agent` entry point."""
    args = parse_args(argv)
    interval = max(0.05, args.interval)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: _stop.set())
    if not args.once:  # a one-shot run is over in a moment, whatever its stdin does
        on_stdin_eof(_stop.set)
    parent = os.getppid()
    clk = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    gpu = open_gpu_source(args.gpu_source, args.nvidia_smi, interval, once=args.once,
                          nvml_lib=args.nvml_lib)
    words = args.match.split()
    tracker = ServeTracker(words, os.getuid(), _ancestors(),
                           args.port if 0 < args.port < 65536 else None)
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
            gpu_procs = [_with_container(p) for p in gpu_procs]
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
