"""One snapshot of a host, without keeping anything running: `vllm-console status`.

The agent runs once (`--once`: one sample, one nvidia-smi call when NVML is missing) while
discovery finds the serve process; then the current run's log is read in one pass (its head and
its last `backlog_bytes`) while `/health` and `/metrics` are asked, through the link. The same
parsers and trackers as the live view make sense of it, so `status` and the TUI agree.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from vllm_console.console.hostclient.agent.client import AgentClient
from vllm_console.console.hostclient.agent.samples import AgentHello, AgentSample
from vllm_console.console.hostclient.container_log import read_container_log
from vllm_console.console.hostclient.discovery import Resolution, resolve_serve, serve_port
from vllm_console.console.hostclient.follower import LogFollower, NoticeKind
from vllm_console.console.parsers.metrics import MetricsSnapshot, parse_metrics
from vllm_console.console.parsers.serving import ServingScrape
from vllm_console.console.settings import HostConfig
from vllm_console.console.telemetry.host_telemetry import serve_info, serve_info_from_tree
from vllm_console.console.telemetry.http import HttpResult, ServeUrl, http_get
from vllm_console.console.telemetry.logclock import LogClock
from vllm_console.console.telemetry.run_log import RunLog
from vllm_console.console.telemetry.server import (
    Health,
    Readiness,
    judge_health,
    load_from_metrics,
    load_from_throughput,
    totals,
)
from vllm_console.console.telemetry.serving import (
    WINDOW_S,
    ServingStatus,
    ServingWatch,
    watch_serving,
)
from vllm_console.console.telemetry.snapshot import AgentState, AgentStatus, HostSnapshot
from vllm_console.console.transport.host import Host, HostError

MIB = 1024 * 1024


@dataclass(frozen=True)
class ServingLook:
    """What a one-shot look at `/metrics` says about serving, and how many scrapes it took."""

    status: ServingStatus
    scrapes: int
    url: str
    last: MetricsSnapshot | None = None
    """The scrape the verdict was judged from (its gauges are the load's figures)."""
    last_at: float | None = None


async def look_at_serving(host: Host, url: ServeUrl, *, stall_s: float, clock: LogClock,
                          first: HttpResult | None = None, at: float | None = None,
                          settle_s: float = 2.0, window_s: float | None = None
                          ) -> ServingLook:
    """Scrape `/metrics` (`first`: a scrape already made, at `at`) and, with requests in
    flight, again once a second until a token comes (and `settle_s` passed) or `stall_s`
    passes without one (`console.telemetry.serving.watch_serving`). `window_s`: the last
    scrape comes that long after the first (`status --window S`): the latency's window."""
    scrapes = 1
    if first is None:
        first, at = await http_get(host, url, "/metrics"), clock.now()
    if not first.ok:
        why = first.error or f"answered {first.status}"
        return ServingLook(ServingStatus(reason=f"/metrics: {why}"), scrapes, url.base)
    at = at if at is not None else clock.now()
    last, last_at = parse_metrics(first.body), at

    async def again() -> tuple[ServingScrape | None, float, str]:
        nonlocal scrapes, last, last_at
        scrapes += 1
        result = await http_get(host, url, "/metrics")
        if not result.ok:
            return None, clock.now(), f"/metrics: {result.error or f'answered {result.status}'}"
        last, last_at = parse_metrics(result.body), clock.now()
        return last.serving, last_at, ""

    watch = ServingWatch(stall_s=stall_s, window_s=max(WINDOW_S, 2 * (window_s or 0.0)))
    status = await watch_serving(watch, last.serving, at, again, settle_s=settle_s,
                                 span_s=window_s)
    return ServingLook(status, scrapes, url.base, last, last_at)


class StatusError(HostError):
    """The host answered but nothing could be learnt from it (no Python there, say)."""


async def collect_status(host: Host, config: HostConfig, *, backlog_bytes: int = 4 * MIB,
                         timeout: float = 60.0, window_s: float | None = None
                         ) -> HostSnapshot:
    """Everything `status` prints. Raises HostError when the host cannot be reached.
    `window_s`: the latency over that many seconds (`--window`); without it, over the look's
    own few seconds, or since the server's start when no request finished in them."""
    await host.connect()
    serve = config.serve
    python = serve.python or "python3"
    agent = AgentClient(host, match=serve.match, port=serve_port(serve),
                        nvidia_smi=config.gpu.nvidia_smi, python=serve.python)
    agent_result, discovered = await asyncio.gather(
        agent.once(timeout=timeout),
        resolve_serve(host, serve, python=python),
        return_exceptions=True)
    for result in (agent_result, discovered):
        if isinstance(result, BaseException) and not isinstance(result, HostError):
            raise result
    notes: list[str] = []
    hello: AgentHello | None = None
    sample: AgentSample | None = None
    if isinstance(agent_result, tuple):
        hello, sample = agent_result
    else:
        notes.append(str(agent_result))
    resolution = discovered if isinstance(discovered, Resolution) else None
    process = resolution.process if resolution is not None else None
    if resolution is not None:
        notes.extend(resolution.notes)
    if isinstance(discovered, BaseException):
        if sample is None:
            raise StatusError(f"{host.name}: {agent_result}; {discovered}")
        notes.append(str(discovered))
        info = serve_info_from_tree(serve, sample.serve)
    else:
        info = serve_info(serve, process, process is not None)
        notes.extend(info.warnings)

    clock = LogClock(hello.tz_offset_s if hello is not None else None)
    if sample is not None:
        clock.observe_host_time(sample.ts, sample.received)
    run_log = RunLog(clock)
    url = ServeUrl.parse(info.url or "")

    async def read_log() -> None:
        if not info.log and info.container is not None:
            try:
                log = await read_container_log(host, info.container,
                                               timeout=timeout)
            except HostError as exc:
                notes.append(str(exc))
                return
            run_log.feed_texts(log.lines)
            if log.skipped:
                notes.append(f"the container's log: {log.skipped} bytes between the "
                             "start-up and the last lines were not read")
            return
        if not info.log:
            return
        follower = LogFollower(host, info.log, start="run", backlog_bytes=backlog_bytes,
                               python=serve.python)
        try:
            batch = await follower.read_once(timeout=timeout)
        except HostError as exc:
            notes.append(str(exc))
            return
        run_log.feed_texts(batch.texts)
        notes.extend(n.text for n in batch.notices if n.kind is NoticeKind.MISSING)

    async def get(path: str) -> HttpResult | None:
        return await http_get(host, url, path) if url is not None else None

    _, health, metrics = await asyncio.gather(read_log(), get("/health"), get("/metrics"))
    if info.speculative is not None:
        run_log.spec.configure(info.speculative, authoritative=False)
    now = clock.now()
    state, detail = judge_health(health, running=info.running,
                                 log_ready=run_log.startup.ready)
    holders = resolution.port.get("holders") if resolution is not None else None
    if state is Health.HEALTHY and process is None and resolution is not None and \
            resolution.port.get("listening"):
        # The port answers, but not from a vLLM server of this user: never "healthy".
        who = ", ".join(f"pid {h['pid']} ({h.get('comm')})" for h in holders or []) or \
            "a process this user cannot see"
        state, detail = Health.UNKNOWN, f"/health answered 200 from {who}, which is no " \
                                        "vLLM server of this user"
    readiness = Readiness(state, url.base if url else None,
                          health.status if health else None, detail, (), now)
    throughput = run_log.info.throughput
    load = (load_from_throughput(throughput, run_log.throughput_at or now)
            if throughput is not None else None)
    serving = ServingStatus(reason="no /metrics answer" if url is not None else "no server URL")
    if url is not None and metrics is not None and metrics.ok:
        look = await look_at_serving(host, url, stall_s=serve.stall_s, clock=clock,
                                     first=metrics, at=now, window_s=window_s)
        serving, parsed = look.status, look.last or parse_metrics(metrics.body)
        if window_s is None:
            serving = serving.with_latency_since_start(parsed.serving)
        run_log.spec.set_totals(totals(parsed))
        scraped = load_from_metrics(parsed, look.last_at or now)
        if scraped is not None:
            # One source per figure: running, waiting and KV use from the scrape the engine's
            # state was judged from (the stat line's are another instant's: `running 4` beside
            # `6 running`); the rates from the stat line (`rates_source`), when there is one.
            load = scraped.merged(load) if load is not None else scraped
    agent_status = (AgentStatus(AgentState.RUNNING, hello.gpu_reason, hello) if hello
                    else AgentStatus(AgentState.LOST, notes[0] if notes else ""))
    return HostSnapshot(host.name, link=host.link, agent=agent_status, sample=sample,
                        serve=info, run=run_log.info, spec_decode=run_log.spec.state(),
                        startup=run_log.startup.status(now, info.running),
                        readiness=readiness, load=load, notes=tuple(notes), serving=serving,
                        servers=resolution.servers if resolution is not None else ())
