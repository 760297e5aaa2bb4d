"""The client half of a restart: hand the plan to the host-side step, follow it, verify.

The host does the whole restart on its own (lock, stop, verify, relaunch, wait until ready);
the client starts it detached, follows its status file and the serve log from the marker on
(both by byte offset, so a lost link costs nothing but time), reports each step, and checks
/health and /v1/models itself through the link once the host says the server is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import inspect
import json
import posixpath
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from vllm_console.console.hostside.vocabulary import last_launch_file
from vllm_console.console.parsers import StartupPhase
from vllm_console.console.restart.follow import FileFollower, LinkTimeout
from vllm_console.console.restart.model import (
    Outcome,
    RestartOptions,
    RestartPlan,
    RestartResult,
    RestartStep,
    Stage,
)
from vllm_console.console.restart.plan import RestartError, plan_restart
from vllm_console.console.restart.startup import RelaunchTracker
from vllm_console.console.settings import HostConfig
from vllm_console.console.telemetry.http import ServeUrl, http_get
from vllm_console.console.transport.aio import cancel_and_wait, within
from vllm_console.console.transport.host import Host, HostError

ProgressCallback = Callable[[RestartStep], None | Awaitable[None]]
# The host step writes a heartbeat after 10 s of silence: three missed ones and it is gone.
SILENCE_LIMIT_S = 35.0
VERIFY_TRIES_S = 15.0


def who() -> str:
    """`user@machine` of the person at this console, for the log's marker line."""
    try:
        user = getpass.getuser()
    except Exception:
        user = "?"
    return f"{user}@{socket.gethostname()}"


class _Progress:
    """Keeps every step and hands each one to the caller's callback."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.t0 = time.monotonic()
        self.steps: list[RestartStep] = []
        self._callback = callback

    def elapsed(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    async def add(self, stage: Stage, message: str, *, pid: int | None = None,
                  phase: StartupPhase | None = None, elapsed: float | None = None) -> None:
        if self.steps and stage in (Stage.LINK_LOST, Stage.LINK_BACK) and \
                self.steps[-1].stage is stage:
            return
        step = RestartStep(stage=stage, message=message, pid=pid, phase=phase,
                           elapsed_s=self.elapsed() if elapsed is None else elapsed)
        self.steps.append(step)
        if self._callback is not None:
            try:
                result = self._callback(step)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # a display error must not stop a restart half-way
                pass


def plan_document(plan: RestartPlan, options: RestartOptions, *, restart_id: str,
                  paths: dict[str, str], by: str, nvidia_smi: str) -> dict[str, Any]:
    """The plan as the host-side step reads it (`console/hostside/restart/step.py`)."""
    return {
        "id": restart_id, "by": by, "entry": plan.host, "inputs": list(plan.inputs),
        "mode": plan.mode, "unit": plan.unit,
        "user_unit": plan.user_unit,
        "members": [{"pid": pid, "start": start} for pid, start, _ in plan.members],
        "argv": list(plan.argv), "shown": plan.command, "cwd": plan.cwd,
        "env": plan.launch_env,
        "original_env": plan.original_env, "log": plan.log,
        "hook": {"dir": plan.hook_dir} if plan.trace and plan.hook_dir else None,
        "url": plan.url, "port": plan.port, "nvidia_smi": nvidia_smi, "pid": plan.pid,
        "container": {"runtime": plan.container[0], "ref": plan.container[1],
                      "id": plan.container[2], "restart_policy": plan.container[3],
                      "recreate": plan.recreate, "argv": list(plan.container_argv),
                      "compose": bool(plan.compose[0])}
        if plan.container else None,
        "timeouts": {"term": options.term_timeout_s, "kill": options.kill_timeout_s,
                     "free": options.free_timeout_s, "startup": options.startup_timeout_s},
        "paths": paths,
    }


class _Run:
    """One restart being carried out and followed."""

    def __init__(self, host: Host, config: HostConfig, plan: RestartPlan,
                 options: RestartOptions, progress: _Progress, by: str) -> None:
        self.host = host
        self.config = config
        self.plan = plan
        self.options = options
        self.progress = progress
        self.by = by
        self.id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
        private = posixpath.dirname(plan.bundle)
        self.paths = {
            "status": posixpath.join(private, f"restart-{self.id}.status"),
            "lock": posixpath.join(private, "restart.lock"),
            "last": posixpath.join(private, last_launch_file(plan.last_key or "default")),
        }
        self.plan_path = posixpath.join(private, f"plan-{self.id}.json")
        self.out_path = posixpath.join(private, f"restart-{self.id}.out")
        self.tracker = RelaunchTracker()
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.host_t0: float | None = None
        self.client_at_host_t0 = 0.0
        self.times: dict[str, float] = {}
        self.notes: list[str] = list(plan.notes)
        self.marker = ""
        self.new_pid: int | None = None
        self.step_pid: tuple[int, int] | None = None
        self.log_follower: FileFollower | None = None
        self.log_task: asyncio.Task[None] | None = None
        self.log_stopped = False
        self.log_ready = asyncio.Event()
        self.start_error = ""
        self.link_down = False
        self.link_lost = False
        """The link was lost at some point: lines read after it may be old news."""

    # -- following -----------------------------------------------------------------------
    def _on_link(self, up: bool, why: str) -> None:
        self.link_down = not up
        self.link_lost = self.link_lost or not up
        stage = Stage.LINK_BACK if up else Stage.LINK_LOST
        text = "link back: following again" if up else \
            f"link lost ({why}); the restart goes on on the host"
        self.events.put_nowait({"_link": stage, "message": text})

    async def _read_status(self, follower: FileFollower) -> None:
        try:
            async with contextlib.aclosing(follower.lines()) as lines:
                async for line in lines:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        await self.events.put(record)
                        if record.get("final"):
                            return
        except LinkTimeout as exc:
            await self.events.put({"_error": str(exc)})
        except HostError as exc:
            await self.events.put({"_error": f"following the restart failed: {exc}"})

    async def _read_log(self, follower: FileFollower) -> None:
        try:
            async with contextlib.aclosing(follower.lines()) as lines:
                async for line in lines:
                    event = self.tracker.feed(line, late=follower.catching_up)
                    if self.tracker.ready:
                        self.log_ready.set()
                    if event is not None:
                        words = event.detail or event.phase.value
                        took = f" ({event.seconds:g} s)" if event.seconds is not None else ""
                        await self.progress.add(Stage.PHASE, f"{event.phase.value}: {words}"
                                                f"{took}", phase=event.phase, pid=self.new_pid)
        except HostError:
            return  # the status follower reports the link; the log is read again at the end

    def _start_log(self, log: str, offset: int) -> None:
        if self.log_task is not None or not log:
            return
        self.log_follower = FileFollower(self.host, log, offset,
                                         link_timeout=self.options.link_timeout_s,
                                         on_link=self._on_link, catch_up=self.link_lost,
                                         python=self.plan.python)
        self.log_task = asyncio.create_task(self._read_log(self.log_follower),
                                            name="restart-log")

    async def _stop_log(self, drain_s: float) -> None:
        """Give the log follower a moment to catch up, then stop it and read what is left."""
        if self.log_task is None or self.log_follower is None or self.log_stopped:
            return
        self.log_stopped = True
        if drain_s > 0:
            with contextlib.suppress(TimeoutError):
                await within(self.log_ready.wait(), drain_s)
        await self.log_follower.close()
        await cancel_and_wait(self.log_task)
        with contextlib.suppress(HostError):
            rest = await self.host.run(
                ["tail", "-c", f"+{self.log_follower.offset + 1}", "--",
                 self.log_follower.path],
                timeout=30)
            for line in rest.text.split("\n")[:-1] if rest.ok else []:
                self.tracker.feed(line.rstrip("\r"), late=True)

    async def _out_tail(self) -> str:
        """The last words of the step's own output (a Python too old, a crash)."""
        try:
            out = await self.host.run(["tail", "-c", "2000", "--", self.out_path], timeout=15)
        except HostError as exc:
            return f"its output {self.out_path} cannot be read: {exc}"
        lines = [line for line in out.text.splitlines() if line.strip()]
        return lines[-1] if lines else f"no output in {self.out_path}"

    # -- the run -------------------------------------------------------------------------
    async def go(self) -> RestartResult:
        document = plan_document(self.plan, self.options, restart_id=self.id,
                                 paths=self.paths, by=self.by,
                                 nvidia_smi=self.config.gpu.nvidia_smi)
        try:
            await self.host.write_file(self.plan_path, json.dumps(document).encode(),
                                       mode=0o600)
            # There before the step starts, so that `tail -F` follows it at once (a missing
            # file is polled for once a second).
            # (Created with `:>>`: SSHHost.write_file with empty data waits for stdin's EOF.)
            # The step's output file too: private like the rest (the detached start appends
            # to it under the login shell's umask, 644 on most hosts).
            made = await self.host.run(["sh", "-c", 'umask 077; : >> "$1" && : >> "$2"', "sh",
                                        self.paths["status"], self.out_path], timeout=15)
            if not made.ok:
                raise HostError(f"cannot create {self.paths['status']}: "
                                f"{made.error_text.strip()}")
        except HostError as exc:
            return self._result(Outcome.ERROR, f"could not start the restart on the host: {exc}")
        try:
            await self.host.start_detached(
                [self.plan.python, self.plan.bundle, "restart", "run", self.plan_path],
                log=self.out_path)
        except HostError as exc:
            # The answer may be what was lost, not the start: the status file tells.
            self.start_error = str(exc)
        status = FileFollower(self.host, self.paths["status"],
                              link_timeout=self.options.link_timeout_s, on_link=self._on_link,
                              python=self.plan.python)
        reader = asyncio.create_task(self._read_status(status), name="restart-status")
        try:
            return await self._follow()
        except asyncio.CancelledError:
            await self._leave()
            raise
        finally:
            await status.close()
            await cancel_and_wait(reader)
            await self._stop_log(0)

    async def _follow(self) -> RestartResult:
        while True:
            try:
                limit = SILENCE_LIMIT_S if self.step_pid is not None else \
                    self.options.step_start_timeout_s
                record = await within(self.events.get(), limit)
            except TimeoutError:
                if self.link_down:
                    continue  # the follower waits for the link; silence says nothing now
                await self._stop_log(0)  # frees a channel for the look at the step's output
                if self.step_pid is None:
                    return self._result(Outcome.ERROR, "the restart step did not start on "
                                        f"the host: {self.start_error or await self._out_tail()}")
                return self._result(Outcome.ERROR, "the host-side restart step fell silent "
                                    f"(no heartbeat for {SILENCE_LIMIT_S:g} s): "
                                    f"{await self._out_tail()}; see {self.paths['status']}")
            if record.get("step") == "heartbeat":
                continue
            if "_link" in record:
                await self.progress.add(record["_link"], record["message"])
                continue
            if "_error" in record:
                await self._stop_log(0)
                return self._result(Outcome.ERROR, f"{record['_error']}; the restart goes "
                                    f"on on the host: see {self.paths['status']}")
            result = await self._on_status(record)
            if result is not None:
                return result

    async def _on_status(self, record: dict[str, Any]) -> RestartResult | None:
        stage = Stage.of(str(record.get("step", "")))
        message = str(record.get("message", ""))
        t = float(record.get("t") or 0.0)
        if stage is Stage.STARTED:
            self.host_t0 = t
            self.client_at_host_t0 = self.progress.elapsed()
            if isinstance(record.get("pid"), int):
                self.step_pid = (int(record["pid"]), int(record.get("start") or 0))
        self.times.setdefault(stage.value, t)
        elapsed = None
        if self.host_t0 is not None and t:
            elapsed = round(self.client_at_host_t0 + t - self.host_t0, 3)
        if stage is Stage.LAUNCHING:
            self.marker = str(record.get("marker") or "")
            self._start_log(str(record.get("log") or ""), int(record.get("log_offset") or 0))
            self.tracker.t0 = time.monotonic()
        if stage in (Stage.LAUNCHED, Stage.READY) and isinstance(record.get("pid"), int):
            self.new_pid = int(record["pid"])
        if stage in (Stage.NOTE, Stage.GPU_SKIPPED):
            self.notes.append(message)
        await self.progress.add(stage, message, elapsed=elapsed,
                                pid=self.new_pid if stage in (Stage.LAUNCHED, Stage.READY)
                                else None)
        if not record.get("final"):
            return None
        await self._step_ended()
        if stage is Stage.READY:
            return await self._verify()
        if stage is Stage.REFUSED:
            return self._result(Outcome.REFUSED, message)
        await self._stop_log(0)
        # Once a signal went out the server is down or degraded: "did not come up" (exit 1).
        # Before that nothing changed: "could not run" (exit 2).
        touched = self.new_pid is not None or "term-sent" in self.times or \
            (self.plan.mode == "unit" and "stopped" in self.times)
        outcome = Outcome.FAILED if touched else Outcome.ERROR
        return self._result(outcome, message, errors=self.new_pid is not None)

    async def _leave(self) -> None:
        """This client is going (Ctrl+C, the console closed): tell the step, which finishes
        what it began (a stopped server is always relaunched) but stops waiting for ready,
        so the host's restart lock does not outlive us both. A file, not a signal: nothing
        is sent to a pid that may have been recycled."""
        with contextlib.suppress(HostError, OSError, asyncio.CancelledError):
            await within(self.host.run(
                ["sh", "-c", 'umask 077; : > "$1"', "sh", self.paths["status"] + ".left"],
                timeout=5), 6)

    async def _step_ended(self, limit_s: float = 10.0) -> None:
        """The step writes its last word before it lets go of the lock: wait (bounded) until
        it has exited, so that a restart asked for right after this one is not refused."""
        if self.step_pid is None:
            return
        wait = ('i=0; while kill -0 "$1" 2>/dev/null && [ "$i" -lt "$2" ]; do sleep 0.05; '
                'i=$((i+1)); done')
        with contextlib.suppress(HostError):
            await self.host.run(["sh", "-c", wait, "sh", str(self.step_pid[0]),
                                 str(int(limit_s / 0.05))], timeout=limit_s + 5)

    async def _verify(self) -> RestartResult:
        await self._stop_log(5.0)
        url = ServeUrl.parse(self.plan.url) if self.plan.port else None
        if url is None:
            return self._result(Outcome.READY, f"pid {self.new_pid} is up (no port known: not "
                                "checked through the link)")
        deadline = time.monotonic() + VERIFY_TRIES_S
        while True:
            ok, said = await _endpoints(self.host, url)
            if ok or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.5)
        if not ok:
            return self._result(Outcome.FAILED, f"the host saw the server ready, but through "
                                f"the link: {said}", errors=True)
        await self.progress.add(Stage.VERIFIED, f"verified through the link: {said}",
                                pid=self.new_pid)
        return self._result(Outcome.READY, f"pid {self.new_pid} answers: {said}")

    def _span(self, first: str, last: str) -> float | None:
        if first in self.times and last in self.times:
            return round(self.times[last] - self.times[first], 3)
        return None

    def _result(self, outcome: Outcome, reason: str, *, errors: bool = False) -> RestartResult:
        end = time.monotonic()
        stop_end = next((s for s in ("port-free", "gpu-released", "gpu-skipped", "stopped")
                         if s in self.times), "")
        if self.tracker.trace_events:
            self.notes.append(f"{self.tracker.trace_events} trace line(s) in the log")
        return RestartResult(
            host=self.plan.host, outcome=outcome, reason=reason, command=self.plan.command,
            trace=self.plan.trace, old_pid=self.plan.pid, new_pid=self.new_pid,
            steps=tuple(self.progress.steps), phases=self.tracker.phases(end),
            error_lines=self.tracker.error_lines() if errors else (), marker=self.marker,
            log=self.log_follower.path if self.log_follower else self.plan.log,
            stop_s=self._span("stopping", stop_end) if stop_end else None,
            startup_s=self._span("launched", "ready"), total_s=self.progress.elapsed(),
            notes=tuple(self.notes))


async def _endpoints(host: Host, url: ServeUrl) -> tuple[bool, str]:
    """Whether /health answers 200 and /v1/models answers through the link; what each said.
    A 401 from /v1/models is a server started with `--api-key`: up (its routes exist only once
    the engine is), the host step having checked it with the key."""
    said, ok = [], True
    for path in ("/health", "/v1/models"):
        answer = await http_get(host, url, path)
        keyed = path == "/v1/models" and answer.status == 401
        said.append(f"{path}: " + (f"HTTP {answer.status}" if answer.status is not None
                                   else answer.error)
                    + (" (the server wants its --api-key)" if keyed else ""))
        ok = ok and (answer.ok or keyed)
    return ok, ", ".join(said)


async def restart(host: Host, config: HostConfig, *, trace: bool = False,
                  on_progress: ProgressCallback | None = None,
                  options: RestartOptions | None = None, plan: RestartPlan | None = None,
                  by: str | None = None) -> RestartResult:
    """Restart `vllm serve` on `host` and wait until the new server answers.

    Pass the `plan` the person confirmed (from `plan_restart`) to carry out exactly that;
    without one it is made here. `on_progress` gets every `RestartStep` as it happens (a plain
    or an async callable). Never raises for an expected failure: the result says what went
    wrong (`outcome`, `reason`, `error_lines`)."""
    progress = _Progress(on_progress)
    if config.readonly:
        return RestartResult(host=host.name, outcome=Outcome.REFUSED,
                             reason="read-only: restart refused (--readonly)")
    try:
        if plan is None:
            plan = await plan_restart(host, config, trace=trace)
    except (RestartError, HostError) as exc:
        return RestartResult(host=host.name, outcome=Outcome.ERROR, reason=str(exc),
                             total_s=progress.elapsed())
    await progress.add(Stage.PLANNED, plan.command, pid=plan.pid)
    run = _Run(host, config, plan, options or RestartOptions(), progress, by or who())
    return await run.go()
