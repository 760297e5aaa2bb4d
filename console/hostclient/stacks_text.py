"""The stacks as text, one section per process (the `stacks` command and the TUI's screen).

Each process: its role, pid, name and state; each thread: its name, id and whether py-spy saw it
running, then its frames innermost first, the innermost frame in vLLM's own code marked `>`
(where the engine is, as opposed to the library call it waits in). An idle thread with no vLLM
frame (a thread pool's worker, tqdm's monitor) is folded to one line. With a previous dump,
a thread whose stack did not change since is said to have not moved.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from vllm_console.console.hostclient.stacks import ProcessStacks, StacksReport
from vllm_console.console.output.display import safe_text
from vllm_console.console.parsers.pyspy import ThreadStack

MARK = ">"


def unmoved(before: StacksReport | None, now: StacksReport) -> set[tuple[int, int]]:
    """(pid, thread id) of every thread whose whole stack is the same in both dumps."""
    if before is None:
        return set()
    old = {(p.pid, t.id): t.signature for p in before.processes for t in p.threads}
    return {(p.pid, t.id) for p in now.processes for t in p.threads
            if t.frames and old.get((p.pid, t.id)) == t.signature}


def folded(thread: ThreadStack) -> bool:
    """An idle thread outside vLLM's code: one line is all it needs."""
    return not thread.active and thread.innermost_vllm is None


def process_heading(process: ProcessStacks) -> str:
    state = " (stopped)" if process.stopped else ""
    where = f" in container {process.container}" if process.container else ""
    return (f"{process.role} pid {process.pid}{where}{state}: "
            f"{safe_text(process.name, 120)}")


def frame_text(function: str, file: str, line: int | None) -> str:
    place = f"{file}:{line}" if line is not None else file
    return f"{safe_text(function, 160)} ({safe_text(place, 200)})"


def thread_lines(pid: int, thread: ThreadStack, still: Collection[tuple[int, int]],
                 *, fold: bool = True) -> list[str]:
    moved = "  NOT MOVED since the last dump" if (pid, thread.id) in still else ""
    state = "active" if thread.active else "idle"
    head = f"  thread {thread.id} {safe_text(thread.name, 80)!r} ({state}){moved}"
    if fold and folded(thread):
        top = thread.frames[0] if thread.frames else None
        where = f": {frame_text(top.function, top.file, top.line)}" if top else ""
        return [f"{head} [folded]{where}"]
    mark = thread.innermost_vllm
    return [head, *(f"    {MARK if i == mark else ' '} {frame_text(f.function, f.file, f.line)}"
                    for i, f in enumerate(thread.frames))]


def render_stacks(report: StacksReport, *, previous: StacksReport | None = None,
                  fold: bool = True) -> list[str]:
    """The whole report as lines."""
    tool = report.tool
    lines = [f"{report.host}: stacks by {tool['name']} {tool['version']} ({tool['path']})"
             if tool else f"{report.host}: stacks"]
    if report.problem:
        lines.append(safe_text(report.problem, 400))
    still = unmoved(previous, report)
    for process in report.processes:
        lines.append("")
        lines.append(process_heading(process))
        if process.error:
            lines.append(f"  not dumped: {safe_text(process.error, 300)}")
        for thread in process.threads:
            lines.extend(thread_lines(process.pid, thread, still, fold=fold))
    for dump in report.watchdog_dumps:
        lines.append("")
        pid = f", pid {dump.pid}" if dump.pid is not None else ""
        when = f", written {time.strftime('%H:%M:%S', time.localtime(dump.at))}" \
            if dump.at is not None else ""
        lines.append(f"vLLM watchdog dump {safe_text(dump.path, 300)}{pid}{when}")
        if dump.error:
            lines.append(f"  not read: {safe_text(dump.error, 300)}")
        for thread in dump.threads:
            lines.extend(thread_lines(-1, thread, (), fold=fold))
    lines.extend(f"note: {safe_text(note, 400)}" for note in report.notes)
    return lines
