"""Runtime activation for the methods that are not DFlash with SWA: from what the real engine
logs (and a traced restart where it logs nothing).

The current run's engine line names the method the engine runs (it must be the profile's);
then each method's own positive evidence, as vLLM 0.32 writes it:

- dflash: `Using auxiliary layers from speculative config: (...)`, which must be
  `target_layer_ids + 1` (the #40727 offset);
- eagle3: the same line when the config names its aux layers (compared with them), or the
  drafter being loaded (`Loading drafter model...`, `Detected EAGLE model ...`, `EAGLE drafter
  KV cache initialized`): the model's default aux layers are taken silently, so a traced
  restart (`get_eagle3_default_aux_hidden_state_layers`) says which;
- draft-model: `Loading drafter model...`;
- ngram: nothing to load: the engine line naming `ngram` and a finished start-up;
- mtp: `Detected MTP model. Sharing target model ...`.

Drafts seen past start-up (`SpecDecoding metrics` lines) are evidence for every method. An
engine that died after start-up (the EAGLE-3 head fed the wrong number of hidden states dies
on the first request: `EngineDeadError`) fails the link. The latest acceptance is compared
with the profile's expected range and flagged when far below it (n-gram: workload-bound, said
so, never a fault).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vllm_console.checks import draftconfig as dc
from vllm_console.checks.links.common import result, short_list
from vllm_console.checks.links.method_configs import (
    aux_problem,
    default_eagle3_aux,
    eagle3_aux_ids,
    eagle3_fc_inputs,
)
from vllm_console.checks.models import Evidence, LinkResult, Status
from vllm_console.checks.profile import Acceptance, RuntimeActivationSpec, method_family
from vllm_console.checks.trace import TraceEvent

if TYPE_CHECKING:
    from vllm_console.checks.links.current_run import CurrentRun

LINK = "runtime-activation"
EAGLE3_DEFAULT_FN = "get_eagle3_default_aux_hidden_state_layers"


def acceptance_flag(expected: Acceptance | None, value: float | None) -> str:
    """A few words when `value` is far below what the profile expects ("" otherwise)."""
    if expected is None or not expected.is_low(value):
        return ""
    if expected.workload_bound:
        return (f"acceptance {value:.2f} is low on this traffic; n-gram acceptance is "
                f"workload-bound (up to {expected.high:g} on text that repeats its prompt): "
                "not a fault of the setup")
    return (f"acceptance {value:.2f} far below the expected {expected.low:g}-"
            f"{expected.high:g} ({expected.source})")


def acceptance_details(expected: Acceptance | None, value: float | None) -> dict[str, Any]:
    return {"acceptance": value,
            "expected": expected.model_dump() if expected is not None else None,
            "acceptance_flagged": bool(acceptance_flag(expected, value))}


def _aux_check(kind: str, aux: Sequence[int], cfg: Mapping[str, Any] | None,
               target_layers: int | None) -> tuple[bool, str]:
    """(ok, words) for the aux-layer line against the config."""
    if cfg is None:
        return True, f"aux layers {tuple(aux)} (draft config unreadable: not compared)"
    if kind == "dflash":
        ids = dc.target_layer_ids(cfg)
        if ids is None:
            return True, f"aux layers {tuple(aux)} (target_layer_ids unknown)"
        want = [i + 1 for i in ids]
        if list(aux) == want:
            return True, f"aux layers {tuple(aux)} = target_layer_ids + 1"
        if list(aux) == ids:
            return False, (f"aux layers {tuple(aux)} equal target_layer_ids {ids}: the #40727 "
                           "offset (+1) did not run")
        return False, f"aux layers {tuple(aux)} != target_layer_ids + 1 ({want})"
    problem = aux_problem(list(aux), target_layers, eagle3_fc_inputs(cfg))
    if problem:
        return False, f"the engine feeds the head aux layers {tuple(aux)}: {problem}"
    ids = eagle3_aux_ids(cfg)
    if ids is not None and list(aux) != ids:
        return False, (f"the engine uses aux layers {tuple(aux)}, the config names {ids}: "
                       "restart the server if the config changed since it started")
    return True, f"aux layers {tuple(aux)} as the config names them"


def _traced(kind: str, events: Sequence[TraceEvent], watch: Sequence[str],
            target_layers: int | None, cfg: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """('pass' | 'fail' | None, words) from a traced restart's events."""
    watched = {w.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for w in watch}
    calls = [e for e in events if e.function in watched and e.event == "call"]
    if not calls:
        return None, ""
    raised = [e for e in calls if e.raised]
    if raised:
        return "fail", f"the traced run's {raised[0].function} raised {raised[0].raised}"
    for e in calls:
        if e.function == EAGLE3_DEFAULT_FN and isinstance(e.result, list):
            default = [i for i in e.result if isinstance(i, int)]
            wanted = eagle3_fc_inputs(cfg) if cfg is not None else 3
            problem = aux_problem(default, target_layers, wanted)
            if problem:
                return "fail", (f"the traced run took the model's default aux layers "
                                f"{tuple(default)}: {problem}")
    names = sorted({e.function for e in calls})
    return "pass", f"the traced run called {short_list(names)}"


def failures(log: CurrentRun) -> tuple[list[str], list[str]]:
    """(what failed, hints) in a run past its engine line: a refusal, a start-up that failed,
    an engine that died on a request after start-up."""
    fails: list[str] = []
    hints: list[str] = []
    if log.refusals:
        refusal, text = log.refusals[0]
        fails.append(f"vLLM refused the drafter: {text[:200]}")
        hints.append(refusal.hint)
    elif log.failures:
        cause = log.exceptions[0] if log.exceptions else log.failures[0]
        fails.append(f"the engine failed to start: {cause[:200]}")
        hints.append("read the traceback in the log (the console's log pane), fix, restart")
    if log.died:
        cause = next((d for d in log.died if "Error:" in d and "EngineDeadError" not in d),
                     log.died[0])
        dead = any("EngineDeadError" in d for d in log.died)
        fails.append(f"the engine started, then {'died' if dead else 'failed'} on a request: "
                     f"{cause[:220]}")
        hints.append("the engine accepted the drafter at start-up and broke when it first "
                     "drafted: the drafter's config is the usual cause (see config-correct); "
                     "fix it, then restart")
    return fails, hints


def judge(kind: str, spec: RuntimeActivationSpec, log: CurrentRun, evidence: list[Evidence], *,
          cfg: Mapping[str, Any] | None, target: Mapping[str, Any] | None,
          methods: Sequence[str], expected: Acceptance | None, watch: Sequence[str],
          trace_hint: str, checked_draft: str = "") -> LinkResult:
    """The verdict for a run past its engine line."""
    title = spec.title
    target_layers = dc.text_value(target, "num_hidden_layers") if target else None
    target_layers = target_layers if isinstance(target_layers, int) else None
    fails: list[str] = []
    hints: list[str] = []
    proof: list[str] = []
    notes: list[str] = []
    running = method_family(log.engine_method)
    if running and methods and running not in methods:
        fails.append(f"the engine runs speculative method {log.engine_method!r}, which this "
                     f"profile ({', '.join(methods)}) does not judge")
        hints.append("check with the profile for that method (--profile auto picks it)")
    elif running:
        proof.append(f"the engine runs {log.engine_method}"
                     + (f" with {log.engine_tokens} speculative tokens"
                        if log.engine_tokens else ""))
    broke, fixes = failures(log)
    fails += broke
    hints += fixes
    if log.aux is not None and kind in ("dflash", "eagle3"):
        ok, words = _aux_check(kind, log.aux, cfg, target_layers)
        (proof if ok else fails).append(words)
        if not ok and kind == "dflash" and "offset" in words:
            hints.append("this vLLM lacks PR #40727 (target_layer_ids + 1): install a build "
                         "that has it")
    elif kind == "eagle3" and cfg is not None and eagle3_aux_ids(cfg) is None \
            and target_layers is not None:
        notes.append(f"vLLM logs nothing when it takes the model's default aux layers "
                     f"(for {target_layers} target layers: "
                     f"{tuple(default_eagle3_aux(target_layers))})")
    trace_status, trace_words = _traced(kind, log.trace, watch, target_layers, cfg)
    if trace_status == "fail":
        fails.append(trace_words)
    elif trace_status == "pass":
        proof.append(trace_words)
    if log.loaded:
        first = log.loaded[0].split(". ")[0].rstrip(".")[:60]
        more = f" (+{len(log.loaded) - 1} more drafter lines)" if len(log.loaded) > 1 else ""
        proof.append(f"vLLM logged '{first}'{more}")
    if log.drafted:
        proof.append(f"{log.drafted} draft tokens in the SpecDecoding lines since start-up")
    if kind == "ngram" and running == "ngram" and log.ready:
        proof.append("n-gram lookup has nothing to load: it runs once the engine is up")
    if log.engine_draft and checked_draft and \
            log.engine_draft.rstrip("/") != checked_draft.rstrip("/"):
        notes.append(f"the current run serves draft {log.engine_draft}, not the checked "
                     f"{checked_draft}")
    flag = acceptance_flag(expected, log.acceptance)
    details = {"kind": kind, "aux": list(log.aux) if log.aux else None, "ready": log.ready,
               "version": log.version, "trace": trace_status, "engine_method": log.engine_method,
               **acceptance_details(expected, log.acceptance)}
    if fails:
        return result(LINK, title, Status.FAIL, "; ".join(fails[:2]),
                      "; ".join(dict.fromkeys(hints)), evidence, details)
    if not log.ready:
        return result(LINK, title, Status.UNKNOWN, "start-up not complete in the current run"
                      + (f" ({'; '.join(proof)})" if proof else ""),
                      "check again once the server is up", evidence, details)
    has_proof = len(proof) > (1 if running else 0)
    if has_proof:
        summary = "; ".join(proof)
        if log.acceptance is not None:
            summary += f"; acceptance {log.acceptance:.2f}"
        if flag:
            summary += ", workload-bound" if expected and expected.workload_bound else \
                f", far below the expected {expected.low:g}-{expected.high:g}" if expected else ""
        return result(LINK, title, Status.PASS, summary, flag, evidence, details)
    silent = (f"the engine runs {log.engine_method or 'a speculative method'}, but vLLM "
              "logged nothing that shows the drafter built" + (f" ({'; '.join(notes)})"
                                                               if notes else ""))
    return result(LINK, title, Status.UNKNOWN, silent, trace_hint, evidence, details)
