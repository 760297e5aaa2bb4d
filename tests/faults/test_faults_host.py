"""Faults on the host, seen through a real OpenSSH sshd: the serve process dying, the log
truncated, rotated, deleted and recreated under the follower, and the console's own agent and
follower killed on the host. Each is noticed within 10 s, the telemetry carries on (it never
crashes), and the log arrives with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from tests.fault_support import (
    NumberedWriter,
    Recorder,
    assert_exactly_once,
    pids_with_env,
    record_figure,
)
from tests.sshd import Sshd, chown_to, free_port, start_as
from tests.tcp_proxy import TcpProxy, proxied_config
from vllm_console.console.hostclient.follower import NoticeKind
from vllm_console.console.sim.runner import stop
from vllm_console.console.sim.tree import materialise
from vllm_console.console.telemetry import (
    AgentChanged,
    AgentState,
    GpuSampled,
    Health,
    HostTelemetry,
    LinkChanged,
    LoadSampled,
    ReadinessChanged,
    RunUpdated,
    ServeTreeChanged,
    TelemetryOptions,
)
from vllm_console.console.transport.host import ConnectionState
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh

NOTICE_LIMIT_S = 10.0


@dataclass
class Running:
    host: SSHHost
    telemetry: HostTelemetry
    recorder: Recorder
    match: str


@contextlib.asynccontextmanager
async def telemetry_on(sshd: Sshd, serve: dict[str, str], **options: object
                       ) -> AsyncIterator[Running]:
    if sshd.proc is None:
        sshd.start()
    config = sshd.host_config(serve=serve)
    host = SSHHost(config, keepalive_interval=0.5, keepalive_count_max=2)
    opts = {"interval_s": 0.3, "gpu_source": "none", "health_interval_s": 0.3,
            "metrics_interval_s": 1.0, **options}
    telemetry = HostTelemetry(host, config, TelemetryOptions(**opts))  # type: ignore[arg-type]
    recorder = Recorder()
    task = asyncio.create_task(telemetry.run(recorder))
    try:
        yield Running(host, telemetry, recorder, serve["match"])
        assert not task.done(), "the telemetry ended on its own"
    finally:
        telemetry.stop()
        async with asyncio.timeout(10):
            await task
        await host.close()


async def test_the_serve_process_dying_is_noticed_and_a_new_one_picked_up(sshd: Sshd) -> None:
    if sshd.proc is None:
        sshd.start()
    tree = materialise("incident", sshd.user_dir("serve-dies") / "incident", port=free_port(),
                       startup_s=0.5, metrics_interval_s=0.3)
    chown_to(tree.root, sshd.user)
    server = start_as(tree, sshd.user)
    try:
        async with telemetry_on(sshd, {"match": f"vllm serve {tree.root}/",
                                       "log": str(tree.log)}) as run:
            rec = run.recorder
            await rec.until(lambda e: isinstance(e, ReadinessChanged)
                            and e.readiness.health is Health.HEALTHY, 30, what="healthy")
            assert run.telemetry.snapshot.serve.pid == server.pid
            mark = rec.mark()
            died_at = time.monotonic()
            os.killpg(server.pid, signal.SIGKILL)  # the whole tree, EngineCore included
            server.wait()
            gone, _ = await rec.until(lambda e: isinstance(e, ServeTreeChanged)
                                      and e.tree.root is None, NOTICE_LIMIT_S, after=mark,
                                      what="the serve tree gone")
            down, _ = await rec.until(lambda e: isinstance(e, ReadinessChanged)
                                      and e.readiness.health is Health.DOWN, NOTICE_LIMIT_S,
                                      after=mark, what="health down")
            record_figure("serve killed: tree gone after", gone - died_at)
            record_figure("serve killed: health down after", down - died_at)
            status = run.telemetry.snapshot.status_json()
            assert status["serve"]["running"] is False
            assert status["serve"]["health"] == "down"
            # Telemetry carries on: samples keep coming, and a new server is picked up.
            await rec.until(lambda e: isinstance(e, GpuSampled), 5, after=rec.mark())
            mark = rec.mark()
            server = start_as(tree, sshd.user)
            await rec.until(lambda e: isinstance(e, ServeTreeChanged)
                            and e.tree.root == server.pid, 20, after=mark)
            await rec.until(lambda e: isinstance(e, RunUpdated) and e.new_run, 20, after=mark)
    finally:
        stop(server, timeout=5)
        subprocess.run(["rm", "-rf", str(tree.root.parent)], check=False)


async def test_log_truncated_rotated_deleted_and_recreated(sshd: Sshd) -> None:
    log = sshd.user_dir("log-faults") / "serve.log"
    log.write_bytes(b"")
    writer = NumberedWriter(log)
    match = f"vllm serve /nonexistent-{uuid.uuid4().hex}/"
    async with telemetry_on(sshd, {"match": match, "log": str(log)}, log_start="begin") as run:
        rec = run.recorder

        async def caught_up() -> None:
            await rec.until(lambda e: len(rec.numbered()) >= writer.written, 20,
                            what=f"{writer.written} lines")

        writer.write(300)
        await caught_up()
        # Truncated (a relaunch with `>`): what was read stays read, the new start arrives.
        with open(log, "wb"):
            pass
        writer.write(20)
        await caught_up()
        writer.write(100)
        # Rotated with lines still unread in the old file and the new one written at once.
        log.rename(log.with_name("serve.log.1"))
        writer.write(100)
        await caught_up()
        # Deleted with lines unread, then created again a moment later.
        writer.write(100)
        log.unlink()
        await asyncio.sleep(0.5)
        writer.write(100)
        await caught_up()
        await asyncio.sleep(0.3)  # nothing more arrives: no duplicate on the way
    assert_exactly_once(rec.numbered(), writer.written)
    notices = rec.notices()
    for kind in (NoticeKind.TRUNCATED, NoticeKind.ROTATED, NoticeKind.RECREATED):
        assert str(kind) in notices, f"no {kind} notice in {notices}"


async def test_the_agent_and_the_follower_killed_on_the_host_come_back(sshd: Sshd) -> None:
    log = sshd.user_dir("helpers-killed") / "serve.log"
    log.write_bytes(b"")
    writer = NumberedWriter(log)
    match = f"vllm serve /nonexistent-{uuid.uuid4().hex}/"
    async with telemetry_on(sshd, {"match": match, "log": str(log)}, log_start="begin") as run:
        rec = run.recorder
        writing = asyncio.create_task(writer.run())
        try:
            await rec.until(lambda e: isinstance(e, AgentChanged)
                            and e.agent.state is AgentState.RUNNING, 20)
            agents = pids_with_env(match.split()[-1], sshd.user)
            assert len(agents) == 1, agents
            mark = rec.mark()
            killed_at = time.monotonic()
            os.kill(agents[0], signal.SIGKILL)
            lost, _ = await rec.until(lambda e: isinstance(e, AgentChanged)
                                      and e.agent.state is AgentState.LOST, NOTICE_LIMIT_S,
                                      after=mark, what="the agent lost")
            assert run.telemetry.snapshot.agent.state is AgentState.LOST
            back, _ = await rec.until(lambda e: isinstance(e, AgentChanged)
                                      and e.agent.state is AgentState.RUNNING, NOTICE_LIMIT_S,
                                      after=mark, what="the agent back")
            await rec.until(lambda e: isinstance(e, GpuSampled), 5, after=rec.mark())
            record_figure("agent killed: noticed after", lost - killed_at)
            record_figure("agent killed: running again after", back - killed_at)
            assert run.host.link.state is ConnectionState.CONNECTED  # the link never dropped

            followers = pids_with_env(str(log), sshd.user)
            assert len(followers) == 1, followers
            mark = rec.mark()
            os.kill(followers[0], signal.SIGKILL)
            await rec.until(lambda e: str(NoticeKind.FOLLOWER_ENDED) in rec.notices(),
                            NOTICE_LIMIT_S, what="the follower's end noticed")
            await rec.until(lambda e: str(NoticeKind.RESUMED) in rec.notices(),
                            NOTICE_LIMIT_S, what="the follower resumed")
            await asyncio.sleep(0.3)
        finally:
            writer.stop()
            await writing
        await rec.until(lambda e: len(rec.numbered()) >= writer.written, 20)
    assert_exactly_once(rec.numbered(), writer.written)
    # Only the new agent and follower ran afterwards; the killed ones left nothing behind.
    deadline = time.monotonic() + 5
    while pids_with_env(match.split()[-1], sshd.user) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert pids_with_env(match.split()[-1], sshd.user) == []
    assert pids_with_env(str(log), sshd.user) == []


async def test_a_link_fault_is_not_blamed_on_the_server(sshd: Sshd) -> None:
    """While the link is down the server's health is not known (not "not answering"); once
    it is back, /health and /metrics are read again through a new forward."""
    if sshd.proc is None:
        sshd.start()
    tree = materialise("incident", sshd.user_dir("link-vs-server") / "incident",
                       port=free_port(), startup_s=0.3, metrics_interval_s=0.3)
    chown_to(tree.root, sshd.user)
    server = start_as(tree, sshd.user)
    proxy = TcpProxy(sshd.port).start()
    config = proxied_config(sshd, proxy, serve={"match": f"vllm serve {tree.root}/",
                                                "log": str(tree.log)})
    host = SSHHost(config, keepalive_interval=0.5, keepalive_count_max=2)
    telemetry = HostTelemetry(host, config, TelemetryOptions(
        interval_s=0.3, gpu_source="none", health_interval_s=0.3, metrics_interval_s=0.6,
        # Longer than noticing the frozen link (0.5 s x 2): before that, a probe that times
        # out cannot tell a frozen link from a hung server.
        http_timeout_s=3.0))
    rec = Recorder()
    task = asyncio.create_task(telemetry.run(rec))
    try:
        await rec.until(lambda e: isinstance(e, ReadinessChanged)
                        and e.readiness.health is Health.HEALTHY, 30, what="healthy")
        await rec.until(lambda e: isinstance(e, LoadSampled), 20, after=rec.mark())
        mark = rec.mark()
        proxy.freeze()
        await rec.until(lambda e: isinstance(e, LinkChanged)
                        and e.link.state is ConnectionState.RECONNECTING, NOTICE_LIMIT_S,
                        after=mark)
        await asyncio.sleep(2.0)  # several health periods with the link down
        during = [e.readiness for _, e in rec.events[mark:] if isinstance(e, ReadinessChanged)]
        assert all(r.health in (Health.HEALTHY, Health.UNKNOWN) for r in during), \
            [(r.health.value, r.detail) for r in during]
        assert telemetry.snapshot.readiness.health is Health.UNKNOWN
        assert "link" in telemetry.snapshot.readiness.detail
        assert telemetry.snapshot.status_json()["serve"]["health"] == "unknown"
        proxy.resume()
        mark = rec.mark()
        await rec.until(lambda e: isinstance(e, LinkChanged)
                        and e.link.state is ConnectionState.CONNECTED, 20, after=mark)
        await rec.until(lambda e: telemetry.snapshot.readiness.health is Health.HEALTHY, 20,
                        after=mark, what="healthy again")
        await rec.until(lambda e: isinstance(e, LoadSampled), 20, after=rec.mark(),
                        what="/metrics read again")
    finally:
        telemetry.stop()
        await task
        await host.close()
        proxy.close()
        stop(server, timeout=5)
        subprocess.run(["rm", "-rf", str(tree.root.parent)], check=False)
