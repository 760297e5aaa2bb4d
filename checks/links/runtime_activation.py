"""Link 3, runtime activation: evidence from the current run of the serve log only.

The current run begins where the console's telemetry says it does (one rule,
`console.telemetry.startup.current_run_start`: restart marker, banner, `non-default args`,
engine line; a start-up that dies before its engine line is a run too). Three things are
looked for in it: the aux-layer line (it must equal `target_layer_ids + 1`, the #40727
offset), no refusal of the drafter's attention layout, and positive evidence that SWA layers
were built. vLLM logs nothing when it builds SWA layers, so that evidence only comes from a
traced run (`checks.trace`): silence is `unknown`, never `pass`, and the hint offers
`vllm-console restart HOST --trace`.

Fail, too, whatever the log says: an engine that is `stalled` (requests in flight and no token
for `stall_s`; vLLM's /health keeps answering 200 then) or `dead` (its process gone while the
API server lives), as the serving look saw it (`EngineLook`): a drafter that is not drafting
because nothing runs at all.

Fail: a refusal, a start-up that failed (before or after its engine line: the exception is the
evidence), an aux-layer line that is not `target_layer_ids + 1`, or a trace in which a watched
function ran and built the layers differently from the config, or raised (a config naming no
sliding layers gives SWA nothing to activate: that fails here, and the root cause analysis
blames config-correct). A trace in which no watched function ran (absent from this vLLM, or
never called) is absence of evidence: `unknown`, naming them, never `fail`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from checks import draftconfig as dc
from checks.configs import ConfigRead
from checks.links import method_activation
from checks.links.common import LINK_HINT, result, run_evidence, short_list
from checks.models import Evidence, LinkResult, Status
from checks.profile import Acceptance, Refusal, RuntimeActivationSpec
from checks.trace import TRACE_TAG, TraceEvent, parse_trace_line
from console.parsers.aux import parse_aux_layers
from console.parsers.classifier import classify
from console.parsers.engine import EngineConfig, NonDefaultArgs, VersionBanner
from console.parsers.errors import ErrorKind, parse_error
from console.parsers.prefix import LogLine, parse_line
from console.parsers.spec_decode import parse_spec_decode
from console.telemetry.startup import RunMark, current_run_start, run_mark
from console.transport.remote_scripts import ScriptRun

LINK = "runtime-activation"
LAYER_TYPES_FN = "_get_dflash_layer_types"
RESOLVE_FN = "_resolve_layer_attention"


def payload(spec: RuntimeActivationSpec, path: str, pid: int | None) -> dict[str, Any]:
    """The log probe's parameters."""
    return {"path": path, "pid": pid, "start_markers": list(spec.start_markers),
            "ready_markers": list(spec.ready_markers),
            "keywords": [*spec.keywords, *spec.failures, *spec.loaded, TRACE_TAG],
            "tail_keywords": [*spec.tail_keywords, *spec.failures], "tail_bytes": TAIL_BYTES,
            "max_lines": 400, "max_line": 65536, "lookback": LOOKBACK}


TAIL_BYTES = 1 << 20
"""How much of the log's end is searched past start-up (a crash on the first request, the
latest acceptance): vLLM writes ~1 KB every 10 s when idle, more under traffic."""


# How far before the last run mark the probe reads: the same run's earlier marks (restart
# marker, banner, arguments) and lines (a trace's `missing` events from the API server) lie
# within a few KB of its engine line, even at DEBUG level.
LOOKBACK = 1024 * 1024


@dataclass(frozen=True)
class EngineLook:
    """The engine's state as the serving look saw it (`status --json`'s `serve.engine`): one
    of ok, idle, stalled, dead, unknown, with the reason and how it was seen."""

    state: str
    reason: str
    command: str
    """What was asked (`GET URL/metrics, 3 scrapes`, or the live telemetry's)."""
    excerpt: str = ""

    @property
    def broken(self) -> bool:
        return self.state in ("stalled", "dead")

    def evidence(self) -> Evidence:
        return Evidence.make("serving", self.command, None,
                             "\n".join(filter(None, [f"engine: {self.state}: {self.reason}",
                                                     self.excerpt])))


ENGINE_HINT = ("vLLM's /health answers 200 while its engine hangs (vllm#39863): look at the "
               "EngineCore process (its state; `py-spy dump --pid PID`) and the log's last "
               "lines, then restart the server (r, or `vllm-console restart {host}`)")


def with_engine(link: LinkResult, engine: EngineLook | None, host_label: str) -> LinkResult:
    """The link's verdict with the engine's state: a stalled or dead engine fails it, the
    log's own verdict kept in the details; any other state is only noted."""
    if engine is None:
        return link
    details = {**link.details, "engine": engine.state, "engine_reason": engine.reason}
    evidence = [*link.evidence, engine.evidence()]
    if not engine.broken or link.status is Status.ERROR:
        return result(LINK, link.title, link.status, link.summary, link.hint, evidence, details)
    return result(LINK, link.title, Status.FAIL,
                  f"the engine is {engine.state}: {engine.reason} (the log: {link.summary})",
                  ENGINE_HINT.format(host=host_label), evidence,
                  {**details, "log_status": link.status.value})


@dataclass(frozen=True)
class RunLog:
    """What the current run's lines say."""

    started: bool = False
    """A run mark (restart marker, banner, arguments, engine line) begins the run."""
    start_offset: int | None = None
    engine_line: str | None = None
    engine_draft: str | None = None
    version: str | None = None
    aux: tuple[int, ...] | None = None
    aux_line: str | None = None
    refusals: tuple[tuple[Refusal, str], ...] = ()
    failures: tuple[str, ...] = ()
    exceptions: tuple[str, ...] = ()
    trace: tuple[TraceEvent, ...] = ()
    trace_lines: tuple[str, ...] = ()
    ready: bool = False
    marker: str | None = None
    """A restart's marker line that starts the run, when there is one."""
    hook_errors: tuple[str, ...] = ()
    """The trace hook's own `hook error:` lines (not trace events)."""
    engine_method: str | None = None
    """The speculative method the engine start line names."""
    engine_tokens: int | None = None
    asked: Mapping[str, Any] = field(default_factory=dict)
    """`non-default args`, as the API server logged them."""
    loaded: tuple[str, ...] = ()
    """Lines that show the drafter built or loaded (the profile's `loaded`)."""
    died: tuple[str, ...] = ()
    """Failures and exceptions after start-up (an engine that died on a request)."""
    acceptance: float | None = None
    """The latest `SpecDecoding metrics` mean acceptance length."""
    drafted: int = 0
    """Draft tokens in the `SpecDecoding metrics` lines seen past start-up."""

    @property
    def traced(self) -> bool:
        """The run was relaunched by a traced restart (its marker says `trace=on`)."""
        return self.marker is not None and self.marker.rstrip().endswith("trace=on")


def read_run(lines: Sequence[Sequence[Any]], spec: RuntimeActivationSpec,
             tail: Sequence[Sequence[Any]] = ()) -> RunLog:
    """Sort the current run's lines into what the link needs (without a run mark, the lines
    are a log's tail: read, but `started` is False). `tail`: the lines past start-up."""
    run = _read_run(lines, spec)
    if not run.started or not tail:
        return run
    return _read_tail(run, tail, spec)


def _read_tail(run: RunLog, tail: Sequence[Sequence[Any]],
               spec: RuntimeActivationSpec) -> RunLog:
    died: list[str] = []
    acceptance, drafted = None, 0
    start = run.start_offset or 0
    for offset, raw in tail:
        if not isinstance(offset, int) or offset < start:
            continue
        line = parse_line(str(raw))
        message = line.message
        sample = parse_spec_decode(message)
        if sample is not None:
            acceptance = sample.mean_acceptance_length if \
                sample.mean_acceptance_length is not None else acceptance
            drafted += sample.drafted_tokens or 0
            continue
        if _broke(line, spec):
            died.append(message.strip())
    return replace(run, died=tuple(dict.fromkeys([*run.died, *died])), acceptance=acceptance,
                   drafted=drafted)


def _broke(line: LogLine, spec: RuntimeActivationSpec) -> bool:
    """A line past start-up that says the engine broke: a failure marker (`EngineDeadError`),
    or an exception the engine's own processes logged as an error (a request the API server
    refused, a client's 404, is not the engine breaking)."""
    if any(f in line.text for f in spec.failures):
        return True
    if line.proc is None or line.proc.startswith("APIServer") or \
            line.level not in ("ERROR", "CRITICAL"):
        return False
    error = parse_error(line.message, line.level)
    return error is not None and error.kind is ErrorKind.EXCEPTION


def _read_run(lines: Sequence[Sequence[Any]], spec: RuntimeActivationSpec) -> RunLog:
    parsed = [(offset, classify(parse_line(str(raw)))) for offset, raw in lines]
    first = current_run_start(run_mark(event) for _offset, event in parsed)
    patterns = [(r, re.compile(r.pattern)) for r in spec.refusals]
    engine_line = engine_draft = version = aux_line = marker = None
    aux: tuple[int, ...] | None = None
    refusals: list[tuple[Refusal, str]] = []
    failures: list[str] = []
    exceptions: list[str] = []
    trace: list[TraceEvent] = []
    trace_lines: list[str] = []
    hook_errors: list[str] = []
    loaded: list[str] = []
    asked: Mapping[str, Any] = {}
    engine_method: str | None = None
    engine_tokens: int | None = None
    died: list[str] = []
    ready = False
    for _offset, event in parsed[first or 0:]:
        line = event.line
        text, message = line.text, line.message
        mark = run_mark(event)
        if mark is RunMark.RESTART:
            marker = marker or text
            continue
        if mark is RunMark.BANNER and isinstance(event.payload, VersionBanner):
            version = version or event.payload.version
            continue
        if mark is RunMark.ENGINE and isinstance(event.payload, EngineConfig):
            if engine_line is None:
                engine_line, version = text, event.payload.version or version
                if event.payload.speculative is not None:
                    engine_draft = event.payload.speculative.model
                    engine_method = event.payload.speculative.method
                    engine_tokens = event.payload.speculative.num_spec_tokens
            continue
        if mark is RunMark.ARGS and isinstance(event.payload, NonDefaultArgs):
            asked = asked or event.payload.args
            continue
        if mark is not None:
            continue
        if any(m in text for m in spec.loaded):
            loaded.append(message.strip())
        if TRACE_TAG in text:
            trace_event = parse_trace_line(text)
            if trace_event is not None:
                trace.append(trace_event)
                trace_lines.append(message)
            elif "hook error:" in text:
                hook_errors.append(text[text.index(TRACE_TAG):].strip())
            continue
        found_aux = parse_aux_layers(message)
        if found_aux is not None:
            aux, aux_line = found_aux, message
        for refusal, pattern in patterns:
            if pattern.search(text):
                refusals.append((refusal, message.strip()))
                break
        error = parse_error(message, line.level)
        if ready:  # past start-up: the engine came up, then broke on a request
            if _broke(line, spec):
                died.append(message.strip())
            continue
        if any(f in text for f in spec.failures):
            failures.append(message.strip())
        if "[type=" in message and exceptions and "validation error" in exceptions[-1]:
            # pydantic's reason, on the line after its `ValidationError: N validation error
            # for X` (which says little by itself); parse_error calls it a ValueError too.
            exceptions[-1] += " — " + message.strip().split(" [type=", 1)[0]
        elif error is not None and error.kind is ErrorKind.EXCEPTION:
            exceptions.append(message.strip())
        if any(m in text for m in spec.ready_markers):
            ready = True
    return RunLog(first is not None, parsed[first][0] if first is not None else None,
                  engine_line, engine_draft, version, aux, aux_line, tuple(refusals),
                  tuple(failures), tuple(exceptions), tuple(trace), tuple(trace_lines), ready,
                  marker, tuple(hook_errors), engine_method, engine_tokens, asked,
                  tuple(loaded), tuple(dict.fromkeys(died)))


@dataclass(frozen=True)
class TraceVerdict:
    """What the trace lines say: `pass`, `fail`, `unknown` (a trace in which no watched
    function ran: no evidence either way) or None (no verdict yet), and in words."""

    status: str | None
    message: str
    built_sliding: tuple[int, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    hint: str = ""


def _where(events: Sequence[TraceEvent], event: str) -> dict[str, list[int]]:
    """{function: [pids]} of the events of one kind, in the order first seen."""
    out: dict[str, list[int]] = {}
    for e in events:
        if e.event == event:
            pids = out.setdefault(e.function, [])
            if e.pid is not None and e.pid not in pids:
                pids.append(e.pid)
    return out


def _in_pids(where: Mapping[str, Sequence[int]]) -> str:
    return "; ".join(f"{fn} in pid{'s' if len(pids) > 1 else ''} {short_list(pids, 4)}"
                     if pids else fn for fn, pids in where.items())


def _nothing_ran(events: Sequence[TraceEvent], version: str | None) -> TraceVerdict:
    """A traced run in which no watched function ran: absence of evidence, never a fail."""
    missing = _where(events, "missing")
    idle = {fn: pids for fn, pids in _where(events, "installed").items() if fn not in missing}
    parts = []
    if missing:
        parts.append(f"missing from this vLLM: {_in_pids(missing)}")
    if idle:
        parts.append(f"installed but never called: {_in_pids(idle)}")
    build = f"vLLM {version}" if version else "this vLLM (version not in the log)"
    return TraceVerdict(
        "unknown", f"the traced run hooked none of the watched functions that build the "
        f"drafter's layers ({'; '.join(parts)}; {build}): no evidence either way",
        details={"missing": missing, "never_called": idle, "version": version},
        hint=f"the profile's `watch` names functions {build} does not build the drafter with: "
             "use a profile written for this version, or write one (checks/profiles/*.toml, "
             "`watch`) naming the functions it calls, then restart with --trace again")


def judge_trace(events: Sequence[TraceEvent], cfg: Mapping[str, Any] | None,
                watch: Sequence[str], *, ready: bool,
                version: str | None = None) -> TraceVerdict:
    """Compare how the traced run built the drafter's layers with what the config asks. Only
    the watched functions that ran are evidence: a function absent from this vLLM, or never
    called, says nothing about the layers."""
    watched = {w.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for w in watch}
    events = [e for e in events if e.function in watched]
    if not events:
        return TraceVerdict(None, "no trace lines")
    raised = [e for e in events if e.event == "call" and e.raised]
    if raised:
        return TraceVerdict("fail", f"{raised[0].function} raised {raised[0].raised}")
    calls = [e for e in events if e.event == "call"]
    if not calls:
        if ready or not _where(events, "installed"):
            return _nothing_ran(events, version)
        return TraceVerdict(None, "traced run still starting: the drafter is not built yet")
    built: dict[int, int | None] = {}
    read = [e for e in calls if (e.function == LAYER_TYPES_FN and isinstance(e.result, list))
            or (e.function == RESOLVE_FN and isinstance(e.result, list) and e.result
                and isinstance(e.args.get("layer_idx"), int))]
    if not read:
        # A call whose result says nothing this link can read (another profile's function, or
        # a changed return value) is no evidence about the layers either.
        return TraceVerdict(
            "unknown", f"the traced run called {_in_pids(_where(calls, 'call'))}, but no call "
            f"returned a layer layout this console reads (from {LAYER_TYPES_FN} or "
            f"{RESOLVE_FN}): no evidence either way",
            details={"called": _where(calls, "call"), "version": version},
            hint="see the trace lines in the evidence; a profile's `watch` is read for the "
                 f"layer layout only through {LAYER_TYPES_FN} and {RESOLVE_FN}")
    for e in read:
        if e.function == LAYER_TYPES_FN and isinstance(e.result, list):
            window = e.args.get("sliding_window")
            for i, t in enumerate(e.result):
                if t == "sliding_attention":
                    built.setdefault(i, window if isinstance(window, int) else None)
        elif e.function == RESOLVE_FN and isinstance(e.result, list) and e.result:
            idx = e.args.get("layer_idx")
            if isinstance(idx, int):
                w = e.result[0]
                if isinstance(w, int) and w > 0:
                    built[idx] = w
                else:
                    built.pop(idx, None)
    sliding = tuple(sorted(built))
    expected = tuple(dc.sliding_layers(cfg)) if cfg is not None else None
    windows = sorted({w for w in built.values() if w})
    shown = f"layers {list(sliding)} as sliding" + (f" (window {short_list(windows)})"
                                                    if windows else "")
    ran = sorted({e.function for e in calls})
    absent = sorted(set(_where(events, "missing")) - set(ran))
    if absent:  # judged by the functions that ran
        shown += f" ({short_list(absent)} missing from this vLLM; judged by {short_list(ran)})"
    details = {"built_sliding": list(sliding), "expected_sliding": expected,
               "missing": absent}
    if expected is None:
        if sliding:
            return TraceVerdict("pass", f"the traced run built {shown}", sliding, details)
        return TraceVerdict("fail", "the traced run built every drafter layer as full "
                                    "attention", sliding, details)
    if not expected and not sliding:
        return TraceVerdict("fail", "SWA is not active: the traced run built every drafter "
                                    "layer as full attention, as the config (naming no sliding "
                                    "layers) asks", sliding, details)
    if sliding == expected:
        return TraceVerdict("pass", f"the traced run built {shown}, as the config asks",
                            sliding, details)
    if not sliding:
        return TraceVerdict("fail", f"the traced run built every drafter layer as full "
                                    f"attention; the config makes layers {list(expected)} "
                                    "sliding", sliding, details)
    return TraceVerdict("fail", f"the traced run built {shown}; the config makes layers "
                                f"{list(expected)} sliding", sliding, details)


def _log_problem(state: Mapping[str, Any], host: str) -> tuple[str, str]:
    path, what = state.get("path"), state.get("state")
    if what == "missing":
        return (f"log {path} not found on {host}: rotated away or deleted?",
                "pass --log with the file the server writes to now (its stdout)")
    if what == "denied":
        return (f"log {path}: permission denied for the login user",
                "make the log readable by the login user, or pass --log")
    if what == "is-a-directory":
        return f"log {path} is a directory", "pass --log with the serve log file"
    if what == "not-a-file":
        return (f"log {path} is not a regular file", "pass --log with the serve log file")
    return f"log {path}: cannot read: {state.get('error', what)}", "pass --log"


def _excerpt(data: Mapping[str, Any], log: RunLog) -> str:
    state = data.get("log") or {}
    lines = [f"log: {state.get('path')}" + (f" via {state['via']} (name rotated away)"
                                            if state.get("via") else "")
             + f", {state.get('size', 0) / 1e6:.1f} MB"]
    if log.start_offset is not None:
        lines.append(f"current run starts at byte {log.start_offset}; scanned "
                     f"{data.get('scanned', 0) / 1e6:.2f} MB"
                     + (" to the end of start-up" if data.get("ready_at") is not None else "")
                     + (" (scan cap reached)" if data.get("capped") else ""))
    if log.version:
        lines.append(f"vLLM version: {log.version}")
    if log.marker:
        lines.append(f"run marker: {log.marker[:300]}")
    if log.engine_line:
        lines.append(f"engine start: {log.engine_line[:300]}")
    if log.aux_line:
        lines.append(f"aux layers: {log.aux_line}")
    lines += [f"refusal: {text}" for _r, text in log.refusals[:3]]
    lines += [f"failure: {text}" for text in log.failures[:3]]
    lines += [f"after start-up: {text[:300]}" for text in log.died[:4]]
    lines += [f"drafter: {text[:200]}" for text in log.loaded[:4]]
    if log.engine_method:
        lines.append(f"speculative method (engine line): {log.engine_method}"
                     + (f", {log.engine_tokens} tokens" if log.engine_tokens else ""))
    if log.acceptance is not None:
        lines.append(f"latest acceptance length (SpecDecoding metrics): {log.acceptance:.2f}; "
                     f"{log.drafted} draft tokens since start-up")
    lines += [f"exception: {text}" for text in log.exceptions[:3]]
    lines += [f"trace: {text[:300]}" for text in log.trace_lines[:12]]
    lines += [f"trace hook: {text[:300]}" for text in log.hook_errors[:3]]
    if len(log.trace_lines) > 12:
        lines.append(f"(+{len(log.trace_lines) - 12} more trace lines)")
    if data.get("dropped"):
        lines.append(f"({data['dropped']} more matching lines not brought back)")
    lines.append("start-up complete" if log.ready else "start-up not complete in this run")
    return "\n".join(lines)


def _before_engine(title: str, log: RunLog, evidence: list[Evidence]) -> LinkResult:
    """A run that has not reached its engine line: failed at start-up (the API server died:
    a refusal, an exception), or still on its way."""
    details = {"phase": "before-engine", "version": log.version, "ready": False}
    if log.refusals:
        refusal, text = log.refusals[0]
        return result(LINK, title, Status.FAIL, f"vLLM refused the drafter before its engine "
                      f"started: {text[:300]}", refusal.hint, evidence, details)
    if log.exceptions or log.failures:
        cause = log.exceptions[0] if log.exceptions else log.failures[0]
        return result(LINK, title, Status.FAIL, f"the server failed at start-up, before its "
                      f"engine started: {cause[:300]}",
                      "vLLM refused this launch before starting its engine (the API server "
                      "checks the configuration there): fix what the error names (a launch "
                      "option or the draft config), then restart; the whole traceback is in "
                      "the log (the console's log pane)", evidence,
                      {**details, "failure": cause})
    return result(LINK, title, Status.UNKNOWN, "the current run has not started its engine "
                  "yet (no engine start line since it began)",
                  "check again once the server is up", evidence, details)


def evaluate(spec: RuntimeActivationSpec, log_path: str, run: ScriptRun | None,
             draft: ConfigRead, context: Evidence, *, watch: Sequence[str], host_label: str,
             host: str = "the host", checked_draft: str = "", kind: str = "dflash-swa",
             methods: Sequence[str] = (), expected: Acceptance | None = None,
             target: Mapping[str, Any] | None = None, changed_since: str = "",
             engine: EngineLook | None = None) -> LinkResult:
    """The verdict from the current run of the log (kinds other than `dflash-swa`: judged by
    `checks.links.method_activation` once the engine line is there). `changed_since`: the
    draft config was written after this run started (in words): the run's evidence is about
    the old config, so the verdict is `unknown`, "restart to apply", never a failure.
    `engine`: the serving look's verdict (`with_engine`)."""
    link = _evaluate(spec, log_path, run, draft, context, watch=watch, host_label=host_label,
                     host=host, checked_draft=checked_draft, kind=kind, methods=methods,
                     expected=expected, target=target)
    if changed_since and link.status is not Status.ERROR:
        link = result(LINK, link.title, Status.UNKNOWN,
                      f"config changed on disk since this run started; restart to apply "
                      f"({changed_since}; the running engine has the old one: {link.summary})",
                      f"restart vllm serve (r, or `vllm-console restart {host_label}`) to load "
                      "the new config, then check again", link.evidence,
                      {**link.details, "config_changed": changed_since})
    return with_engine(link, engine, host_label)


def _evaluate(spec: RuntimeActivationSpec, log_path: str, run: ScriptRun | None,
              draft: ConfigRead, context: Evidence, *, watch: Sequence[str], host_label: str,
              host: str, checked_draft: str, kind: str, methods: Sequence[str],
              expected: Acceptance | None, target: Mapping[str, Any] | None) -> LinkResult:
    title = spec.title
    trace_hint = (f"run `vllm-console restart {host_label} --trace`: the traced run logs how "
                  "each drafter layer is built, which turns this into pass or fail")
    if not log_path:
        return result(LINK, title, Status.ERROR,
                      "no serve log: the serve process's output is not a file (or no serve "
                      "process runs) and serve.log is not set",
                      "pass --log with the file vllm serve writes to", [context])
    if run is None or run.data is None:
        why = run.error if run else "the probe did not run"
        hint = LINK_HINT.format(host=host) if run and run.link_failed else \
            f"check that python3 runs on {host}"
        return result(LINK, title, Status.ERROR, f"cannot read the log {log_path}: {why}", hint,
                      [context] + ([run_evidence("log-scan", run, run.stderr)] if run else []))
    data = run.data
    state = data.get("log") or {}
    if state.get("state") != "ok":
        summary, hint = _log_problem(state, host)
        return result(LINK, title, Status.ERROR, summary, hint,
                      [context, run_evidence("log-scan", run, str(state))])
    log = read_run(data.get("lines") or [], spec, data.get("tail") or [])
    evidence = [context, run_evidence("log-scan", run, _excerpt(data, log))]
    if not log.started:
        ends = f"; the log ends with {log.exceptions[-1][:200]}" if log.exceptions else ""
        return result(LINK, title, Status.ERROR,
                      f"no run start in {log_path} (no restart marker, vLLM banner, "
                      f"`non-default args` or engine start line): the current run's start-up "
                      f"was rotated away or logged elsewhere{ends}",
                      f"pass --log with the current log, or {trace_hint}", evidence)
    if log.engine_line is None:
        return _before_engine(title, log, evidence)
    if kind != "dflash-swa":
        return method_activation.judge(kind, spec, log, evidence, cfg=draft.data, target=target,
                                       methods=methods, expected=expected, watch=watch,
                                       trace_hint=trace_hint, checked_draft=checked_draft)
    cfg = draft.data
    ids = dc.target_layer_ids(cfg) if cfg is not None else None
    fails, hints = method_activation.failures(log)
    notes: list[str] = []
    aux_ok = False
    if log.aux is None:
        notes.append("no aux-layer line")
    elif ids is None:
        notes.append(f"aux layers {log.aux} (target_layer_ids unknown: draft config "
                     "unreadable)")
    elif list(log.aux) == [i + 1 for i in ids]:
        aux_ok = True
        notes.append(f"aux layers {log.aux} = target_layer_ids + 1")
    elif list(log.aux) == ids:
        fails.append(f"aux layers {log.aux} equal target_layer_ids {ids}: the #40727 offset "
                     "(+1) did not run")
        hints.append("this vLLM lacks PR #40727 (target_layer_ids + 1): install a build that "
                     "has it")
    else:
        fails.append(f"aux layers {log.aux} != target_layer_ids + 1 "
                     f"({[i + 1 for i in ids]})")
        hints.append("the running server used other target_layer_ids: if the draft config "
                     "changed since it started, restart it")
    trace = judge_trace(log.trace, cfg, watch, ready=log.ready, version=log.version)
    if trace.status == "fail":
        fails.append(trace.message)
    if log.engine_draft and checked_draft and log.engine_draft.rstrip("/") != \
            checked_draft.rstrip("/"):
        notes.append(f"the current run serves draft {log.engine_draft}, not the checked "
                     f"{checked_draft}")
    details = {"aux": list(log.aux) if log.aux else None, "aux_ok": aux_ok,
               "trace": trace.status, "ready": log.ready, "version": log.version,
               **method_activation.acceptance_details(expected, log.acceptance)}
    if fails:
        return result(LINK, title, Status.FAIL, "; ".join(fails[:2]),
                      "; ".join(dict.fromkeys(hints)), evidence, details)
    if trace.status == "pass" and aux_ok:
        flag = method_activation.acceptance_flag(expected, log.acceptance)
        return result(LINK, title, Status.PASS, f"{notes[0]}; {trace.message}"
                      + (f" ({flag})" if flag else ""), flag, evidence, details)
    if trace.status == "pass":
        return result(LINK, title, Status.UNKNOWN,
                      f"{trace.message}, but {notes[0]}: the #40727 offset is unconfirmed",
                      "look for the aux-layer line in the log; restart the server if it is "
                      "missing", evidence, details)
    silence = "no SWA evidence in the current run (vLLM logs nothing when it builds SWA layers)"
    if trace.status == "unknown" or log.trace:
        silence = trace.message
    if trace.hint:
        trace_hint = trace.hint
    elif log.traced and not log.trace and log.ready:
        # A traced restart whose hook logged nothing: no evidence, and a reason to say why.
        silence = ("the traced run (trace=on) logged no trace event: the hook did not load "
                   "in the serving interpreter, or no watched module was imported"
                   + (f" ({log.hook_errors[0][:200]})" if log.hook_errors else ""))
        trace_hint = ("read the trace hook's lines in the log; check that the serving "
                      "interpreter honours PYTHONPATH (sitecustomize) and that the profile's "
                      "`watch` modules exist in this vLLM")
    if cfg is not None and not dc.sliding_layers(cfg):
        notes.append("the draft config names no sliding layers: SWA has nothing to activate")
    if not log.ready:
        notes.append("start-up not complete")
    return result(LINK, title, Status.UNKNOWN, f"{silence}; {'; '.join(notes)}", trace_hint,
                  evidence, details)
