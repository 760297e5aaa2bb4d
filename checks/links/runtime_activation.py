"""Link 3, runtime activation: evidence from the current run of the serve log only.

The current run begins where the console's telemetry says it does (one rule,
`console.hostside.vocabulary.current_run_start`: restart marker, banner, `non-default args`,
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_console.checks import draftconfig as dc
from vllm_console.checks.configs import ConfigRead
from vllm_console.checks.links import method_activation
from vllm_console.checks.links.common import LINK_HINT, result, run_evidence
from vllm_console.checks.links.current_run import (
    LOOKBACK,
    TAIL_BYTES,
    WATCHDOG_LINE,
    CurrentRun,
    read_run,
)
from vllm_console.checks.links.trace_verdict import judge_trace
from vllm_console.checks.models import Evidence, LinkResult, Status
from vllm_console.checks.profile import Acceptance, RuntimeActivationSpec
from vllm_console.checks.restart_hint import HowToRestart
from vllm_console.checks.trace import TRACE_TAG
from vllm_console.console.transport.remote_scripts import ScriptRun

LINK = "runtime-activation"


def payload(spec: RuntimeActivationSpec, path: str, pid: int | None) -> dict[str, Any]:
    """The log probe's parameters."""
    return {"path": path, "pid": pid, "start_markers": list(spec.start_markers),
            "ready_markers": list(spec.ready_markers),
            "keywords": [*spec.keywords, *spec.failures, *spec.loaded, TRACE_TAG,
                         WATCHDOG_LINE],
            "tail_keywords": [*spec.tail_keywords, *spec.failures, WATCHDOG_LINE],
            "tail_bytes": TAIL_BYTES,
            "max_lines": 400, "max_line": 65536, "lookback": LOOKBACK}


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
               "lines, then restart the server ({restart})")


WATCHDOG_HINT = ("vLLM's watchdog dumped the stacks where the engine stopped: {dumps} (the "
                 "console's stacks view, `s`, and `vllm-console stacks` show them); then "
                 "restart the server ({restart})")


def with_engine(link: LinkResult, engine: EngineLook | None, how: HowToRestart,
                dumps: Sequence[str] = ()) -> LinkResult:
    """The link's verdict with the engine's state: a stalled or dead engine fails it, the
    log's own verdict kept in the details; any other state is only noted. `dumps`: the files
    the current run's `[Watchdog]` lines name: for a broken engine, the evidence and the
    hint point at them (they say where it stopped)."""
    if engine is None:
        return link
    details = {**link.details, "engine": engine.state, "engine_reason": engine.reason}
    evidence = [*link.evidence, engine.evidence()]
    if not engine.broken or link.status is Status.ERROR:
        return result(LINK, link.title, link.status, link.summary, link.hint, evidence, details)
    hint = ENGINE_HINT.format(restart=how.plain())
    if dumps:
        evidence.append(Evidence.make(
            "watchdog", "the current run's `[Watchdog]Dumped stack to` lines", None,
            "\n".join(f"dumped: {path}" for path in dumps)))
        details["watchdog_dumps"] = list(dumps)
        hint = WATCHDOG_HINT.format(dumps=", ".join(dumps), restart=how.plain())
    return result(LINK, link.title, Status.FAIL,
                  f"the engine is {engine.state}: {engine.reason} (the log: {link.summary})",
                  hint, evidence, {**details, "log_status": link.status.value})


def _watchdog_dumps(run: ScriptRun | None, spec: RuntimeActivationSpec) -> tuple[str, ...]:
    data = run.data if run is not None else None
    if not data or (data.get("log") or {}).get("state") != "ok":
        return ()
    return read_run(data.get("lines") or [], spec, data.get("tail") or []).watchdog_dumps


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


def _excerpt(data: Mapping[str, Any], log: CurrentRun) -> str:
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


def _before_engine(title: str, log: CurrentRun, evidence: list[Evidence]) -> LinkResult:
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
             engine: EngineLook | None = None, starting: bool = False,
             restart: HowToRestart | None = None) -> LinkResult:
    """The verdict from the current run of the log (kinds other than `dflash-swa`: judged by
    `checks.links.method_activation` once the engine line is there). `changed_since`: the
    draft config was written after this run started (in words): the run's evidence is about
    the old config, so the verdict is `unknown`, "restart to apply", never a failure.
    `engine`: the serving look's verdict (`with_engine`). `starting`: the serve process
    lives and does not answer `/health` yet: a log with no run start is one whose server has
    not logged its banner yet (a real vLLM spends its first seconds importing), `unknown`.
    `restart`: how the reader restarts the host (default: `vllm-console restart HOST_LABEL`)."""
    how = restart or HowToRestart.for_host([host_label])
    link = _evaluate(spec, log_path, run, draft, context, watch=watch, how=how,
                     host=host, checked_draft=checked_draft, kind=kind, methods=methods,
                     expected=expected, target=target, starting=starting)
    if changed_since and link.status is not Status.ERROR:
        link = result(LINK, link.title, Status.UNKNOWN,
                      f"config changed on disk since this run started; restart to apply "
                      f"({changed_since}; the running engine has the old one: {link.summary})",
                      f"restart vllm serve ({how.plain()}) to load the new config, then "
                      "check again", link.evidence,
                      {**link.details, "config_changed": changed_since})
    dumps = _watchdog_dumps(run, spec) if engine is not None and engine.broken else ()
    return with_engine(link, engine, how, dumps)


def _evaluate(spec: RuntimeActivationSpec, log_path: str, run: ScriptRun | None,
              draft: ConfigRead, context: Evidence, *, watch: Sequence[str], how: HowToRestart,
              host: str, checked_draft: str, kind: str, methods: Sequence[str],
              expected: Acceptance | None, target: Mapping[str, Any] | None,
              starting: bool = False) -> LinkResult:
    title = spec.title
    trace_hint = (f"{how.traced()}: the traced run logs how "
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
    if not log.started and starting and not log.exceptions:
        return result(LINK, title, Status.UNKNOWN,
                      f"the server is starting: {log_path} has no run start yet (vLLM logs "
                      "its banner once its imports are done)",
                      "check again once the server answers /health (the console checks "
                      "again by itself when it becomes ready)", evidence,
                      {"phase": "starting", "ready": False})
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
