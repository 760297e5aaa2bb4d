"""Running the chain on one host: discovery, the probes (concurrently), the four verdicts.

    report = await run_chain(host, config.serve, profile=load_profile("dflash-swa"))

Discovery runs first (one script: the serving interpreter, log, target and draft come from the
running process when not configured). Then every probe runs at once, each one script on the
host — code (serving interpreter), configs and log (python3), fields (serving interpreter,
after the configs say where the draft's config.json is), and for a server in a container all
but the log inside it with its interpreter (`docker exec`) — and each link is judged as soon as
its facts are in (`on_link` sees them in the order they finish). Nothing here raises for a
host that misbehaves: each link says `error` with the reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from vllm_console.checks import select
from vllm_console.checks.configs import ConfigRead, read_configs
from vllm_console.checks.context import ChainContext, log_label, settings_evidence
from vllm_console.checks.links import (
    code_present,
    config_correct,
    fields_extracted,
    method_configs,
    runtime_activation,
)
from vllm_console.checks.links.config_correct import Finding
from vllm_console.checks.links.current_run import CurrentRun, read_run
from vllm_console.checks.links.runtime_activation import EngineLook
from vllm_console.checks.models import LINK_IDS, ChainReport, LinkResult, Status
from vllm_console.checks.profile import Profile, ProfileError, load_profile, method_family
from vllm_console.checks.references import Reference, choose_reference
from vllm_console.checks.restart_hint import HowToRestart
from vllm_console.checks.rootcause import broken_link, root_cause
from vllm_console.console.hostclient.discovery import (
    ChildProcess,
    Resolved,
    ServeArgs,
    discovery_params,
    effective_serve,
    parse_serve_argv,
    resolve_serve,
)
from vllm_console.console.hostclient.launch_record import read_last_launch
from vllm_console.console.settings import ServeSettings
from vllm_console.console.telemetry.http import ServeUrl, http_get
from vllm_console.console.telemetry.logclock import LogClock
from vllm_console.console.telemetry.oneshot import look_at_serving
from vllm_console.console.telemetry.serving import ServingStatus, engine_verdict
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import (
    Inside,
    ScriptRun,
    python_inside,
    run_json,
    shown_command,
)

CODE_TIMEOUT = 120.0
FIELDS_TIMEOUT = 120.0
LOG_TIMEOUT = 60.0
# Only these of the serve process's environment reach the serving-interpreter probes: they
# decide which vLLM that interpreter imports.
PY_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE")


async def _run(ctx: ChainContext, name: str, interpreter: str, payload: dict[str, Any],
               timeout: float, *, on_host: bool = False) -> ScriptRun:
    """Run a probe with the serving interpreter, inside the server's container when it has
    one (`on_host`: a probe that reads what the host keeps, the container's log)."""
    inside = None if on_host else ctx.inside
    env = None
    proc = ctx.serve.process
    if proc is not None and interpreter != "python3" and inside is None:
        env = {k: v for k, v in proc.environ.items() if k in PY_ENV} or None
        # `python -m ...` puts its working directory first on sys.path: a checkout there
        # shadows the installed vLLM for the server, so it must for the probe too.
        if proc.argv[1:2] == ("-m",) and proc.cwd:
            payload = {**payload, "path_first": proc.cwd}
    return await run_json(ctx.host, name, interpreter, payload,
                          timeout=timeout, env=env, inside=inside)


class _Probes:
    """The chain's probes as shared tasks: each runs once, whoever asks first."""

    def __init__(self, ctx: ChainContext, *, engine: EngineLook | None = None,
                 stall_s: float = 30.0) -> None:
        self.ctx = ctx
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._engine = engine
        self._stall_s = stall_s

    def rebind(self, ctx: ChainContext) -> None:
        """Judge with another context (the profile picked for the engine): the configs read
        stays; the log is read again only when the new profile reads it differently."""
        old = self.ctx.profile.links.runtime_activation
        self.ctx = ctx
        if ctx.profile.links.runtime_activation != old:
            self._tasks.pop("log", None)

    async def run_log(self) -> CurrentRun | None:
        """The current run of the log, read the way this profile reads it."""
        run = await self.log()
        if run is None or run.data is None:
            return None
        return read_run(run.data.get("lines") or [],
                        self.ctx.profile.links.runtime_activation,
                        run.data.get("tail") or [])

    def _task(self, key: str, make: Callable[[], Awaitable[Any]]) -> asyncio.Task[Any]:
        if key not in self._tasks:
            self._tasks[key] = asyncio.ensure_future(make())
        return self._tasks[key]

    async def configs(self) -> dict[str, ConfigRead]:
        serve = self.ctx.serve
        proc = serve.process

        async def make() -> dict[str, ConfigRead]:
            models = {"draft": serve.draft.value, "target": serve.target.value}
            if self.ctx.no_python:  # a container with no interpreter cannot read its files
                return {k: ConfigRead(k, v, problem=f"cannot read the {k} config inside the "
                                                    f"container: {self.ctx.no_python}")
                        for k, v in models.items()}
            return await read_configs(self.ctx.host, models,
                                      dict(proc.environ) if proc else {},
                                      proc.cwd if proc else None, inside=self.ctx.inside,
                                      python=serve.python.value)
        return await self._task("configs", make)  # type: ignore[no-any-return]

    async def code(self) -> ScriptRun | None:
        python = self.ctx.serve.python.value
        spec = self.ctx.profile.links.code_present

        async def make() -> ScriptRun | None:
            if not python:
                return None
            return await _run(self.ctx, "probe-code", python, code_present.payload(spec),
                              CODE_TIMEOUT)
        return await self._task("code", make)  # type: ignore[no-any-return]

    async def fields(self) -> ScriptRun | None:
        python = self.ctx.serve.python.value
        links = self.ctx.profile.links

        async def make() -> ScriptRun | None:
            # MTP heads live in the target's checkpoint: its config is the one vLLM builds.
            which = "target" if self.ctx.profile.kind == "mtp" else "draft"
            draft = (await self.configs())[which]
            if not python or not draft.ok:
                return None
            params = fields_extracted.payload(links.fields_extracted, draft.path,
                                              links.code_present.package)
            return await _run(self.ctx, "probe-fields", python, params, FIELDS_TIMEOUT)
        return await self._task("fields", make)  # type: ignore[no-any-return]

    async def engine(self) -> EngineLook | None:
        """The engine's state: the caller's (the TUI's live telemetry), else a look at the
        server's `/metrics` (None: it does not answer /health; the log tells why)."""
        async def make() -> EngineLook | None:
            return self._engine or await _look_at_engine(self.ctx, self._stall_s)
        return await self._task("engine", make)  # type: ignore[no-any-return]

    async def log(self) -> ScriptRun | None:
        path = self.ctx.serve.log.value
        proc = self.ctx.serve.process
        spec = self.ctx.profile.links.runtime_activation
        container = proc.container if proc is not None and not path else None

        async def make() -> ScriptRun | None:
            if not path and container is None:
                return None
            params = runtime_activation.payload(spec, path, proc.pid if proc else None)
            if container is not None:  # its output, since its start (`docker logs`)
                params["container"] = {"runtime": container.runtime, "ref": container.ref,
                                       "since": container.started_at}
            return await _run(self.ctx, "probe-log", "python3", params, LOG_TIMEOUT,
                              on_host=True)
        return await self._task("log", make)  # type: ignore[no-any-return]


async def _look_at_engine(ctx: ChainContext, stall_s: float) -> EngineLook | None:
    """`/health`, then `/metrics` until a token comes or `stall_s` passes (a busy engine is
    seen making progress within a second or two; a hung one takes `stall_s` to prove). A
    server that answers `/health` with an error (so past start-up, and unwell) with no
    EngineCore process left below it is `dead`. None: the server does not answer `/health`
    (starting, or gone: the log tells which)."""
    url = ServeUrl.parse(ctx.serve.url.value or "")
    if url is None:
        return None
    health = await http_get(ctx.host, url, "/health")
    proc = ctx.serve.process
    engines = None if proc is None else [c for c in proc.children if _is_engine_core(c)]
    tree = "" if proc is None else f"; below pid {proc.pid}: " + (
        ", ".join(f"{c.pid} {c.comm}" for c in engines[:4]) if engines else "no EngineCore")
    answered = f"/health: {health.status or health.error}"
    if engines == [] and health.status is not None and not health.ok:
        # 200 with no EngineCore is an engine inside the API server (vLLM's V0): not dead.
        state, reason = engine_verdict(ServingStatus(), api_alive=True, engine_dead_line=None,
                                       engine_procs=0, started=True)
        return EngineLook(state.value, reason, f"GET {url.base}/health, and the serve "
                          "process's tree (/proc)", answered + tree)
    if not health.ok:
        return None
    look = await look_at_serving(ctx.host, url, stall_s=stall_s, clock=LogClock(), settle_s=0.0)
    state, reason = engine_verdict(look.status, api_alive=True if proc else None,
                                   engine_dead_line=None, engine_procs=None, started=True)
    excerpt = f"{answered} (vLLM answers it while its engine hangs); stall time " \
              f"{stall_s:g} s{tree}"
    return EngineLook(state.value, reason, f"GET {look.url}/metrics ({look.scrapes} scrape"
                      f"{'s' if look.scrapes > 1 else ''}, about a second apart)", excerpt)


def _is_engine_core(child: ChildProcess) -> bool:
    """vLLM renames its engine process `VLLM::EngineCore` (cut to 15 bytes in comm)."""
    return "EngineCor" in child.comm or "EngineCore" in child.cmdline


async def _inside(ctx: ChainContext) -> ChainContext:
    """For a server in a container: the probes run inside it, with the container's own
    interpreter (configured, else the one its entry point names), never on the host."""
    proc = ctx.serve.process
    if proc is None or proc.container is None:
        return ctx
    inside = Inside(proc.container.runtime, proc.container.ref)
    if ctx.serve.python.value:
        return replace(ctx, inside=inside)
    python, why = await python_inside(ctx.host, inside, proc.argv[0] if proc.argv else "")
    serve = replace(ctx.serve, python=Resolved(python, f"inside {inside.words}")) \
        if python else ctx.serve
    return replace(ctx, inside=inside, serve=serve, no_python=why)


def _reference(ctx: ChainContext, draft: ConfigRead) -> Reference | None:
    if ctx.reference is not None:
        return ctx.reference
    names = [draft.model, draft.path.rsplit("/config.json", 1)[0]]
    if draft.data is not None and isinstance(draft.data.get("_name_or_path"), str):
        names.append(draft.data["_name_or_path"])
    try:
        return choose_reference(ctx.profile, names)
    except ProfileError:
        return None


async def _method_findings(ctx: ChainContext, probes: _Probes, draft: ConfigRead,
                           target: ConfigRead) -> list[Finding] | None:
    """Config-correct's findings for kinds other than DFlash (None: DFlash's own)."""
    profile = ctx.profile
    spec = profile.links.config_correct
    asked, max_len = ctx.asked, ctx.max_model_len
    if profile.kind in ("ngram", "mtp", "draft-model") and (not asked or max_len is None):
        log = await probes.run_log()  # no command line: what the API server logged
        if log is not None:
            asked = asked or select.asked_in_log(log.asked)
            logged = log.asked.get("max_model_len")
            max_len = max_len if max_len is not None else \
                (logged if isinstance(logged, int) else None)
    if profile.kind == "eagle3":
        return method_configs.eagle3(draft.data, target.data, spec) if draft.data else []
    if profile.kind == "draft-model":
        return method_configs.draft_model(draft.data, target.data, max_len) \
            if draft.data else []
    if profile.kind == "ngram":
        return method_configs.ngram(asked, spec)
    if profile.kind == "mtp":
        return method_configs.mtp(target.data, asked, spec)
    return None


async def _judge(link_id: str, ctx: ChainContext, probes: _Probes) -> LinkResult:
    links = ctx.profile.links
    kind = ctx.profile.kind
    serve = ctx.serve
    host = ctx.host.name
    if link_id == "code-present":
        return code_present.evaluate(links.code_present, serve.python.value,
                                     await probes.code(), settings_evidence(ctx, "python"),
                                     host=host, no_python=ctx.no_python)
    if link_id == "fields-extracted":
        configs = await probes.configs()
        if links.fields_extracted.probe == "speculative-config":
            return fields_extracted.evaluate_engine_config(
                links.fields_extracted, links.runtime_activation, ctx.asked,
                await probes.log(), settings_evidence(ctx, "log"), host=host)
        which = "target" if kind == "mtp" else "draft"
        return fields_extracted.evaluate(links.fields_extracted, serve.python.value,
                                         configs[which], await probes.fields(),
                                         settings_evidence(ctx, "python", which), host=host,
                                         kind=kind, no_python=ctx.no_python)
    if link_id == "config-correct":
        configs = await probes.configs()
        draft, target = configs["draft"], configs["target"]
        return config_correct.evaluate(links.config_correct, draft, target,
                                       _reference(ctx, draft),
                                       settings_evidence(ctx, "draft", "target"), host=host,
                                       kind=kind, method_findings=await _method_findings(
                                           ctx, probes, draft, target))
    configs = await probes.configs()
    engine = await probes.engine()
    # A live serve process whose URL does not answer /health yet: starting (or its API
    # server hangs; the log, once it has a run, tells which).
    starting = serve.process is not None and engine is None and \
        ServeUrl.parse(serve.url.value or "") is not None
    return runtime_activation.evaluate(
        links.runtime_activation, log_label(ctx), await probes.log(), configs["draft"],
        settings_evidence(ctx, "log", "draft"), watch=ctx.profile.watch,
        host_label=ctx.host_label, host=host, checked_draft=serve.draft.value, kind=kind,
        methods=ctx.profile.methods, expected=ctx.profile.acceptance,
        target=configs["target"].data, changed_since=_changed_since(ctx, configs["draft"]),
        engine=engine, starting=starting, restart=ctx.restart)


CLOCK_GRAIN = 0.05
"""Seconds of slack between a config's mtime and the process start (both from the host's
clock): a start time is known to a clock tick and the boot time to /proc/uptime's hundredth."""


def _changed_since(ctx: ChainContext, draft: ConfigRead) -> str:
    """Words when the draft config was written after the running server started (`a` before
    the restart), else ""."""
    proc = ctx.serve.process
    if proc is None or proc.start_time is None or draft.mtime is None:
        return ""
    if draft.mtime <= proc.start_time + CLOCK_GRAIN:
        return ""
    late = draft.mtime - proc.start_time
    return f"{draft.path} was written {late:.0f} s after pid {proc.pid} started"


def _launch(ctx: ChainContext, last: Mapping[str, Any]) -> tuple[ServeArgs | None, str]:
    """The launch's arguments and where they come from: the serve process, else the
    console's last launch of it."""
    proc = ctx.serve.process
    if proc is not None:
        return proc.args, f"the serve command line, pid {proc.pid}"
    argv = last.get("argv")
    if isinstance(argv, list) and argv:
        return parse_serve_argv([str(a) for a in argv]), "the console's last launch"
    return None, ""


async def _pick(ctx: ChainContext, probes: _Probes, last: Mapping[str, Any]) -> ChainContext:
    """The context with the profile for the engine's method (`--profile auto`)."""
    args, where = _launch(ctx, last)
    draft = (await probes.configs())["draft"]
    asked: Mapping[str, Any] = args.speculative if args else {}
    method = select.infer_method(asked, draft.data) if asked else None
    if method is None:
        log = await probes.run_log()  # the default profile's reading: the same run marks
        if log is not None:
            logged = select.asked_in_log(log.asked)
            if log.engine_method:
                method, where = method_family(log.engine_method), "the engine start line"
            elif logged:
                method = select.infer_method(logged, draft.data)
                where = "the log's `non-default args`"
    names = [draft.model, draft.path.rsplit("/config.json", 1)[0]]
    choice = select.choose(method, where, draft=draft.data, draft_names=names,
                           reference=ctx.reference.config if ctx.reference else None)
    return replace(ctx, profile=choice.profile, choice=choice.why)


async def run_chain(host: Host, settings: ServeSettings, *, profile: Profile | None = None,
                    reference: Reference | None = None, host_label: str | None = None,
                    on_link: Callable[[LinkResult], None] | None = None,
                    engine: EngineLook | None = None,
                    restart: HowToRestart | None = None) -> ChainReport:
    """Run the whole chain on a connected (or connectable) host. `engine`: the engine's state
    as the caller knows it (the TUI's telemetry); else the chain looks at `/metrics`.
    `restart`: how the hints' reader restarts the host (default: `vllm-console restart
    HOST_LABEL`)."""
    started = time.monotonic()
    profile = profile or load_profile()
    discovery_error = None
    command = ""
    found: tuple[str, ...] = ()
    try:
        resolution = await resolve_serve(host, settings)
        process, found = resolution.process, resolution.notes
        # Installed already: the path comes from the cache, no round trip.
        command = shown_command("python3", await host.scripts.bundle(), "discover",
                                payload=discovery_params(settings))
    except HostError as exc:
        process, discovery_error = None, str(exc)
    # No server: the one the console launched last for this entry is the run to judge.
    last = await read_last_launch(host, settings) \
        if process is None and discovery_error is None else {}
    ctx = ChainContext(host=host, host_label=host_label or host.name, profile=profile,
                       serve=effective_serve(settings, process, last=last, found_notes=found),
                       reference=reference, discovery_error=discovery_error,
                       match=settings.match, discovery_command=command, restart=restart)
    ctx = await _inside(ctx)
    args, _where = _launch(ctx, last)
    if args is not None:
        ctx = replace(ctx, asked=args.speculative, max_model_len=args.max_model_len)
    probes = _Probes(ctx, engine=engine, stall_s=settings.stall_s)
    # Started now, beside the other probes: a busy engine takes a second to be seen serving.
    looking = asyncio.ensure_future(probes.engine())
    if profile.auto:
        try:
            ctx = await _pick(ctx, probes, last)
        except Exception as exc:  # a bug must cost the choice, never the report
            ctx = replace(ctx, choice=f"profile {profile.name}: the default (picking one "
                                      f"failed: {type(exc).__name__}: {exc})")
        probes.rebind(ctx)
        profile = ctx.profile

    async def judged(link_id: str) -> LinkResult:
        try:
            link = await _judge(link_id, ctx, probes)
        except Exception as exc:  # a bug must cost one link, never the report
            link = LinkResult(id=link_id, title=profile.titles()[link_id], status=Status.ERROR,
                              summary=f"internal error while judging this link: "
                                      f"{type(exc).__name__}: {exc}",
                              hint="please report it with `check --json` output")
        if on_link is not None:
            on_link(link)
        return link

    try:
        links = await asyncio.gather(*(judged(link_id) for link_id in LINK_IDS))
    finally:
        looking.cancel()  # done by now, unless runtime activation never got to ask
    return ChainReport(host=host_label or host.name, profile=profile.name, links=tuple(links),
                       broken_link=broken_link(links),
                       root_cause=root_cause(links, profile.requires()),
                       seconds=time.monotonic() - started, warnings=ctx.serve.warnings)
