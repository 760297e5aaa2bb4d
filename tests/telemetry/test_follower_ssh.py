"""The log follower over a real OpenSSH sshd on loopback: sshd is killed mid-stream while the
server keeps logging (and rotates its log), then comes back; every line arrives exactly once,
in order."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.follower_support import running
from tests.sshd import Sshd
from vllm_console.console.hostclient.follower import FollowState, LogBatch, LogFollower, NoticeKind
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh


async def test_killed_sshd_resumes_with_no_gap_and_no_duplicate(sshd: Sshd) -> None:
    if sshd.proc is None:
        sshd.start()
    log = sshd.user_dir("follow-resume") / "serve.log"
    log.write_bytes(b"")
    host = SSHHost(sshd.host_config(), keepalive_interval=0.5, keepalive_count_max=2)
    follower = LogFollower(host, str(log), start="begin")
    lines: list[str] = []
    notices: list[NoticeKind] = []

    def collect(batch: LogBatch) -> None:
        lines.extend(batch.texts)
        notices.extend(n.kind for n in batch.notices)

    written = 0

    async def write(count: int, path: Path = log) -> None:
        nonlocal written
        for _ in range(count // 20):
            with open(path, "ab") as fh:
                fh.write(b"".join(b"line %06d \xe2\x9c\x93\r\n" % (written + i)
                                  for i in range(20)))
            written += 20
            await asyncio.sleep(0.005)

    async def until(predicate, timeout: float = 20) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.02)

    try:
        async with running(follower, collect):
            await write(1000)
            await until(lambda: len(lines) >= 600)
            sshd.kill()  # mid-stream: the writer has not finished
            await write(1000)
            await until(lambda: follower.state is FollowState.RECONNECTING)
            await write(400)
            log.rename(log.with_name("serve.log.1"))  # rotated while the link is down
            await write(600)
            sshd.start()
            await until(lambda: len(lines) >= written, timeout=30)
            await write(200)
            await until(lambda: len(lines) >= written)
            await asyncio.sleep(0.2)
    finally:
        if sshd.proc is None:
            sshd.start()
    assert lines == [f"line {i:06d} \u2713" for i in range(written)]
    assert NoticeKind.DISCONNECTED in notices
    assert notices.count(NoticeKind.RESUMED) >= 1
    assert NoticeKind.ROTATED in notices
    assert follower.reconnects >= 1
