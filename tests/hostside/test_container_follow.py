"""The host side's container log follower (`follow-container`) on a stand-in `docker` CLI that
prints stamped lines as the real one does: the replay in stamp order, a long run cut to its
start-up and its end, live lines as they come, a resume that repeats and skips nothing, and what
it does when the container stops and starts again. (With the real daemon and a real vLLM in a
container: tests/containers.)"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hostside.bundle import entry_argv
from vllm_console.console.hostclient.follower import FrameDecoder

START = "2026-12-05T06:00:00Z"
FAKE = r'''#!PYTHON
"""A stand-in `docker`: `logs [--follow] --timestamps --since S REF` and `inspect -f F REF`."""
import os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
def read(name):
    try:
        with open(os.path.join(here, name)) as fh:
            return fh.read().splitlines()
    except OSError:
        return []
if args[0] == "inspect":
    print((read("state") or ["true " + "START"])[0])
    sys.exit(0)
since = args[args.index("--since") + 1]
with open(os.path.join(here, "calls"), "a") as fh:
    fh.write(" ".join(args) + "\n")
def newer(line):
    stamp = line.split(" ", 1)[0]
    return since[:1].isdigit() and ("T" not in since or stamp >= since)
for name, out in (("out", sys.stdout), ("err", sys.stderr)):
    for line in read(name):
        if newer(line):
            out.write(line + "\n")
    out.flush()
if "--follow" in args:
    sent = 0
    while not os.path.exists(os.path.join(here, "stop")):
        live = read("live")
        for line in live[sent:]:
            if newer(line):
                sys.stdout.write(line + "\n")
        sys.stdout.flush()
        sent = len(live)
        time.sleep(0.05)
'''.replace("START", START)


def stamp(second: int, nanos: str = "") -> str:
    return f"2026-12-05T06:00:{second:02d}{'.' + nanos if nanos else ''}Z"


@pytest.fixture
def docker(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text(FAKE.replace("PYTHON", sys.executable))
    fake.chmod(0o755)
    (bin_dir / "out").write_text("".join(f"{stamp(s)} out {s}\n" for s in (1, 3, 5)))
    (bin_dir / "err").write_text(f"{stamp(2)} err 2\n{stamp(4, '5')} err 4\n")
    return bin_dir


class Follower:
    """The entry as a process, its frames read as they come."""

    def __init__(self, docker: Path, *args: str) -> None:
        env = {**os.environ, "PATH": f"{docker}:{os.environ['PATH']}"}
        self.proc = subprocess.Popen(
            entry_argv(sys.executable, "follow-container", "--ref", "vllm", "--since",
                       "1796450400.0", *args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.decoder = FrameDecoder()
        self.frames: list[tuple[dict[str, Any], bytes]] = []

    def until(self, kind: str, timeout: float = 10.0) -> list[tuple[dict[str, Any], bytes]]:
        """Frames up to and including the next one of `kind`."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        start = len(self.frames)
        while True:
            for i, (header, _) in enumerate(self.frames[start:], start):
                if header["t"] == kind:
                    return self.frames[start:i + 1]
            assert time.monotonic() < deadline, self.frames
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"ended: {self.frames}"
                self.frames += self.decoder.feed(chunk)

    def data_until(self, ending: str) -> list[tuple[dict[str, Any], bytes]]:
        """Frames until the data sent so far ends with `ending` (reads may split it)."""
        start = len(self.frames)
        while not text(self.frames[start:]).endswith(ending):
            self.until("data")
        return self.frames[start:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def follow(docker: Path) -> Iterator[Any]:
    made: list[Follower] = []

    def start(*args: str) -> Follower:
        made.append(Follower(docker, *args))
        return made[-1]

    yield start
    for follower in made:
        follower.close()


def text(frames: list[tuple[dict[str, Any], bytes]]) -> str:
    return b"".join(payload for header, payload in frames if header["t"] == "data").decode()


@pytest.mark.programs
def test_the_replay_is_both_streams_in_stamp_order_then_live(docker: Path, follow: Any) -> None:
    f = follow()
    replay = f.until("eof")
    assert replay[0][0]["why"] == "start"
    assert text(replay) == "out 1\nerr 2\nout 3\nerr 4\nout 5\n"  # stamps gone, one order
    assert replay[-1][0]["off"] == len(text(replay))
    (docker / "live").write_text(f"{stamp(6)} live 6\n{stamp(7)} live 7\n")
    live = f.data_until("live 7\n")
    assert text(live) == "live 6\nlive 7\n"
    assert live[0][0]["off"] == len(text(replay))  # offsets go on from the replay
    assert (live[-1][0]["stamp"], live[-1][0]["same"]) == (stamp(7), 1)


@pytest.mark.programs
def test_a_long_run_is_its_start_up_and_its_end(docker: Path, follow: Any) -> None:
    (docker / "out").write_text("".join(f"{stamp(s)} line {s:02d}\n" for s in range(1, 41)))
    (docker / "err").write_text("")
    frames = follow("--head", "16", "--backlog", "24").until("eof")
    kinds = [(h["t"], h.get("why")) for h, _ in frames]
    assert kinds == [("open", "head"), ("data", None), ("open", "skip"), ("data", None),
                     ("eof", None)]
    assert frames[1][1] == b"line 01\nline 02\n"
    assert frames[3][1] == b"line 38\nline 39\nline 40\n"
    assert frames[2][0]["off"] == 40 * 8 - 24  # where the end begins, in the output's bytes


@pytest.mark.programs
def test_a_resume_repeats_and_skips_nothing(docker: Path, follow: Any) -> None:
    """Resumed after the first of two lines with one stamp: the second comes, the first not."""
    (docker / "out").write_text(f"{stamp(1)} a\n{stamp(2)} b\n{stamp(2)} c\n{stamp(3)} d\n")
    (docker / "err").write_text("")
    frames = follow("--after", stamp(2), "--skip", "1", "--offset", "4").data_until("d\n")
    assert frames[0][0] == {"t": "open", "dev": 0, "ino": 0, "off": 4, "size": 4,
                            "why": "resume"}
    assert text(frames) == "c\nd\n"
    assert frames[1][0]["off"] == 4  # the bytes go on from where the console had them
    calls = (docker / "calls").read_text()
    assert f"--since {stamp(2)}" in calls


@pytest.mark.programs
def test_a_stopped_container_is_missing_and_a_new_run_ends_the_follower(
        docker: Path, follow: Any) -> None:
    f = follow()
    f.until("eof")
    (docker / "state").write_text("false " + START)
    (docker / "stop").write_text("")
    missing = f.until("missing")[-1][0]
    assert "the container vllm is not running" in missing["why"]
    (docker / "state").write_text("true 2026-12-05T06:05:00Z")
    assert f.proc.wait(timeout=10) == 0  # the console follows the new run from its start
    assert json.dumps(f.frames[-1][0])  # nothing after the missing frame but the end
    assert f.frames[-1][0]["t"] == "missing"
