"""`HostTelemetry` live through a real OpenSSH sshd: a simulated server is started while the
telemetry watches, comes up, serves the incident's acceptance, and is stopped; every pane's event
arrives, and stopping the telemetry leaves nothing running on the host."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import uuid
from collections.abc import Callable

import pytest

from tests.hostside.bundle import helpers_of
from tests.sshd import Sshd, chown_to, free_port, start_as
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
    LogLinesReceived,
    ReadinessChanged,
    ServeTreeChanged,
    SpecDecodeStatus,
    SpecDecodeUpdated,
    SpecSource,
    StartupProgress,
    StartupState,
    TelemetryEvent,
    TelemetryOptions,
)
from vllm_console.console.transport.host import ConnectionState
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh


async def test_a_server_coming_up_and_going_away(sshd: Sshd) -> None:
    if sshd.proc is None:
        sshd.start()
    tree = materialise("incident", sshd.user_dir("live") / "incident", port=free_port(),
                       startup_s=1.5, metrics_interval_s=0.3)
    chown_to(tree.root, sshd.user)
    config = sshd.host_config(serve={"match": f"vllm serve {tree.root}/", "log": str(tree.log)},
                              gpu={"nvidia_smi": str(tree.nvidia_smi)})
    host = SSHHost(config)
    telemetry = HostTelemetry(host, config, TelemetryOptions(
        interval_s=0.5, health_interval_s=0.3, metrics_interval_s=1.0))
    events: list[TelemetryEvent] = []
    task = asyncio.create_task(telemetry.run(events.append))

    async def until(predicate: Callable[[TelemetryEvent], bool], timeout: float = 20
                    ) -> TelemetryEvent:
        async with asyncio.timeout(timeout):
            while True:
                found = next((e for e in events if predicate(e)), None)
                if found is not None:
                    return found
                await asyncio.sleep(0.05)

    server: subprocess.Popen[bytes] | None = None
    try:
        agent = await until(lambda e: isinstance(e, AgentChanged))
        assert isinstance(agent, AgentChanged)
        assert agent.agent.state is AgentState.RUNNING
        assert agent.agent.gpu_source in ("nvidia-smi", "nvml")
        await until(lambda e: isinstance(e, GpuSampled) and e.sample.gpus != ())
        assert len(helpers_of(str(tree.root))) >= 3  # agent, its two nvidia-smi loops
        server = start_as(tree, sshd.user)
        await until(lambda e: isinstance(e, StartupProgress)
                    and e.status.state is StartupState.STARTING)
        ready = await until(lambda e: isinstance(e, ReadinessChanged)
                            and e.readiness.health is Health.HEALTHY)
        assert isinstance(ready, ReadinessChanged)
        assert ready.readiness.models == (str(tree.target),)
        await until(lambda e: isinstance(e, StartupProgress)
                    and e.status.state is StartupState.READY)
        tree_event = await until(lambda e: isinstance(e, ServeTreeChanged)
                                 and any(p.is_engine_core and p.gpu_mem_mib
                                         for p in e.tree.procs))
        assert isinstance(tree_event, ServeTreeChanged)
        assert tree_event.tree.root == server.pid
        assert tree_event.serve.url == tree.url
        for source in (SpecSource.LOG, SpecSource.METRICS):
            spec = await until(lambda e, s=source: isinstance(e, SpecDecodeUpdated)
                               and e.state.latest_source is s)
            assert isinstance(spec, SpecDecodeUpdated)
            assert spec.state.status is SpecDecodeStatus.ACTIVE
            assert spec.state.latest is not None
            assert spec.state.latest.mean_acceptance_length is not None
            assert 1.0 < spec.state.latest.mean_acceptance_length < 1.5
        await until(lambda e: isinstance(e, LoadSampled) and e.load.running is not None)
        lines = [t for e in events if isinstance(e, LogLinesReceived) for t in e.batch.texts]
        assert any("Application startup complete." in t for t in lines)
        # Serving health, scrape after scrape: the engine makes progress, and the latency of
        # the window between scrapes is there.
        async with asyncio.timeout(20):
            while telemetry.snapshot.serving.latency is None:
                await asyncio.sleep(0.1)
        snapshot = telemetry.snapshot.status_json()
        assert snapshot["serve"]["engine"] == "ok", snapshot["serve"]["engine_reason"]
        assert snapshot["latency"]["source"] == "metrics"
        assert snapshot["latency"]["ttft_s"]["p50"] > 0
        assert snapshot["serve"]["health"] == "healthy"
        assert snapshot["engine"]["speculative_config"]["num_spec_tokens"] == 15
        stop(server, timeout=5)
        server = None
        await until(lambda e: isinstance(e, ServeTreeChanged) and e.tree.root is None)
        await until(lambda e: isinstance(e, StartupProgress)
                    and e.status.state is StartupState.EXITED)
        await until(lambda e: isinstance(e, ReadinessChanged)
                    and e.readiness.health is Health.DOWN)
    finally:
        if server is not None:
            stop(server, timeout=5)
        telemetry.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    # The agent, its nvidia-smi loops and the follower end with the telemetry.
    for _ in range(50):
        left = helpers_of(str(tree.root))
        if not left:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"left running on the host: {left}")
    await host.close()


async def test_the_agent_comes_back_after_the_link_does(sshd: Sshd) -> None:
    if sshd.proc is None:
        sshd.start()
    marker = f"/nonexistent-vc-reconnect-{uuid.uuid4().hex[:8]}/"
    config = sshd.host_config(serve={"match": f"vllm serve {marker}"})
    host = SSHHost(config, keepalive_interval=0.5, keepalive_count_max=2)
    telemetry = HostTelemetry(host, config, TelemetryOptions(interval_s=0.3, gpu_source="none"))
    events: list[TelemetryEvent] = []
    task = asyncio.create_task(telemetry.run(events.append))

    async def until(predicate: Callable[[TelemetryEvent], bool], timeout: float = 20) -> int:
        async with asyncio.timeout(timeout):
            while True:
                for i, event in enumerate(events):
                    if predicate(event):
                        return i
                await asyncio.sleep(0.05)

    def agent(state: AgentState) -> Callable[[TelemetryEvent], bool]:
        return lambda e: isinstance(e, AgentChanged) and e.agent.state is state

    try:
        await until(agent(AgentState.RUNNING))
        await until(lambda e: isinstance(e, GpuSampled))
        assert telemetry.snapshot.gpu_source == "none"
        sshd.kill()
        lost = await until(agent(AgentState.LOST))
        await until(lambda e: isinstance(e, LinkChanged)
                    and e.link.state is ConnectionState.RECONNECTING)
        sshd.start()
        back = await until(lambda e: events.index(e) > lost and agent(AgentState.RUNNING)(e))
        await until(lambda e: events.index(e) > back and isinstance(e, GpuSampled))
        assert len(helpers_of(marker)) == 1  # the old agent ended with its session
    finally:
        if sshd.proc is None:
            sshd.start()
        telemetry.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await host.close()
