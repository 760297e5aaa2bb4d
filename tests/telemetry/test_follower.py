"""The log follower on this machine (`LocalHost`): the host-side script's framing, finding the
current run, and `LogFollower` against truncation, rotation, deletion, a 1 MB line, binary
garbage, invalid UTF-8 and NULs, with bounded memory. Over a real sshd (and a killed one):
`test_follower_ssh.py`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.hostside.bundle import entry_argv
from vllm_console.console.hostclient.follower import (
    FollowState,
    FrameDecoder,
    LogBatch,
    LogFollower,
    NoticeKind,
)
from vllm_console.console.transport.local_host import LocalHost

PREAMBLE = "(APIServer pid=1) INFO 05-14 10:00:00 [utils.py:1] non-default args: {'model': 'm'}"
ENGINE = ("(EngineCore_DP0 pid=7) INFO 05-14 10:00:05 [core.py:2] Initializing a V1 LLM engine "
          "(v0.1.dev1) with config: model='m', speculative_config=None")
MARK = "[vllm-console] restart at 2026-05-14T10:05:00+00:00 by ops; relaunching vllm serve"


def frames_of(data: bytes) -> list[tuple[dict, bytes]]:
    return FrameDecoder().feed(data)


def run_script(path: Path, *args: str) -> list[tuple[dict, bytes]]:
    out = subprocess.run(entry_argv(sys.executable, "follow", str(path), "--once", *args),
                         capture_output=True, timeout=30, check=True)
    return frames_of(out.stdout)


def data_of(frames: list[tuple[dict, bytes]]) -> bytes:
    return b"".join(payload for header, payload in frames if header["t"] == "data")


def test_frames_survive_any_chunking() -> None:
    stream = (b'{"t":"open","dev":1,"ino":2,"off":0,"size":9,"why":"start"}\n'
              b'{"t":"data","off":0,"n":9}\nab\n\x00{"x"\n{"t":"eof","off":9}\n')
    whole = frames_of(stream)
    assert [h["t"] for h, _ in whole] == ["open", "data", "eof"]
    assert whole[1][1] == b'ab\n\x00{"x"\n'
    for size in (1, 2, 5, 13):
        decoder = FrameDecoder()
        got = []
        for i in range(0, len(stream), size):
            got += decoder.feed(stream[i:i + size])
        assert got == whole


@pytest.mark.programs
@pytest.mark.parametrize(("lines", "start_at"), [
    ([PREAMBLE, "old", ENGINE, "x", PREAMBLE, "banner", ENGINE, "y"], 4),  # two runs
    ([PREAMBLE, ENGINE, "x", PREAMBLE, "starting"], 3),  # the new run has no engine yet
    ([PREAMBLE, ENGINE, ENGINE.replace("DP0", "DP1"), "y"], 0),  # data parallel: one run
    (["noise", ENGINE, "y"], 1),
    # The console's restart marker starts a run, also one that died before vLLM wrote a
    # line (the rule of `telemetry.startup`; the follower ignored the marker: issue 25).
    ([PREAMBLE, ENGINE, "x", MARK, "Traceback (most recent call last):", "boom"], 3),
    ([PREAMBLE, ENGINE, "x", MARK, PREAMBLE, ENGINE, "y"], 3),
])
def test_the_current_run_is_found(tmp_path: Path, lines: list[str], start_at: int) -> None:
    log = tmp_path / "serve.log"
    log.write_text("\n".join(lines) + "\n")
    frames = run_script(log, "--start", "run")
    assert frames[0][0]["why"] == "start"
    assert data_of(frames).decode().splitlines() == lines[start_at:]


@pytest.mark.programs
def test_a_long_run_sends_its_head_then_its_tail(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    body = [f"line {i} " + "x" * 50 for i in range(5000)]
    log.write_text("\n".join([PREAMBLE, ENGINE, *body]) + "\n")
    frames = run_script(log, "--start", "run", "--backlog", "10000", "--head", "1000")
    whys = [h["why"] for h, _ in frames if h["t"] == "open"]
    assert whys == ["head", "skip"]
    text = data_of(frames).decode().splitlines()
    assert text[:2] == [PREAMBLE, ENGINE]
    assert text[-1] == body[-1]
    assert len(text) < 250


@pytest.mark.programs
def test_resume_detects_a_rewrite_and_finds_a_rotated_file(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"one\ntwo\n")
    ino = log.stat().st_ino
    sig = b"one\ntwo\n".hex()
    frames = run_script(log, "--ino", str(ino), "--offset", "8", "--sig", sig)
    assert frames[0][0]["why"] == "resume"
    assert data_of(frames) == b""
    # Rewritten past the old offset: the bytes before it changed, so it restarts at 0.
    with open(log, "r+b") as fh:
        fh.write(b"ONE\nTWO\nthree\n")
    frames = run_script(log, "--ino", str(ino), "--offset", "8", "--sig", sig)
    assert frames[0][0]["why"] == "truncated"
    assert data_of(frames) == b"ONE\nTWO\nthree\n"
    # Rotated while away: the old file's rest first, then the new file from its start.
    log.write_bytes(b"a\nb\n")
    ino = log.stat().st_ino
    with open(log, "ab") as fh:
        fh.write(b"c\n")
    log.rename(tmp_path / "serve.log.1")
    log.write_bytes(b"new\n")
    frames = run_script(log, "--ino", str(ino), "--offset", "4", "--sig", b"a\nb\n".hex())
    assert [h["why"] for h, _ in frames if h["t"] == "open"] == ["resume", "rotated"]
    assert data_of(frames) == b"c\nnew\n"


# -- LogFollower on this machine ----------------------------------------------------------

class Collector:
    def __init__(self) -> None:
        self.batches: list[LogBatch] = []

    def __call__(self, batch: LogBatch) -> None:
        self.batches.append(batch)

    @property
    def texts(self) -> list[str]:
        return [t for b in self.batches for t in b.texts]

    @property
    def notices(self) -> list[NoticeKind]:
        return [n.kind for b in self.batches for n in b.notices]

    async def wait(self, predicate: Callable[[Collector], bool], timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            while not predicate(self):
                await asyncio.sleep(0.01)


@pytest.fixture
async def follow(tmp_path: Path) -> AsyncIterator[Callable[..., tuple[LogFollower, Collector]]]:
    host = LocalHost()
    tasks: list[asyncio.Task[None]] = []

    def start(path: Path, **kwargs: object) -> tuple[LogFollower, Collector]:
        follower = LogFollower(host, str(path), poll_s=0.01, **kwargs)  # type: ignore[arg-type]
        collector = Collector()
        tasks.append(asyncio.create_task(follower.run(collector)))
        return follower, collector

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await host.close()
    # LocalHost kills a closed stream's process without waiting for it: give the child
    # watcher time to reap it while the loop still runs (else its transport is collected
    # after the loop closed, and the warning that raises can upset other tests' imports).
    await asyncio.sleep(0.2)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


@pytest.mark.programs
async def test_lines_split_stripped_and_never_a_crash(tmp_path: Path, follow) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"")
    follower, got = follow(log, start="end")
    await got.wait(lambda c: NoticeKind.STARTED in c.notices)
    append(log, b"\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO hello\r\nsecond\rthird\n")
    append(log, b"bad \xff\xfe utf8 \xc3\n nul\x00byte\n")
    append(log, bytes(range(256)) * 4 + b"\n")  # binary garbage
    append(log, "caf\u00e9 split ".encode()[:-2])  # an unfinished UTF-8 sequence...
    append(log, "caf\u00e9 split ".encode()[-2:] + b"after\n")  # ...completed later
    await got.wait(lambda c: any("after" in t for t in c.texts))
    texts = got.texts
    assert texts[:3] == ["(APIServer pid=1) INFO hello", "second", "third"]
    assert texts[3] == "bad \ufffd\ufffd utf8 \ufffd"
    assert texts[4] == " nulbyte"
    assert all("\x00" not in t and "\x1b" not in t for t in texts)
    assert texts[-1] == "caf\u00e9 split after"
    assert follower.position is not None
    assert follower.position.offset == log.stat().st_size


@pytest.mark.programs
async def test_truncation_rotation_and_recreation(tmp_path: Path, follow) -> None:
    log = tmp_path / "serve.log"
    log.write_text("before 1\nbefore 2\n")
    _, got = follow(log, start="begin")
    await got.wait(lambda c: "before 2" in c.texts)
    log.write_text("after truncate\n")  # a restart with `>`
    await got.wait(lambda c: "after truncate" in c.texts)
    assert NoticeKind.TRUNCATED in got.notices
    append(log, b"last of the old file\n")
    log.rename(tmp_path / "serve.log.1")
    log.write_text("rotated in\n")
    await got.wait(lambda c: "rotated in" in c.texts)
    assert NoticeKind.ROTATED in got.notices
    log.unlink()
    await got.wait(lambda c: NoticeKind.MISSING in c.notices)
    log.write_text("born again\n")
    await got.wait(lambda c: "born again" in c.texts)
    assert NoticeKind.RECREATED in got.notices
    assert got.texts == ["before 1", "before 2", "after truncate", "last of the old file",
                         "rotated in", "born again"]


@pytest.mark.programs
async def test_a_1mb_line_is_kept_whole_and_cut_for_display(tmp_path: Path, follow) -> None:
    log = tmp_path / "serve.log"
    big = "SpecDecoding metrics: " + "x" * (1024 * 1024)
    log.write_text(f"{big}\nsmall\n")
    _, got = follow(log, start="begin")
    await got.wait(lambda c: "small" in c.texts)
    entry = next(e for b in got.batches for e in b.entries if e.text.startswith("Spec"))
    assert entry.text == big
    shown = entry.display(200)
    assert len(shown) < 250
    assert shown.endswith(f"[+{len(big) - 200} chars]")


@pytest.mark.programs
async def test_memory_stays_bounded(tmp_path: Path, follow) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(5000)))
    follower, got = follow(log, start="begin", max_lines=1000)
    await got.wait(lambda c: len(c.texts) == 5000)
    recent = follower.recent()
    assert len(recent) == 1000
    assert recent[-1].text == "line 4999"
    assert recent[0].seq == 4000
    # A line with no end in sight is cut at max_line_bytes, and it says so.
    cut, cut_got = follow(tmp_path / "endless.log", start="begin", max_line_bytes=64 * 1024)
    append(tmp_path / "endless.log", b"y" * (200 * 1024))
    await cut_got.wait(lambda c: NoticeKind.LINE_CUT in c.notices)
    assert all(len(t) <= 64 * 1024 + 256 * 1024 for t in cut_got.texts)


@pytest.mark.programs
async def test_batches_come_at_most_every_min_gap(tmp_path: Path, follow) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"")
    _, got = follow(log, start="end", min_gap_s=0.05)
    await got.wait(lambda c: NoticeKind.STARTED in c.notices)
    start = asyncio.get_running_loop().time()
    for i in range(40):
        append(log, b"tick %d\n" % i)
        await asyncio.sleep(0.005)
    await got.wait(lambda c: "tick 39" in c.texts)
    elapsed = asyncio.get_running_loop().time() - start
    live = [b for b in got.batches if b.entries]
    assert len(live) <= elapsed / 0.05 + 2
    assert got.texts == [f"tick {i}" for i in range(40)]


@pytest.mark.programs
async def test_one_pass_read_for_status(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("\n".join([PREAMBLE, ENGINE, "old run end", PREAMBLE, ENGINE, "now"]))
    host = LocalHost()
    batch = await LogFollower(host, str(log), start="run").read_once()
    assert list(batch.texts) == [PREAMBLE, ENGINE, "now"]  # the unfinished last line too
    missing = await LogFollower(host, str(tmp_path / "nope.log")).read_once()
    assert missing.entries == ()
    assert missing.notices[0].kind is NoticeKind.MISSING
    await host.close()


@pytest.mark.programs
def test_frame_headers_are_plain_json(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"x\n")
    out = subprocess.run(entry_argv(sys.executable, "follow", str(log), "--once", "--start",
                                    "begin"), capture_output=True, timeout=30, check=True).stdout
    header = json.loads(out.split(b"\n", 1)[0])
    assert header == {"t": "open", "dev": os.stat(log).st_dev, "ino": os.stat(log).st_ino,
                      "off": 0, "size": 2, "why": "start"}


@pytest.mark.programs
async def test_stop_ends_a_quiet_follower(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("only line\n")
    host = LocalHost()
    follower = LogFollower(host, str(log), start="begin", poll_s=0.01)
    got = Collector()
    task = asyncio.create_task(follower.run(got))
    await got.wait(lambda c: c.texts == ["only line"])
    follower.stop()
    async with asyncio.timeout(5):
        await task  # returns on its own: nothing else was coming
    assert follower.state is FollowState.STOPPED
    await host.close()
    await asyncio.sleep(0.2)  # see the `follow` fixture


@pytest.mark.programs
async def test_a_cancelled_follower_ends_even_as_a_chunk_arrives(tmp_path: Path) -> None:
    """Cancelling a follower (the console switching logs, a screen closing) must end it, also
    when its stream hands it a chunk in the same turn of the loop: Python 3.11's
    `asyncio.wait_for` then returned the chunk and dropped the cancellation, and the follower
    streamed on for good (a cancelled follower on a busy log hung 1 in 6 times, which is how the
    10 MB-line test over sshd timed out in CI). A quiet stream with a line still waiting for its
    batch is the state it was in; the chunk is handed over as the reader would."""
    log = tmp_path / "serve.log"
    log.write_text("first\n")
    host = LocalHost()
    # Batches held back long: a line stays pending, so the follower waits with a timeout.
    follower = LogFollower(host, str(log), start="begin", poll_s=0.01, batch_s=30,
                           idle_flush_s=30)
    got = Collector()
    task = asyncio.create_task(follower.run(got))
    try:
        await got.wait(lambda c: c.texts == ["first"])  # the backlog, flushed at once
        append(log, b"second\n")
        async with asyncio.timeout(10):
            while not follower._pending:  # the line is in, waiting for its batch
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        queue = follower._queue
        assert queue is not None
        queue.put_nowait(b"")  # a chunk arrives...
        task.cancel()  # ...in the turn the follower is cancelled
        done, _ = await asyncio.wait({task}, timeout=3)
        assert done, "the cancelled follower went on following"
    finally:
        follower.stop()
        await asyncio.wait({task}, timeout=3)
        await host.close()
        await asyncio.sleep(0.2)  # see the `follow` fixture
