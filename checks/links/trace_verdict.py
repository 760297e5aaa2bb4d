"""What a traced run's events say about the drafter's sliding layers: `judge_trace` turns the
trace lines of the current run into pass, fail or unknown (a trace in which no watched
function ran is absence of evidence, never a failure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_console.checks import draftconfig as dc
from vllm_console.checks.links.common import short_list
from vllm_console.checks.trace import TraceEvent

LAYER_TYPES_FN = "_get_dflash_layer_types"
RESOLVE_FN = "_resolve_layer_attention"


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
