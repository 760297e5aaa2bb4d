"""`vllm-console restart HOST [--yes] [--trace | --debug]`: the console's `r` key, headless
(`--debug`: its `D`, vLLM's debugging switches shown as an environment diff before the
question; a plain restart after it takes them out again, `console.restart.debug`).

Exit 0 once the new server is ready; 1 when it did not come up (the reason and the error lines
from the log are printed); 2 when it could not run (bad usage, unreachable host, nothing to
restart, read-only, refused by the person or by another restart holding the host's lock).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from vllm_console.console.cli.commands.common import EXPECTED as COMMON_EXPECTED
from vllm_console.console.cli.commands.common import CommandError, emit
from vllm_console.console.output.display import safe_text
from vllm_console.console.restart import (
    Outcome,
    RestartError,
    RestartPlan,
    RestartResult,
    RestartStep,
    Stage,
    plan_restart,
    restart,
)
from vllm_console.console.restart.debug import DEBUG_ENV, debug_plan, plain_plan, unit_refusal
from vllm_console.console.settings import HostConfig
from vllm_console.console.telemetry.oneshot import collect_status
from vllm_console.console.transport.connect import host_config_from_args, make_host
from vllm_console.console.transport.host import Host

# `cli.main` reports these on one line with exit 2: the restart could not run.
EXPECTED = (*COMMON_EXPECTED, RestartError)
CANCELLED = "cancelled: nothing was changed"
INTERRUPTED = 130
"""Ctrl+C's exit status (128 + SIGINT), as for every command."""


_BEFORE_STOP = (Stage.PLANNED, Stage.STARTED, Stage.LOCKED, Stage.REFUSED, Stage.NOTE)
"""Stages after which nothing on the host has changed yet."""


class _Seen:
    """What the progress said so far: what Ctrl+C leaves behind on the host."""

    stage: Stage | None = None
    new_pid: int | None = None
    mode: str = ""
    aside: str = ""
    """A container recreation's note on the old container set aside and the way back."""


def left_behind(host: str, seen: _Seen) -> str:
    """What an interrupted restart left on the host, and how to see or stop it (the host-side
    step goes on without the console: a stopped server is never left down)."""
    if seen.stage is None or seen.stage in _BEFORE_STOP:
        return f"interrupted before the server was stopped: nothing was changed on {host}"
    status = f"`vllm-console status {host}`"
    if seen.aside:  # a container recreation: the step removes the old one once ready
        return f"interrupted: the restart goes on on {host} by itself; {seen.aside}; see it " \
               f"with {status}"
    if seen.mode == "container" and seen.new_pid is not None:
        return (f"interrupted: the container's new vllm serve (pid {seen.new_pid}) keeps "
                f"starting on {host}; see it with {status}")
    if seen.new_pid is None:
        return (f"interrupted while the restart stopped the server: the restart goes on on "
                f"{host} by itself and launches the new vllm serve; see it with {status}, "
                "restart it again with `vllm-console restart` once it is up")
    if seen.stage in (Stage.READY, Stage.VERIFIED):
        return f"interrupted: the new vllm serve (pid {seen.new_pid}) is up on {host}"
    return (f"interrupted: the new vllm serve (pid {seen.new_pid}) is left running on {host} "
            f"and keeps starting; see it with {status}; stop it with `kill -TERM "
            f"{seen.new_pid}` on the host (it stops its engine with it)")


def _progress(step: RestartStep, seen: _Seen | None = None) -> None:
    if seen is not None and step.stage is Stage.NOTE and "to go back to it" in step.message:
        seen.aside = step.message
    if seen is not None and step.stage not in (Stage.OTHER, Stage.LINK_LOST, Stage.LINK_BACK,
                                               Stage.NOTE):
        seen.stage = step.stage
        if step.stage is Stage.LAUNCHED and step.pid:
            seen.new_pid = step.pid
    if step.stage is Stage.PLANNED:
        return
    label = step.stage.value
    # A note may carry a command to run (the way back to a container set aside): whole.
    limit = 1000 if step.stage is Stage.NOTE else 300
    emit(f"  {step.elapsed_s:8.2f}s  {label:<16} {safe_text(step.message, limit)}")


def confirm(answer: str | None) -> bool:
    """Whether the person said yes. Cancel (no) is the default: only `y`/`yes` go on."""
    return (answer or "").strip().lower() in ("y", "yes")


async def _ask(plan: RestartPlan, how: str = "") -> bool:
    how = how or (" with the activation trace" if plan.trace else "")
    emit(f"Restart vllm serve on {plan.host}{how}:")
    for line in plan.describe().splitlines():
        emit(f"  {safe_text(line, 1000)}")
    return confirm(await read_line("Restart now? [y/N] "))


async def read_line(prompt: str) -> str:
    """One line typed at the terminal ("" at end of input), read on the event loop: Ctrl+C
    cancels the wait at once. (`input()` on a worker thread went on waiting for Enter after
    Ctrl+C: the interrupted loop waits for its threads before it ends.)"""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # no descriptor (an embedding's stdin)
        return await asyncio.to_thread(input)
    typed: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        if not typed.done():
            typed.set_result(os.read(fd, 4096))

    loop.add_reader(fd, readable)
    try:
        return (await typed).decode(errors="replace")
    finally:
        loop.remove_reader(fd)


def report(result: RestartResult) -> None:
    """The outcome for a person: phase durations when it came up, the error lines when not."""
    if result.phases:
        emit("start-up phases:")
        for p in result.phases:
            took = f"{p.duration_s:7.2f}s" if p.duration_s is not None else "        "
            said = f" (vLLM: {p.reported_s:g} s)" if p.reported_s is not None else ""
            emit(f"  {p.phase.value:<16} {took}{said}  {safe_text(p.detail, 200)}")
    for note in result.notes:
        emit(f"note: {safe_text(note, 500)}")
    timing = f"stop {result.stop_s:.2f}s, " if result.stop_s is not None else ""
    timing += f"start-up {result.startup_s:.2f}s, " if result.startup_s is not None else ""
    timing += f"total {result.total_s:.2f}s"
    if result.ok:
        emit(f"ready: {safe_text(result.reason, 500)} ({timing})")
        return
    err = sys.stderr
    emit(f"{result.outcome.value}: {safe_text(result.reason, 1000)} ({timing})", err)
    if result.error_lines:
        emit(f"from {result.log} after the restart marker:", err)
        for line in result.error_lines:
            emit(f"  {safe_text(line, 1000)}", err)


async def _restart(config: HostConfig, args: argparse.Namespace, seen: _Seen) -> int:
    host = make_host(config)
    try:
        await host.connect()
        plan = await plan_restart(host, config, trace=bool(args.trace))
        debug = bool(getattr(args, "debug", False))
        plan, how = await _debug_or_plain(host, config, plan, debug=debug)
        try:
            go = args.yes or await _ask(plan, how)
        except asyncio.CancelledError:
            # Ctrl+C at the question (asyncio.run cancels this task on SIGINT): the same
            # answer as `n`, said at once, with Ctrl+C's status.
            emit("")
            emit(f"vllm-console restart: {CANCELLED}", sys.stderr)
            return INTERRUPTED
        if not go:
            raise CommandError(CANCELLED)
        seen.mode = plan.mode
        if args.yes:
            emit(f"restarting on {plan.host}{how}: {safe_text(plan.command, 1000)}")
            for line in plan.describe().splitlines():
                if "env:" in line or line.startswith(("- start:", "+ start:")):
                    emit(f"  {safe_text(line, 1000)}")  # what changes, said even unasked
        result = await restart(host, config, trace=bool(args.trace), plan=plan,
                               on_progress=lambda step: _progress(step, seen))
    finally:
        await host.close()
    report(result)
    return result.exit_status


async def _debug_or_plain(host: Host, config: HostConfig, plan: RestartPlan, *, debug: bool
                          ) -> tuple[RestartPlan, str]:
    """`plan` with the debug switches (`--debug`), or without those a debug restart put in
    (a plain restart); and the question's words for it ("" when nothing changed)."""
    url, match = config.serve.url, config.serve.match
    if not debug:
        plain = plain_plan(plan, url=url, match=match)
        return plain, (" without the debug switches" if plain is not plan else "")
    # What the switches depend on: a GPU (CUDA_LAUNCH_BLOCKING), vLLM's version (the watchdog).
    unit_refused = unit_refusal(plan, DEBUG_ENV)
    if unit_refused:  # before the look at the server: refused by name, nothing asked
        raise RestartError(unit_refused)
    snap = await collect_status(host, config, timeout=30)
    gpu = bool(snap.sample is not None and snap.sample.gpus)
    return debug_plan(plan, gpu=gpu, version=snap.status_json()["engine"]["version"], url=url,
                      match=match), " with the debug switches"


def run(args: argparse.Namespace) -> int:
    config = host_config_from_args(args)
    if config.readonly:
        raise CommandError("refused: --readonly forbids restarting (no restart, no writes)")
    if not args.yes and not (sys.stdin is not None and sys.stdin.isatty()):
        raise CommandError("not asking without a terminal: pass --yes to restart without "
                           "confirmation")
    seen = _Seen()
    try:
        code = asyncio.run(_restart(config, args, seen))
    except KeyboardInterrupt:
        emit(left_behind(config.name, seen), sys.stderr)
        raise  # "interrupted", status 130 (`cli.parser`)
    return code if code in (0, 1, 2, INTERRUPTED) else Outcome.ERROR.exit_status
