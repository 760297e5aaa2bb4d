"""`HostTelemetry`: the live picture of one host, as events, for the TUI's workers.

    telemetry = HostTelemetry(host, config)
    task = asyncio.create_task(telemetry.run(on_event))   # on_event(TelemetryEvent), sync
    ...
    telemetry.stop(); await task                           # or cancel the task

Inside: the host agent (one process, samples every `interval_s`), the log follower (one process,
from the current run's start, resumed by byte offset after a lost link), `/health` and
`/v1/models` every `health_interval_s` until healthy, then with `/metrics` every
`metrics_interval_s` (through `Host.forward_port`), and a 1 s tick that keeps start-up times
moving. The serve process's log and URL come from the configuration, else from discovery
(`console.hostclient.discovery`) each time the agent sees a new serve process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from vllm_console.console.hostclient.agent.client import AgentClient
from vllm_console.console.hostclient.agent.samples import AgentHello, AgentSample, ServeTree
from vllm_console.console.hostclient.container_log import ContainerLogFollower
from vllm_console.console.hostclient.container_log import describe as describe_container_log
from vllm_console.console.hostclient.discovery import (
    DiscoveryError,
    ServeContainer,
    ServeProcess,
    ServerRow,
    effective_serve,
    parse_serve_argv,
    resolve_serve,
    serve_port,
)
from vllm_console.console.hostclient.follower import FollowState, LogBatch, LogFollower
from vllm_console.console.parsers.engine import SpeculativeSettings
from vllm_console.console.parsers.metrics import MetricsSnapshot
from vllm_console.console.settings import HostConfig, ServeSettings
from vllm_console.console.telemetry import events as ev
from vllm_console.console.telemetry.http import ServeUrl
from vllm_console.console.telemetry.logclock import LogClock
from vllm_console.console.telemetry.run_log import Changed, RunLog
from vllm_console.console.telemetry.server import (
    Health,
    MetricsReader,
    ServerLoad,
    load_from_metrics,
    load_from_throughput,
    probe_readiness,
    totals,
)
from vllm_console.console.telemetry.serving import ServingStatus, ServingWatch
from vllm_console.console.telemetry.snapshot import AgentState, AgentStatus, HostSnapshot, ServeInfo
from vllm_console.console.telemetry.spec_decode import SpecSource
from vllm_console.console.telemetry.startup import STALL_AFTER_S, StartupState
from vllm_console.console.transport.aio import cancel_and_wait
from vllm_console.console.transport.host import (
    ConnectionState,
    Host,
    HostError,
    LinkStatus,
    backoff,
)

MIB = 1024 * 1024
SECOND_SCRAPE_S = 1.0
"""How soon the scrape after a first one comes: rates, latency and the engine's state need two."""
SECOND_SCRAPE_TRIES = 3
CONTAINER_LOOK_S = 10.0
"""While no bare server runs and one in a container does: how often to look again (a
`docker restart` is a new run)."""
CONTAINER_LOOK_MAX_S = 60.0
"""While no server runs at all: the looks back off to this (each costs a `discover` run)."""
STOP_LIMIT_S = 5.0
SERVERS_LOOK_S = 15.0
"""How often the host's servers are listed again (one helper run: a server that appears or
exits shows in the switcher and the header)."""
"""`stop()`: how long `run()` waits for its tasks to end before it returns anyway."""

OnEvent = Callable[[ev.TelemetryEvent], None]


@dataclass(frozen=True)
class TelemetryOptions:
    """How often and how much. The defaults suit the TUI."""

    interval_s: float = 1.0
    """Agent sample period."""
    health_interval_s: float = 2.0
    """`/health` period until the server is healthy."""
    metrics_interval_s: float = 5.0
    """`/health` + `/metrics` period once healthy."""
    http_timeout_s: float = 5.0
    log_start: str = "run"
    """Where the log follower starts: the current run's start (`run`), `end` or `begin`."""
    log_backlog_bytes: int = 16 * MIB
    log_max_lines: int = 100_000
    log_batch_s: float = 0.05
    stall_after_s: float = STALL_AFTER_S
    gpu_source: str = "auto"
    """`auto`, `nvml`, `nvidia-smi` or `none`."""


def speculative_of(argv: tuple[str, ...]) -> SpeculativeSettings | None:
    """The speculative config a serve command line asks for (None: none)."""
    args = parse_serve_argv(argv)
    if args.speculative_method is None and args.draft is None:
        return None
    return SpeculativeSettings(args.speculative_method, args.draft, args.num_speculative_tokens)


def serve_info(settings: ServeSettings, process: ServeProcess | None,
               running: bool | None) -> ServeInfo:
    """The serve process as the console uses it: configured values win, discovered ones fill
    in (`console.hostclient.discovery.effective_serve`)."""
    eff = effective_serve(settings, process)
    argv = process.argv if process is not None else ()
    return ServeInfo(running=running if process is None else True,
                     pid=process.pid if process is not None else None, argv=argv,
                     log=eff.log.value or None, url=eff.url.value or None,
                     target=eff.target.value or None, draft=eff.draft.value or None,
                     speculative=speculative_of(argv), warnings=eff.warnings,
                     container=process.container if process is not None else None,
                     processes=() if process is None else (
                         (process.pid, (process.argv or ("?",))[0].rsplit("/", 1)[-1]),
                         *((c.pid, c.comm) for c in process.children)))


def serve_info_from_tree(settings: ServeSettings, tree: ServeTree) -> ServeInfo:
    """Without discovery (it failed): what the agent's tree says, configured values first."""
    root = tree.root_proc
    if root is None:
        return serve_info(settings, None, False)
    args = parse_serve_argv(root.argv)
    log = (root.log or "").removesuffix(" (deleted)")
    return ServeInfo(True, root.pid, root.argv, settings.log or log or None,
                     settings.url or args.url, settings.target or args.target,
                     settings.draft or args.draft, speculative_of(root.argv))


class HostTelemetry:
    """The live telemetry of one host. `run(on_event)` until `stop()`; `snapshot` any time."""

    def __init__(self, host: Host, config: HostConfig,
                 options: TelemetryOptions | None = None) -> None:
        self.host = host
        self.config = config
        self.options = options or TelemetryOptions()
        self.clock = LogClock()
        self.run_log = RunLog(self.clock, stall_after_s=self.options.stall_after_s)
        self.agent = AgentClient(host, interval_s=self.options.interval_s,
                                 match=config.serve.match,
                                 port=serve_port(config.serve),
                                 nvidia_smi=config.gpu.nvidia_smi,
                                 python=config.serve.python,
                                 gpu_source=self.options.gpu_source)
        self.metrics = MetricsReader(host)
        self.serving = ServingWatch(stall_s=config.serve.stall_s)
        self._snapshot = HostSnapshot(host.name, link=host.link,
                                      serve=serve_info(config.serve, None, None),
                                      watched_port=serve_port(config.serve))
        self._on_event: OnEvent | None = None
        self._follower: LogFollower | None = None
        self._follow_key = ""
        self._container_look = -CONTAINER_LOOK_MAX_S
        self._look_every = CONTAINER_LOOK_S / 2  # doubled after the first empty look
        self._follow_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop: asyncio.Event | None = None
        self._ask_now = asyncio.Event()  # set: ask the server now (its log just said ready)
        self._root: int | None = -1  # the serve pid last resolved (-1: none resolved yet)
        self.kept_port: int | None = None
        """Nothing pinned: the port of the server the rule chose first, kept (the agent and
        discovery ask for it from then on) so that the view never silently follows another:
        not one that appears later on a lower port, not one that outlives it."""
        self._servers_look = time.monotonic()
        self._list_task: asyncio.Task[None] | None = None
        self._agent_again = False
        self.last_process: ServeProcess | None = None
        """The last serve process the resolver found: what `r` starts again once it exited
        (a server started by hand leaves no record of the console's)."""

    # -- the server this view keeps to ---------------------------------------------------
    def serve_settings(self) -> ServeSettings:
        """The serve settings this telemetry resolves with: the configuration, with the kept
        port when nothing pinned a server (`check` and `r` use them too: one server)."""
        if self.kept_port is None:
            return self.config.serve
        return self.config.serve.model_copy(update={"port": self.kept_port})

    def moved_to(self, port: int | None) -> None:
        """The kept server was started again on `port` (a restart whose command line was
        edited): keep to it there, not to the port it left."""
        if port and self.kept_port is not None and port != self.kept_port:
            self.kept_port = port
            self.agent.port = port
            self._update(watched_port=port)
            self._restart_agent()

    def _pinned(self) -> bool:
        serve = self.config.serve
        return bool(serve_port(serve) or serve.container or serve.unit)

    async def _resolution(self, settings: ServeSettings) -> ServeProcess | None:
        """The resolver's server for `settings`, the host's servers taken into the snapshot
        on the way; with nothing pinned, the first choice is kept (even while it is the only
        server: one started later on a lower port must not take the view over)."""
        found = await resolve_serve(self.host, settings,
                                    python=settings.python or "python3")
        rows = found.servers
        self._take_servers(rows)
        chosen = next((row for row in rows if row.chosen), None)
        if chosen is not None and chosen.port and self.kept_port is None and \
                not self._pinned():
            self.kept_port = chosen.port
            self.agent.port = chosen.port
            self._update(watched_port=chosen.port)
            self._restart_agent()
        return found.process

    def _take_servers(self, rows: tuple[ServerRow, ...]) -> None:
        self._servers_look = time.monotonic()
        if rows != self._snapshot.servers:
            self._update(servers=rows)
            self._emit(ev.ServersListed(self.host.name))

    def _restart_agent(self) -> None:
        """Start the agent again (it asks for the kept port now), once the sample in hand
        is taken in (`_agent_loop`)."""
        self._agent_again = True

    async def _list_servers(self) -> None:
        with contextlib.suppress(DiscoveryError):
            await self._resolution(self.serve_settings())

    # -- the picture --------------------------------------------------------------------
    @property
    def snapshot(self) -> HostSnapshot:
        """Everything known now (immutable)."""
        return self._snapshot

    def _update(self, **changes: object) -> None:
        self._snapshot = replace(self._snapshot, **changes)  # type: ignore[arg-type]

    def _emit(self, event: ev.TelemetryEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    # -- running ------------------------------------------------------------------------
    async def run(self, on_event: OnEvent) -> None:
        """Run until `stop()` (or cancellation), reporting through `on_event` (called from
        this task; keep it quick: post a message)."""
        self._on_event = on_event
        self._stop = asyncio.Event()
        self.host.add_listener(self._link_changed)
        self._link_changed(self.host.link)
        self._tasks = [asyncio.create_task(self._agent_loop(), name="telemetry-agent"),
                       asyncio.create_task(self._server_loop(), name="telemetry-server"),
                       asyncio.create_task(self._tick_loop(), name="telemetry-tick")]
        if self.config.serve.log:
            self._follow(self.config.serve.log)
        try:
            await self._stop.wait()
        finally:
            if self._follower is not None:
                self._follower.stop()  # ends it even should a cancellation go astray
            # Bounded: leaving must never hang on a task that missed its cancellation.
            await cancel_and_wait(*self._tasks, self._follow_task, self._list_task,
                                  limit=STOP_LIMIT_S)
            self._on_event = None

    def stop(self) -> None:
        """End `run()`: the agent and follower streams close, their host processes end."""
        if self._stop is not None:
            self._stop.set()

    def _link_changed(self, link: LinkStatus) -> None:
        if self._on_event is None:
            return
        self._update(link=link)
        self._emit(ev.LinkChanged(self.host.name, link))

    async def _retry(self, attempt: int) -> None:
        delay = backoff(attempt)
        if self.host.link.state is not ConnectionState.CONNECTED:
            with contextlib.suppress(TimeoutError):
                await self.host.wait_connected(timeout=60)
            # The link is back: the agent ended because it was down, so start again now.
            delay = 0.0 if self.host.link.state is ConnectionState.CONNECTED else 1.0
        await asyncio.sleep(delay)

    # -- the agent ----------------------------------------------------------------------
    async def _agent_loop(self) -> None:
        attempt = 0
        while True:
            reason = "agent stopped"
            try:
                async with contextlib.aclosing(self.agent.stream()) as items:
                    async for item in items:
                        if isinstance(item, AgentHello):
                            attempt = 0
                            self.clock.tz_offset_s = item.tz_offset_s or 0.0
                            self._set_agent(AgentStatus(AgentState.RUNNING, item.gpu_reason,
                                                        item))
                        else:
                            await self._sample(item)
                            if self._agent_again:
                                break
                if self._agent_again:  # for the kept port: again at once, nothing lost
                    self._agent_again = False
                    continue
            except HostError as exc:
                reason = str(exc)
            except Exception as exc:  # a bug must not silently end GPU telemetry
                reason = f"{type(exc).__name__}: {exc}"
            self._set_agent(AgentStatus(AgentState.LOST, reason, self._snapshot.agent.hello))
            await self._retry(attempt)
            attempt += 1

    def _set_agent(self, status: AgentStatus) -> None:
        self._update(agent=status)
        self._emit(ev.AgentChanged(self.host.name, status))

    async def _sample(self, sample: AgentSample) -> None:
        self.clock.observe_host_time(sample.ts, sample.received)
        previous = self._snapshot.sample
        self._update(sample=sample)
        self._emit(ev.GpuSampled(self.host.name, sample))
        tree = sample.serve
        root_changed = tree.root != self._root
        if root_changed:
            self._root = tree.root
            await self._resolve(tree)
        if tree.root is None and time.monotonic() - self._container_look >= self._look_every:
            await self._look_for_container(tree)
        elif time.monotonic() - self._servers_look >= SERVERS_LOOK_S and \
                (self._list_task is None or self._list_task.done()):
            self._servers_look = time.monotonic()
            self._list_task = asyncio.create_task(self._list_servers(), name="servers")
        if root_changed or previous is None or previous.serve.shape != tree.shape:
            self._emit(ev.ServeTreeChanged(self.host.name, tree, self._snapshot.serve))

    async def _look_for_container(self, tree: ServeTree) -> None:
        """No bare server in the agent's tree: is one the main process of a container? The
        agent never takes a container's process (another pid namespace) for the login user's;
        discovery's container kind finds it (`docker ps`), looked at every
        `CONTAINER_LOOK_S` while one runs in a container, less often (up to every
        `CONTAINER_LOOK_MAX_S`) while none does. A container that started again (a `docker
        restart`) is a new server, its log followed from its new start."""
        self._container_look = time.monotonic()
        settings = self.serve_settings()
        try:
            process = await self._resolution(settings)
        except DiscoveryError:
            self._look_every = min(self._look_every * 2, CONTAINER_LOOK_MAX_S)
            return  # no verdict: what was found before stands
        found = process.container if process is not None else None
        self._look_every = CONTAINER_LOOK_S if found is not None else \
            min(self._look_every * 2, CONTAINER_LOOK_MAX_S)
        current = self._snapshot.serve.container
        if found == current:
            return
        if process is None or found is None:
            await self._resolve(tree)  # the container went away: no server
            return
        await self._resolve(tree, process)

    async def _resolve(self, tree: ServeTree, container: ServeProcess | None = None) -> None:
        """A new serve process (or none): where its log is, its URL, what it asked for.
        `container`: the server discovery found in a container (the agent's tree is empty)."""
        settings = self.serve_settings()
        if tree.root is None and container is None:
            info = replace(serve_info(settings, None, False), log=self._snapshot.serve.log
                           or settings.log or None)
        else:
            try:
                # The resolver's choice is the server (the agent's oldest match is only the
                # prompt to ask again): the same process as `check` and the restart act on.
                process = container or await self._resolution(settings)
                info = (serve_info(settings, process, True) if process is not None
                        else serve_info_from_tree(settings, tree))
                self.last_process = process or self.last_process
            except DiscoveryError:
                info = serve_info_from_tree(settings, tree)
            for warning in info.warnings:
                self._emit(ev.ServeWarning(self.host.name, warning))
            self.metrics.reset()
            self.serving.reset()
            self._update(load=None)  # another server: none of the old one's figures wins
            if info.speculative is not None and self.run_log.spec.configure(
                    info.speculative, authoritative=False):
                self._spec_changed()
        self._update(serve=info)
        if info.log:
            self._follow(info.log)
        elif info.container is not None and info.container.started_at is not None:
            self._follow(describe_container_log(info.container), info.container)

    # -- the log ------------------------------------------------------------------------
    def _follow(self, path: str, container: ServeContainer | None = None) -> None:
        """Follow the log at `path`, or (`container`, no log file configured) the container's
        output (`docker logs`) since its start: the same batches either way."""
        opts = self.options
        kwargs: dict[str, Any] = dict(backlog_bytes=opts.log_backlog_bytes,
                                      max_lines=opts.log_max_lines, batch_s=opts.log_batch_s)
        key = path if container is None else ContainerLogFollower.run_key(container)
        if self._follower is not None and self._follow_key == key:
            return
        if self._follow_task is not None:
            self._follow_task.cancel()
        if self._follower is not None:
            self._follower.stop()
            # Another file: what the old one said about "the current run" no longer holds.
            self.run_log = RunLog(self.clock, stall_after_s=self.options.stall_after_s)
            self._update(run=self.run_log.info)
            self._emit(ev.RunUpdated(self.host.name, self.run_log.info, True))
            self._spec_changed()
            self._startup_changed(force=True)
        follower: LogFollower = ContainerLogFollower(self.host, container, **kwargs) \
            if container is not None else LogFollower(self.host, path, start=opts.log_start,
                                                      python=self.config.serve.python,
                                                      **kwargs)
        self._follower, self._follow_key = follower, key
        self._follow_task = asyncio.create_task(self._follow_loop(follower),
                                                name=f"telemetry-log {follower.path}")
        self._update(follow=follower.state)
        self._emit(ev.LogSourceChanged(self.host.name, follower.path, follower.state))

    async def _follow_loop(self, follower: LogFollower) -> None:
        """Run the follower; should it ever fail on something unforeseen, say so and go on
        (it resumes by position)."""
        while True:
            try:
                await follower.run(lambda batch: self._batch(follower, batch))
                return
            except Exception as exc:  # a bug must not silently end the log view
                self._emit(ev.LogSourceChanged(self.host.name, follower.path, FollowState.STOPPED,
                                            f"{type(exc).__name__}: {exc}"))
                await asyncio.sleep(1.0)

    @property
    def follower(self) -> LogFollower | None:
        """The log follower (its `recent()` lines fill a freshly mounted log pane)."""
        return self._follower

    def _batch(self, follower: LogFollower, batch: LogBatch) -> None:
        if follower is not self._follower:
            return  # a late batch of a log no longer followed
        arrival = self.clock.now() if batch.live else None
        notable, changed = self.run_log.feed_texts(batch.texts, arrival, batch.keys)
        name = self.host.name
        if follower.state is not self._snapshot.follow:
            self._update(follow=follower.state)
            self._emit(ev.LogSourceChanged(name, follower.path, follower.state))
        self._emit(ev.LogLinesReceived(name, batch, tuple(notable)))
        if changed & Changed.NEW_RUN:
            self.metrics.reset()
            self._update(load=None)  # a new run: the old run's gauges no longer win
            spec = self._snapshot.serve.speculative
            if spec is not None:
                self.run_log.spec.configure(spec, authoritative=False)
        if changed & (Changed.RUN | Changed.NEW_RUN):
            self._update(run=self.run_log.info)
            self._emit(ev.RunUpdated(name, self.run_log.info, bool(changed & Changed.NEW_RUN)))
        if changed & Changed.SPEC:
            self._spec_changed()
        throughput = self.run_log.info.throughput
        if changed & Changed.LOAD and throughput is not None:
            self._load(load_from_throughput(throughput, self.run_log.throughput_at or 0.0))
        if changed & Changed.STARTUP:
            self._startup_changed(force=True)

    def _spec_changed(self) -> None:
        state = self.run_log.spec.state()
        self._update(spec_decode=state)
        self._emit(ev.SpecDecodeUpdated(self.host.name, state))

    def _running(self) -> bool | None:
        """Whether the server lives: the agent's tree, or for a server that is a container's
        main process (never in the agent's tree: another pid namespace) the container
        discovery last found running it."""
        sample = self._snapshot.sample
        if sample is None:
            return None
        return sample.serve.running or self._snapshot.serve.container is not None

    def _startup_changed(self, force: bool = False) -> None:
        status = self.run_log.startup.status(self.clock.now(), self._running())
        old = self._snapshot.startup
        if force or status.state is not old.state or status.text != old.text:
            self._update(startup=status)
            self._emit(ev.StartupProgress(self.host.name, status))
        if status.state is StartupState.READY and not self._snapshot.readiness.ready:
            self._ask_now.set()  # the log says ready: ask the server now, not a period later

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._startup_changed()

    # -- the server's answers -----------------------------------------------------------
    async def _server_loop(self) -> None:
        soon = 0  # second scrapes asked soon since the window last stood
        while True:
            healthy = False
            try:
                healthy = await self._server_step()
            except Exception as exc:  # a bug must not silently end the server's checks
                self._update(readiness=replace(self._snapshot.readiness,
                                               detail=f"{type(exc).__name__}: {exc}"))
            wait = self.options.metrics_interval_s if healthy else \
                self.options.health_interval_s
            if self.serving.has_window:
                soon = 0
            elif healthy and soon < SECOND_SCRAPE_TRIES:
                # Fewer than two good scrapes (since the start, or a restart's counter
                # reset): the rates and percentiles wait for them. Counted by the scrapes
                # that worked, not by healthy answers (a first /metrics may fail); a few
                # tries, so that a /metrics failing for good is asked at its period.
                soon += 1
                wait = min(wait, SECOND_SCRAPE_S)
            self._ask_now.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ask_now.wait(), wait)

    async def _server_step(self) -> bool:
        """Ask /health (and /v1/models, /metrics when healthy); True when healthy."""
        url = ServeUrl.parse(self._snapshot.serve.url or "")
        now = self.clock.now()
        old = self._snapshot.readiness
        readiness = await probe_readiness(
            self.host, url, running=self._running(), log_ready=self.run_log.startup.ready,
            at=now, timeout=self.options.http_timeout_s,
            want_models=not old.ready or not old.models)
        link = self.host.link.state
        if readiness.http_status is None and url is not None and \
                link is not ConnectionState.CONNECTED:
            # No answer because the link is down: that says nothing of the server.
            readiness = replace(readiness, health=Health.UNKNOWN,
                                detail=f"link {link.value}: the server cannot be reached")
        if readiness.ready and not readiness.models and old.ready:
            readiness = replace(readiness, models=old.models)
        self._update(readiness=readiness)
        if (readiness.health, readiness.http_status, readiness.models, readiness.url) != (
                old.health, old.http_status, old.models, old.url):
            self._emit(ev.ReadinessChanged(self.host.name, readiness))
        if url is None or not readiness.ready:
            if url is not None:
                self._serving(self.serving.feed(None, now, f"/health: {readiness.detail}"))
            return False
        await self._scrape(url, now)
        return True

    async def _scrape(self, url: ServeUrl, now: float) -> None:
        snapshot = await self.metrics.scrape(url, timeout=self.options.http_timeout_s)
        if snapshot is not None:
            self._apply_metrics(snapshot, now)
        else:
            self._serving(self.serving.feed(None, now, f"/metrics: {self.metrics.last_error}"))

    def _apply_metrics(self, snapshot: MetricsSnapshot, now: float) -> None:
        """One `/metrics` scrape into the spec-decode state and the load (the URL-only source
        feeds its scrapes through here too)."""
        spec = self.run_log.spec
        changed = spec.set_totals(totals(snapshot))
        interval = self.metrics.interval(snapshot, now)
        if interval is not None:
            changed = spec.feed(interval, now, SpecSource.METRICS) or changed
        if changed:
            self._spec_changed()
        self._serving(self.serving.feed(snapshot.serving, now))
        load = load_from_metrics(snapshot, now)
        if load is not None:
            self._load(load)

    def _serving(self, status: ServingStatus) -> None:
        old = self._snapshot.serving
        self._update(serving=status)
        if status.picture != old.picture:
            self._emit(ev.ServingChanged(self.host.name, status))

    def _load(self, load: ServerLoad) -> None:
        old = self._snapshot.load
        load = old.merged(load) if old is not None else load
        self._update(load=load)
        self._emit(ev.LoadSampled(self.host.name, load))
