"""The host-side log follower polls a quiet log less and less often, and still sends a line
written after a quiet spell (issue 18: an idle server's log gets a line per request, and the
follower polled it 100 times a second). Counts, not timings: a loaded machine only ever polls
less."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from vllm_console.console.hostside import follow


class Frames:
    """Collects the follower's frames (it writes them to a file descriptor)."""

    def __init__(self) -> None:
        self.read_fd, write_fd = os.pipe()
        self.out = follow.Output(write_fd)
        self.data = b""

    def drain(self) -> bytes:
        os.set_blocking(self.read_fd, False)
        try:
            while chunk := os.read(self.read_fd, 65536):
                self.data += chunk
        except BlockingIOError:
            pass
        return self.data


class Polls(follow.Follower):
    """The follower, counting its polls."""

    polls = 0

    def step(self) -> bool:
        self.polls += 1
        return bool(super().step())


def test_a_quiet_log_is_polled_ever_less_often_and_a_late_line_still_arrives(
        tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"first request\n")
    frames = Frames()
    follower = Polls(str(log), frames.out, poll=0.01, once=False, idle_poll=0.1)
    follower.start("begin", 1 << 20, 1 << 20, 1 << 20, None, 0, b"")
    runner = threading.Thread(target=follower.run, daemon=True)
    runner.start()
    try:
        time.sleep(1.0)
        # Backing off from 10 ms to 100 ms: ~12 polls in a quiet second (100 before).
        assert follower.polls <= 30, f"{follower.polls} polls of a log quiet for a second"
        with log.open("ab") as f:
            f.write(b"a request after a quiet spell\n")
        deadline = time.monotonic() + 10
        while b"a request after a quiet spell" not in frames.drain():
            assert time.monotonic() < deadline, "the late line was never sent"
            time.sleep(0.05)
        assert frames.data.count(b"first request") == 1
    finally:
        follow._stopping.append(True)
        runner.join(5)
        follow._stopping.clear()
