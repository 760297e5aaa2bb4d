"""URL-only mode: a vLLM server watched through its HTTP port alone, no SSH.

`/health`, `/v1/models`, `/version` and `/metrics` give the header, the speculative pane and
the load; everything that needs the host itself (GPUs, the log, the draft config, the chain,
restart) says so, and how to add SSH. An `--api-key` server's key is read from an environment
variable or a file the hosts file names, sent as `Authorization: Bearer`, and never shown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from vllm_console.console.output.display import safe_text
from vllm_console.console.parsers.engine import SpeculativeSettings
from vllm_console.console.parsers.metrics import MetricsSnapshot, parse_metrics
from vllm_console.console.session.capabilities import SERVER_ONLY, Capability
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.settings import ConfigError, HostConfig, HostEntry, ServeSettings
from vllm_console.console.sources import web
from vllm_console.console.sources.api_key import DEFAULT_KEY_ENV, read_api_key, url_settings
from vllm_console.console.telemetry.events import AgentChanged, LinkChanged, ReadinessChanged
from vllm_console.console.telemetry.host_telemetry import HostTelemetry, OnEvent, TelemetryOptions
from vllm_console.console.telemetry.server import (
    Health,
    Readiness,
    ServerLoad,
    judge_health,
    model_ids,
)
from vllm_console.console.telemetry.snapshot import AgentState, AgentStatus
from vllm_console.console.transport.aio import cancel_and_wait
from vllm_console.console.transport.host import (
    CommandResult,
    ConnectionState,
    Host,
    HostError,
    LinkStatus,
    StreamHandle,
)


def needs_ssh(what: str, name: str) -> str:
    """The one message every host-only pane and action gives in URL-only mode (`name`: the
    hosts-file entry, or the URL's host:port for a bare `--url`)."""
    entry = f"[hosts.{name}]" if "/" not in name and ":" not in name else "[hosts.NAME]"
    return (f"{what} needs SSH to the host: add `ssh = \"user@host\"` beside `url` in its "
            f"{entry} entry of the hosts file, or open `vllm-console [user@]host`")


@dataclass(frozen=True)
class UrlSource:
    """Where the server answers, and the key it wants (kept out of repr and messages)."""

    url: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 5.0

    def __post_init__(self) -> None:
        web.check_url(self.url, ConfigError, "--url")

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    async def get(self, path: str) -> web.HttpResult:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return await web.get(self.base, path, headers=headers, timeout=self.timeout_s)


class UrlHost(Host):
    """The host behind a URL-only server: every verb refuses with the way to add SSH, so an
    action that reaches for the host gets that message, never a traceback."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._link = LinkStatus(ConnectionState.CONNECTING, "HTTP only")

    @property
    def link(self) -> LinkStatus:
        return self._link

    def set_link(self, link: LinkStatus) -> None:
        self._link = link

    def _refuse(self) -> HostError:
        return HostError(needs_ssh("this", self.name))

    def add_listener(self, callback: Callable[[LinkStatus], None]) -> None:
        """The URL source sets and shows the link itself (`set_link`): no one to call back."""

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Nothing to wait for: every verb refuses."""

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def run(self, argv: Sequence[str] | str, *, input: bytes | None = None,
                  timeout: float = 30.0, env: Mapping[str, str] | None = None,
                  cwd: str | None = None) -> CommandResult:
        raise self._refuse()

    async def stream(self, argv: Sequence[str] | str, *,
                     env: Mapping[str, str] | None = None) -> StreamHandle:
        raise self._refuse()

    async def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        raise self._refuse()

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        raise self._refuse()

    async def start_detached(self, argv: Sequence[str], *, log: str, cwd: str | None = None,
                             env: Mapping[str, str] | None = None, append: bool = True) -> int:
        raise self._refuse()

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        raise self._refuse()


class UrlTelemetry(HostTelemetry):
    """`HostTelemetry`'s events and snapshot, fed from the URL alone: `/health` (and
    `/v1/models`, `/version`) until healthy, then `/metrics` too, through the same spec-decode
    and load code the SSH path uses."""

    def __init__(self, host: UrlHost, config: HostConfig, source: UrlSource,
                 options: TelemetryOptions | None = None) -> None:
        super().__init__(host, config, options)
        self.url_host = host
        self.source = source
        # (at, (prompt, generation, prefix queries, prefix hits)): the last scrape's counters
        self._counters: tuple[float, tuple[float | None, ...]] | None = None
        self.last_scrape: MetricsSnapshot | None = None
        """The newest `/metrics` scrape (a one-shot `status` reads its histograms)."""
        self._update(agent=AgentStatus(AgentState.LOST, needs_ssh("GPU telemetry", host.name)))

    async def run(self, on_event: OnEvent) -> None:
        self._on_event = on_event
        self._stop = asyncio.Event()
        self._emit(AgentChanged(self.host.name, self._snapshot.agent))
        task = asyncio.create_task(self._server_loop(), name=f"url {self.source.base}")
        try:
            await self._stop.wait()
        finally:
            await cancel_and_wait(task)
            self._on_event = None

    async def _server_step(self) -> bool:
        """HostTelemetry's server loop runs this instead of its own step: the URL, direct."""
        return await self.poll()

    async def poll(self) -> bool:
        """One round: /health, then (healthy) /v1/models, /version, /metrics. True: healthy."""
        now = self.clock.now()
        old = self._snapshot.readiness
        result = await self.source.get("/health")
        health, detail = judge_health(result, running=None, log_ready=False)
        models = old.models if old.ready else ()
        if health is Health.HEALTHY and (not old.ready or not models):
            answer = await self.source.get("/v1/models")
            models = model_ids(answer.body) if answer.ok else ()
            if answer.status == 401:
                detail = ("/v1/models answered 401: the server wants its --api-key (set "
                          "api_key_env or api_key_file in the hosts file)")
            self._engine_version(await self._version())
        readiness = Readiness(health, self.source.base, result.status, detail, models, now)
        self._set_link(result)
        self._update(readiness=readiness)
        if (readiness.health, readiness.http_status, readiness.models, readiness.detail) != (
                old.health, old.http_status, old.models, old.detail):
            self._emit(ReadinessChanged(self.host.name, readiness))
        if not readiness.ready:
            return False
        metrics = await self.source.get("/metrics")
        if metrics.ok:
            self._metrics(parse_metrics(metrics.body), now)
        return True

    @property
    def version(self) -> str | None:
        """The engine's version (from `/version`), None until the server has said it."""
        return self._snapshot.run.version

    def _engine_version(self, version: str | None) -> None:
        """`/version` gives what an SSH session reads from the log's banner: the run's
        version, so `status --json`'s engine.version and the export say it too. No
        `RunUpdated`: the panes a run feeds say they need SSH here, and the header hears of it
        with the `ReadinessChanged` this poll sends."""
        if version is None or version == self.run_log.info.version:
            return
        self.run_log.info = replace(self.run_log.info, version=version)
        self._update(run=self.run_log.info)

    async def _version(self) -> str | None:
        answer = await self.source.get("/version")
        try:
            version = json.loads(answer.body).get("version") if answer.ok else None
        except (ValueError, AttributeError):
            return None
        return version if isinstance(version, str) else None

    def _set_link(self, result: web.HttpResult) -> None:
        link = LinkStatus(ConnectionState.CONNECTED, "HTTP") if result.status is not None \
            else LinkStatus(ConnectionState.RECONNECTING,
                            f"{result.error} at {self.source.base}",
                            retry_in_s=self.options.health_interval_s)
        if link != self.url_host.link:
            self.url_host.set_link(link)
            self._update(link=link)
            self._emit(LinkChanged(self.host.name, link))

    def _metrics(self, snapshot: MetricsSnapshot, now: float) -> None:
        """One scrape: spec decode (the counters say a drafter runs), then the load, its rates
        from the counters' change since the previous scrape."""
        self.last_scrape = snapshot
        counters = snapshot.spec_decode
        if counters is not None and self.run_log.spec.configure(
                SpeculativeSettings(num_spec_tokens=len(counters.accepted_per_pos) or None),
                authoritative=False):
            self._spec_changed()  # the counters say a drafter runs; its name they do not
        self._apply_metrics(snapshot, now)
        totals = (snapshot.prompt_tokens, snapshot.generation_tokens,
                  snapshot.prefix_cache_queries, snapshot.prefix_cache_hits)
        previous, self._counters = self._counters, (now, totals)
        if previous is None or now <= previous[0]:
            return
        seconds = now - previous[0]
        deltas = [None if new is None or old is None else new - old
                  for new, old in zip(totals, previous[1], strict=True)]
        if any(d is not None and d < 0 for d in deltas):
            return  # a counter went down: the server restarted; the next interval is good
        prompt, generation, queries, hits = deltas
        self._load(ServerLoad(
            snapshot.running, snapshot.waiting, snapshot.kv_cache_usage_pct,
            None if prompt is None else prompt / seconds,
            None if generation is None else generation / seconds,
            100.0 * hits / queries if hits is not None and queries else None,
            at=now, source="metrics"))

    def summary(self) -> str:
        """The header's line: what this view is, the model and the engine's version."""
        parts = [f"URL only: {self.source.base}"]
        models = self._snapshot.readiness.models
        if models:
            # A model served from a path is named by its last part: the header has room
            # for a name, not a directory (what needs SSH is said on its own line).
            parts.append(", ".join(m.rstrip("/").rsplit("/", 1)[-1] if m.startswith("/")
                                   else m for m in models))
        if self.version:
            parts.append(f"vLLM {self.version}")
        # The server's words (model ids, version) are data: controls made inert.
        return safe_text(" · ".join(parts), 300)


class UrlSession(HostSession):
    """A `HostSession` on a URL alone: the same snapshot flow, and what the server's HTTP
    endpoints can tell (`SERVER_ONLY`); everything else names the way to add SSH."""

    base_capabilities = SERVER_ONLY

    def __init__(self, name: str, source: UrlSource, *, profile: str = "") -> None:
        config = HostConfig(name=name, readonly=True, serve=ServeSettings(url=source.base))
        if profile:
            config = config.model_copy(update={"checks": config.checks.model_copy(
                update={"profile": profile})})
        host = UrlHost(name)
        super().__init__(config, host)
        self.url_telemetry = UrlTelemetry(host, config, source)
        self.telemetry = self.url_telemetry

    def why_not(self, capability: Capability) -> str:
        return needs_ssh(capability.value, self.name)

    def source_summary(self) -> str | None:
        return self.url_telemetry.summary()


def url_session(name: str, url: str, entry: HostEntry | None = None) -> UrlSession:
    """A URL-only session for a hosts-file entry (its key settings) or, with no entry, a bare
    `--url` (named by its host:port; the key from $VLLM_API_KEY when set). Raises ConfigError."""
    name, key, profile = url_settings(name, url, entry)
    return UrlSession(name, UrlSource(url, key), profile=profile)


__all__ = ["DEFAULT_KEY_ENV", "UrlHost", "UrlSession", "UrlSource", "UrlTelemetry", "needs_ssh",
           "read_api_key", "url_session", "url_settings"]
