"""The links' verdicts on crafted facts (no host): config invariants and reference diffs,
runtime evidence from log lines and traces, fields comparisons, and the root cause."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.checks.test_checks_crafted import TARGET_CONFIG, draft_config, engine_lines
from vllm_console.checks.configs import ConfigRead
from vllm_console.checks.links import config_correct, fields_extracted, runtime_activation
from vllm_console.checks.models import Evidence, LinkResult, Status
from vllm_console.checks.profile import load_profile
from vllm_console.checks.references import choose_reference
from vllm_console.checks.rootcause import broken_link, root_cause
from vllm_console.checks.trace import format_trace_line
from vllm_console.console.transport.remote_scripts import ScriptRun

PROFILE = load_profile()
LINKS = PROFILE.links
CTX = Evidence.make("discovery")
REF = choose_reference(PROFILE, ["/models/Qwen3.6-27B-DFlash"])


def _read(name: str, data: dict[str, Any] | None, problem: str = "") -> ConfigRead:
    return ConfigRead(name, f"/m/{name}", f"/m/{name}/config.json", "directory", data, problem,
                      "cmd", 0)


def _config(draft: dict[str, Any], target: dict[str, Any] | None = TARGET_CONFIG,
            reference: Any = REF) -> LinkResult:
    return config_correct.evaluate(LINKS.config_correct, _read("draft", draft),
                                   _read("target", target, "" if target else "missing"),
                                   reference, CTX)


# -- config-correct ------------------------------------------------------------------------------

def test_the_right_config_passes_against_its_reference() -> None:
    result = _config(draft_config("healthy"))
    assert result.status is Status.PASS
    assert result.summary == "matches z-lab/Qwen3.6-27B-DFlash; invariants hold"


def test_the_incident_config_fails_field_by_field() -> None:
    result = _config(draft_config("incident"))
    assert result.status is Status.FAIL
    assert result.summary.startswith("3 field(s) differ from z-lab/Qwen3.6-27B-DFlash")
    assert result.summary == (
        "3 field(s) differ from z-lab/Qwen3.6-27B-DFlash: mask_token_id 248064 (want 248070), "
        "target_layer_ids [1, 17, 33, 49, 63] (want [1, 16, 31, 46, 61]), layer_types")
    assert any("mask_token_id 248064 != reference 248070" in e.excerpt for e in result.evidence)
    assert "default spacing [1, 16, 31, 46, 61]" in result.hint
    checks = {f["check"]: f["level"] for f in result.details["findings"]}
    assert checks["reference:layer_types"] == "fail"
    assert checks["spacing"] == "warn"


@pytest.mark.parametrize(("change", "message"), [
    ({"layer_types": ["full_attention"] * 4}, "layer_types has 4 entries, num_hidden_layers is 5"),
    ({"layer_types": ["full_attention"] * 4 + ["local"]}, "invalid layer_types value(s) ['local']"),
    ({"layer_types": "sliding_attention"}, "layer_types is not a list of strings"),
    ({"sliding_window": None}, "4 sliding layer(s) but no window"),
    ({"dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 31, 16, 46, 61]}},
     "do not increase"),
    ({"dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 16, 31, 46, 64]}},
     "fall outside the target's 64 layers"),
    ({"dflash_config": {"mask_token_id": 248320, "target_layer_ids": [1, 16, 31, 46, 61]}},
     "mask_token_id 248320 is outside the target vocabulary (248320)"),
    ({"dflash_config": {"target_layer_ids": [1, 16, 31, 46, 61]}}, "no mask_token_id"),
    ({"dflash_config": {"mask_token_id": 248070}}, "no target_layer_ids"),
    ({"dflash_config": {"mask_token_id": 248070, "target_layer_ids": ["1"]}},
     "not a list of ints"),
    ({"hidden_size": 4096}, "draft hidden size 4096 != target hidden_size 5120"),
    ({"num_target_layers": 36}, "num_target_layers 36 but the target has 64 layers"),
])
def test_invariants_without_a_reference(change: dict[str, Any], message: str) -> None:
    draft = {**draft_config("healthy"), **change}
    result = _config(draft, reference=None)
    assert result.status is Status.FAIL, result.summary
    assert message in result.summary + result.hint


def test_warnings_do_not_fail_and_no_reference_is_said() -> None:
    draft = {**draft_config("healthy"), "use_sliding_window": False}
    result = _config(draft, reference=None)
    assert result.status is Status.PASS
    assert "no reference for this drafter" in result.summary
    assert "HF's Qwen3Config drops sliding_window" in result.hint
    assert "--reference" in result.hint


def test_target_in_text_config_and_target_missing() -> None:
    nested = {"architectures": ["Qwen3_5ForConditionalGeneration"],
              "text_config": dict(TARGET_CONFIG)}
    assert _config(draft_config("healthy"), nested).status is Status.PASS
    result = _config(draft_config("healthy"), None)
    assert result.status is Status.PASS
    assert "target config unavailable" in result.evidence[-1].excerpt


def test_speculators_layout_is_compared_like_the_native_one() -> None:
    result = _config(draft_config("speculators"))
    assert result.status is Status.PASS, result.summary


def test_draft_config_problems_are_errors() -> None:
    result = config_correct.evaluate(LINKS.config_correct, _read(
        "draft", None, "draft directory /m/d has no config.json"), _read("target", None, "x"),
        REF, CTX)
    assert result.status is Status.ERROR
    assert result.summary == "draft directory /m/d has no config.json"
    assert "--draft" in result.hint


def test_references_are_chosen_by_name_or_name_or_path() -> None:
    assert choose_reference(PROFILE, ["/x/Qwen3.6-27B-DFlash/"]).name == REF.name  # type: ignore[union-attr]
    b16 = choose_reference(PROFILE, ["/x/draft", "z-lab/Qwen3-8B-DFlash-b16"])
    assert b16 is not None
    assert b16.config["dflash_config"]["mask_token_id"] == 151669
    assert choose_reference(PROFILE, ["/x/other"]) is None


# -- runtime-activation --------------------------------------------------------------------------

def _log(lines: list[str], *, start: int | None = 0, ready_at: int | None = 1,
         state: str = "ok") -> ScriptRun:
    data: dict[str, Any] = {"log": {"path": "/l/serve.log", "state": state, "size": 1000}}
    if state == "ok":
        data.update({"last_mark": start, "lines": [[i, t] for i, t in enumerate(lines)],
                     "ready_at": ready_at, "scanned": 1000})
    return ScriptRun("log-scan-cmd", 0, data)


def _runtime(lines: list[str], draft: dict[str, Any] | None = None,
             **log: Any) -> LinkResult:
    cfg = draft if draft is not None else draft_config("healthy")
    return runtime_activation.evaluate(
        LINKS.runtime_activation, "/l/serve.log", _log(lines, **log), _read("draft", cfg), CTX,
        watch=PROFILE.watch, host_label="gpu1", checked_draft="/m/draft")


QWEN3_DFLASH = "vllm.model_executor.models.qwen3_dflash"


def _trace(fn: str, **kw: Any) -> str:
    return format_trace_line("call", f"vllm.model_executor.models.qwen3_dflash:{fn}", **kw)


def test_silence_is_unknown_with_the_trace_hint() -> None:
    result = _runtime(engine_lines("/m/target", "/m/draft"))
    assert result.status is Status.UNKNOWN
    assert "aux layers (2, 17, 32, 47, 62) = target_layer_ids + 1" in result.summary
    assert "vllm-console restart gpu1 --trace" in result.hint


def test_a_trace_that_builds_the_configured_sliding_layers_passes() -> None:
    types = ["sliding_attention"] * 4 + ["full_attention"]
    args = {"num_hidden_layers": 5, "layer_types": types, "sliding_window": 2048}
    extra = [_trace("_get_dflash_layer_types", args=args, result=types, pid=7)]
    extra += [_trace("_resolve_layer_attention", args={**args, "layer_idx": i},
                     result=[2048 if i < 4 else None, False]) for i in range(5)]
    result = _runtime(engine_lines("/m/target", "/m/draft", extra=extra))
    assert result.status is Status.PASS, result.summary
    assert "layers [0, 1, 2, 3] as sliding (window 2048)" in result.summary


@pytest.mark.parametrize(("extra", "message"), [
    ([_trace("_get_dflash_layer_types", result=["full_attention"] * 5)],
     "built every drafter layer as full attention; the config makes layers [0, 1, 2, 3]"),
    ([_trace("_resolve_layer_attention", args={"layer_idx": 0}, result=[2048, False])],
     "built layers [0] as sliding (window 2048); the config makes layers [0, 1, 2, 3]"),
    ([_trace("_get_dflash_layer_types",
             raised="ValueError: DFlash sliding_attention layers require `sliding_window`")],
     "_get_dflash_layer_types raised ValueError"),
    # One watched function absent from this vLLM, the other ran: judged by the one that ran.
    ([format_trace_line("missing", f"{QWEN3_DFLASH}:_get_dflash_layer_types", pid=11),
      _trace("_resolve_layer_attention", args={"layer_idx": 0}, result=[None, False])],
     "built every drafter layer as full attention; the config makes layers [0, 1, 2, 3]"),
])
def test_traces_that_contradict_the_config_fail(extra: list[str], message: str) -> None:
    result = _runtime(engine_lines("/m/target", "/m/draft", extra=extra))
    assert result.status is Status.FAIL
    assert message in result.summary


def _event(event: str, fn: str, pid: int) -> str:
    return f"(EngineCore_DP0 pid={pid}) " + format_trace_line(
        event, f"{QWEN3_DFLASH}:{fn}", pid=pid)


def test_a_traced_run_that_hooked_nothing_is_unknown_not_fail() -> None:
    missing = [_event("missing", fn, pid) for pid in (4241, 4242)
               for fn in ("_get_dflash_layer_types", "_resolve_layer_attention")]
    result = _runtime(engine_lines("/m/target", "/m/draft", extra=missing))
    assert result.status is Status.UNKNOWN, result.summary
    assert ("hooked none of the watched functions that build the drafter's layers (missing "
            "from this vLLM: _get_dflash_layer_types in pids 4241, 4242; "
            "_resolve_layer_attention in pids 4241, 4242; vLLM 0.1.dev16016+g3cfc8f8b7)"
            in result.summary)
    assert "no evidence either way" in result.summary
    assert "aux layers (2, 17, 32, 47, 62) = target_layer_ids + 1" in result.summary
    assert "write one (checks/profiles/*.toml, `watch`)" in result.hint
    # No evidence against it: with every other link passing, still no root cause.
    links = _links("pass", "pass", "pass", "pass")
    links[2] = result
    assert root_cause(links, PROFILE.requires()) is None
    # Installed but never called once start-up completed: the same absence of evidence.
    idle = [_event("missing", "_get_dflash_layer_types", 4242),
            _event("installed", "_resolve_layer_attention", 4242)]
    result = _runtime(engine_lines("/m/target", "/m/draft", extra=idle))
    assert result.status is Status.UNKNOWN, result.summary
    assert ("(missing from this vLLM: _get_dflash_layer_types in pid 4242; installed but never "
            "called: _resolve_layer_attention in pid 4242;" in result.summary)
    # ... and still starting, no verdict yet.
    starting = _runtime(engine_lines("/m/target", "/m/draft", extra=idle, ready=False))
    assert starting.status is Status.UNKNOWN
    assert "traced run still starting" in starting.summary


def test_calls_whose_results_say_nothing_of_the_layout_are_no_evidence() -> None:
    # A layout-building function that changed its return value, and a call without its index.
    extra = [_trace("_get_dflash_layer_types", result={"types": ["sliding_attention"]}, pid=7),
             _trace("_resolve_layer_attention", args={}, result=[2048, False], pid=7)]
    result = _runtime(engine_lines("/m/target", "/m/draft", extra=extra))
    assert result.status is Status.UNKNOWN, result.summary
    assert ("the traced run called _get_dflash_layer_types in pid 7; _resolve_layer_attention "
            "in pid 7, but no call returned a layer layout this console reads" in result.summary)


def test_a_traced_run_whose_hook_logged_nothing_says_so() -> None:
    hook = ("[vllm-console-trace] hook error: vllm.model_executor.models.qwen3_dflash: "
            "ImportError: cannot import name 'x'")
    result = _runtime([RESTART, *engine_lines("/m/target", "/m/draft", extra=[hook])])
    assert result.status is Status.UNKNOWN
    assert ("the traced run (trace=on) logged no trace event: the hook did not load in the "
            "serving interpreter, or no watched module was imported ([vllm-console-trace] hook "
            "error: vllm.model_executor.models.qwen3_dflash: ImportError" in result.summary)
    assert "PYTHONPATH" in result.hint
    assert "trace hook: [vllm-console-trace] hook error:" in result.evidence[1].excerpt
    untraced = _runtime([RESTART.replace("trace=on", "trace=off"),
                         *engine_lines("/m/target", "/m/draft")])
    assert untraced.summary.startswith("no SWA evidence in the current run")


def test_a_partial_trace_is_judged_by_the_functions_that_ran() -> None:
    extra = [_event("missing", "_get_dflash_layer_types", 4242)]
    extra += [_trace("_resolve_layer_attention", args={"layer_idx": i},
                     result=[2048 if i < 4 else None, False], pid=4242) for i in range(5)]
    result = _runtime(engine_lines("/m/target", "/m/draft", extra=extra))
    assert result.status is Status.PASS, result.summary
    assert ("built layers [0, 1, 2, 3] as sliding (window 2048) (_get_dflash_layer_types "
            "missing from this vLLM; judged by _resolve_layer_attention)" in result.summary)


def test_a_config_without_sliding_layers_gives_swa_nothing_to_activate() -> None:
    lines = engine_lines("/m/t", "/m/d", aux=(2, 18, 34, 50, 64))
    silent = _runtime(lines, draft_config("incident"))
    assert silent.status is Status.UNKNOWN
    assert "names no sliding layers" in silent.summary
    traced = _runtime(lines + [_trace("_get_dflash_layer_types", result=["full_attention"] * 5)],
                      draft_config("incident"))
    assert traced.status is Status.FAIL
    assert "as the config (naming no sliding layers) asks" in traced.summary


@pytest.mark.parametrize(("extra", "message", "hint"), [
    (["(EngineCore_DP0 pid=9) ERROR 05-14 10:00:41 [core.py:700] NotImplementedError: DFlash "
      "drafters with mixed sliding/full attention require the V2 model runner; relaunch with "
      "VLLM_USE_V2_MODEL_RUNNER=1."], "vLLM refused the drafter", "VLLM_USE_V2_MODEL_RUNNER=1"),
    (["(EngineCore_DP0 pid=9) ERROR 05-14 10:00:41 [core.py:700] ValueError: DFlash "
      "sliding_attention layers require `sliding_window` in config."],
     "vLLM refused the drafter", "use_sliding_window"),
    (["(EngineCore_DP0 pid=9) ERROR 05-14 10:00:41 [core.py:700] torch.OutOfMemoryError: CUDA "
      "out of memory.", "(EngineCore_DP0 pid=9) ERROR 05-14 10:00:41 [core.py:708] EngineCore "
      "failed to start."], "the engine failed to start: torch.OutOfMemoryError", "traceback"),
])
def test_refusals_and_failed_starts_fail_with_their_hint(extra: list[str], message: str,
                                                         hint: str) -> None:
    result = _runtime(engine_lines("/m/t", "/m/d", extra=extra, ready=False))
    assert result.status is Status.FAIL
    assert message in result.summary
    assert hint in result.hint


def test_aux_layers_without_the_offset_or_from_other_ids_fail() -> None:
    unshifted = _runtime(engine_lines("/m/t", "/m/d", aux=(1, 16, 31, 46, 61)))
    assert unshifted.status is Status.FAIL
    assert "the #40727 offset (+1) did not run" in unshifted.summary
    other = _runtime(engine_lines("/m/t", "/m/d", aux=(3, 18, 33, 48, 63)))
    assert other.status is Status.FAIL
    assert "!= target_layer_ids + 1 ([2, 17, 32, 47, 62])" in other.summary
    eagle3 = ["(EngineCore pid=9) INFO 05-14 10:00:40 [gpu_model_runner.py:1] Using Eagle3 "
              "auxiliary layers from config: (2, 17, 32, 47, 62)"]
    newer = _runtime(engine_lines("/m/t", "/m/d", aux=None, extra=eagle3))
    assert newer.status is Status.UNKNOWN
    assert "= target_layer_ids + 1" in newer.summary


def test_the_log_itself_going_wrong_is_an_error() -> None:
    missing = _runtime([], state="missing")
    assert missing.status is Status.ERROR
    assert "rotated away or deleted" in missing.summary
    denied = _runtime([], state="denied")
    assert "permission denied" in denied.summary
    no_start = _runtime(["INFO something else", "ValueError: bad flag"], start=None)
    assert no_start.status is Status.ERROR
    assert no_start.summary.startswith("no run start in /l/serve.log (no restart marker, vLLM "
                                       "banner, `non-default args` or engine start line)")
    assert no_start.summary.endswith("the log ends with ValueError: bad flag")
    no_log = runtime_activation.evaluate(LINKS.runtime_activation, "", None,
                                         _read("draft", {}), CTX, watch=(), host_label="h")
    assert no_log.status is Status.ERROR
    assert "--log" in no_log.hint
    dropped = runtime_activation.evaluate(
        LINKS.runtime_activation, "/l/x.log", ScriptRun("cmd", 255, error="link lost"),
        _read("draft", {}), CTX, watch=(), host_label="h")
    assert dropped.status is Status.ERROR
    assert "link lost" in dropped.summary


RESTART = "[vllm-console] restart at 2026-05-14T10:05:00+00:00 by me@laptop; trace=on"


def test_a_restart_marker_starts_the_run() -> None:
    crashed = _runtime([RESTART, "(APIServer pid=5) ERROR 05-14 10:05:02 [x.py:1] "
                                 "ModuleNotFoundError: No module named 'torch'"], ready_at=None)
    assert crashed.status is Status.FAIL
    assert crashed.summary == ("the server failed at start-up, before its engine started: "
                               "ModuleNotFoundError: No module named 'torch'")
    assert "run marker: [vllm-console] restart at" in crashed.evidence[1].excerpt
    starting = _runtime([RESTART], ready_at=None)
    assert starting.status is Status.UNKNOWN
    assert "not started its engine yet" in starting.summary
    restarted = _runtime([RESTART, *engine_lines("/m/t", "/m/d", aux=(1, 16, 31, 46, 61))])
    assert restarted.status is Status.FAIL
    assert "offset (+1) did not run" in restarted.summary


def test_an_unreadable_draft_leaves_the_aux_line_unverified() -> None:
    result = runtime_activation.evaluate(
        LINKS.runtime_activation, "/l/serve.log", _log(engine_lines("/m/t", "/m/draft")),
        _read("draft", None, "no config"), CTX, watch=PROFILE.watch, host_label="h")
    assert result.status is Status.UNKNOWN
    assert "target_layer_ids unknown" in result.summary


def test_the_run_serving_another_draft_is_noted() -> None:
    result = runtime_activation.evaluate(
        LINKS.runtime_activation, "/l/serve.log", _log(engine_lines("/m/t", "/m/old-draft")),
        _read("draft", draft_config("healthy")), CTX, watch=PROFILE.watch, host_label="h",
        checked_draft="/m/new-draft")
    assert "serves draft /m/old-draft, not the checked /m/new-draft" in result.summary


# -- fields-extracted ----------------------------------------------------------------------------

SOURCE = {"layer_types": ["sliding_attention"] * 4 + ["full_attention"],
          "use_sliding_window": True, "sliding_window": 2048, "max_window_layers": 4}


def _fields(fmt: str, extraction: dict[str, Any], source: dict[str, Any] | None = None
            ) -> LinkResult:
    data = {"config": {"state": "ok"}, "format": fmt, "algorithm": "dflash",
            "source": SOURCE if source is None else source, "extraction": extraction,
            "static": {"file": "/v/algos.py", "mentions": {"layer_types": False}}}
    return fields_extracted.evaluate(LINKS.fields_extracted, "/v/bin/python",
                                     _read("draft", {"a": 1}), ScriptRun("cmd", 0, data), CTX)


def test_extraction_that_keeps_every_field_passes() -> None:
    result = _fields("speculators", {"how": "x", "values": copy.deepcopy(SOURCE)})
    assert result.status is Status.PASS
    assert "keeps layer_types" in result.summary


def test_dropped_or_changed_fields_fail() -> None:
    result = _fields("speculators", {"how": "x", "values": {"layer_types": SOURCE["layer_types"],
                                                           "sliding_window": 4096}})
    assert result.status is Status.FAIL
    assert "loses use_sliding_window, max_window_layers, sliding_window 2048 -> 4096" in \
        result.summary
    assert "PR #40898" in result.hint
    assert "static reading (fallback, not a verdict)" in result.evidence[1].excerpt
    native = _fields("native", {"how": "x", "values": {**SOURCE, "sliding_window": None}})
    assert native.status is Status.FAIL
    assert "use_sliding_window: true" in native.hint


def test_an_interpreter_that_cannot_import_vllm_is_an_error() -> None:
    error = {"kind": "import", "type": "ModuleNotFoundError",
             "message": "No module named 'torch'"}
    result = _fields("speculators", {"how": "x", "error": error})
    assert result.status is Status.ERROR
    assert ("cannot import vllm.transformers_utils.configs.speculators.base: "
            "ModuleNotFoundError: No module named 'torch'") in result.summary
    native = _fields("native", {"how": "x", "error": error})
    assert native.status is Status.PASS
    assert "native config: HF reads it as-is" in native.summary
    raised = _fields("speculators", {"how": "x", "error": {**error, "kind": "call",
                                                           "type": "ValueError"}})
    assert raised.status is Status.FAIL
    assert _fields("native", {"how": "x", "error": {**error, "kind": "call"}}).status is \
        Status.UNKNOWN


def test_losing_a_window_no_layer_uses_is_only_a_warning() -> None:
    # The incident's config with a real transformers: use_sliding_window false, so HF drops the
    # window, but every layer is full attention.
    source = {"layer_types": ["full_attention"] * 5, "use_sliding_window": False,
              "sliding_window": 2048, "max_window_layers": 0}
    result = _fields("native", {"how": "x", "values": {**source, "sliding_window": None}},
                     source=source)
    assert result.status is Status.PASS
    assert "1 unused field(s) lost" in result.summary
    assert result.hint.startswith("warning: HF (transformers.AutoConfig) loses sliding_window")
    only_max = _fields("speculators", {"how": "x", "values": {
        k: v for k, v in SOURCE.items() if k != "max_window_layers"}})
    assert only_max.status is Status.PASS
    no_types = {"use_sliding_window": True, "sliding_window": 2048, "max_window_layers": 4}
    derived = _fields("native", {"how": "x", "values": {"use_sliding_window": True,
                                                       "sliding_window": 2048}},
                      source=no_types)
    assert derived.status is Status.FAIL


def test_no_swa_fields_in_the_config_is_nothing_to_lose() -> None:
    result = _fields("native", {"how": "x", "values": {}}, source={})
    assert result.status is Status.PASS
    assert "nothing to lose" in result.summary


def test_fields_errors_before_extraction() -> None:
    spec = LINKS.fields_extracted
    no_draft = fields_extracted.evaluate(spec, "/p", _read("draft", None, "no such dir"), None,
                                         CTX)
    assert no_draft.status is Status.ERROR
    assert no_draft.summary == "no such dir"
    no_python = fields_extracted.evaluate(spec, "", _read("draft", {}), None, CTX)
    assert no_python.status is Status.ERROR
    crashed = fields_extracted.evaluate(spec, "/p", _read("draft", {}), ScriptRun(
        "cmd", 1, error="fields_probe.py failed (exit 1): boom"), CTX)
    assert crashed.status is Status.ERROR
    assert "boom" in crashed.summary


# -- root cause ----------------------------------------------------------------------------------

def _links(*statuses: str) -> list[LinkResult]:
    ids = ("code-present", "fields-extracted", "runtime-activation", "config-correct")
    return [LinkResult(id=i, title=i, status=Status(s), summary="s") for i, s in
            zip(ids, statuses, strict=True)]


@pytest.mark.parametrize(("statuses", "broken", "cause"), [
    (("pass", "pass", "pass", "pass"), None, None),
    (("pass", "pass", "unknown", "fail"), "runtime-activation", "config-correct"),
    (("pass", "pass", "fail", "fail"), "runtime-activation", "config-correct"),
    (("pass", "pass", "fail", "pass"), "runtime-activation", "runtime-activation"),
    (("fail", "fail", "fail", "pass"), "code-present", "code-present"),
    (("pass", "fail", "unknown", "pass"), "fields-extracted", "fields-extracted"),
    (("error", "fail", "unknown", "pass"), "code-present", None),
    (("pass", "pass", "unknown", "pass"), "runtime-activation", None),
])
def test_root_cause_is_the_failing_link_whose_prerequisites_hold(
        statuses: tuple[str, ...], broken: str | None, cause: str | None) -> None:
    links = _links(*statuses)
    assert broken_link(links) == broken
    assert root_cause(links, PROFILE.requires()) == cause


# -- a start-up that dies before its engine line (issue 19) --------------------------------------

BANNER_032 = ("(APIServer pid=4300) INFO 12-03 06:01:01 [api_utils.py:70] vLLM server version "
              "0.32.0, serving model /m/t")
ARGS_032 = ("(APIServer pid=4300) INFO 12-03 06:01:02 [utils.py:253] non-default args: "
            "{'model_tag': '/m/t', 'model': '/m/t', 'speculative_config': {'method': 'dflash', "
            "'model': '/m/d', 'num_speculative_tokens': 4}, 'max_model_len': 512}")
FRAMES = ["Traceback (most recent call last):", '  File "/v/bin/vllm", line 8, in <module>',
          "    sys.exit(main())"]
PREFIX = "(APIServer pid=4300) ERROR 12-03 06:01:03 [api_server.py:90] "


@pytest.mark.parametrize(("error", "shown"), [
    (["pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
      "  Value error, num_speculative_tokens 40 exceeds the drafter's block_size 16 "
      "[type=value_error, input_value=ArgsKwargs((), {'model': '/m/d'}), "
      "input_type=ArgsKwargs]"],
     "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig "
     "— Value error, num_speculative_tokens 40 exceeds the drafter's block_size 16"),
    (["ValueError: max_model_len 512 is smaller than the drafter's block"],
     "ValueError: max_model_len 512 is smaller than the drafter's block"),
    ([PREFIX + "NotImplementedError: speculative method 'dflash' needs the flash_attn backend"],
     "NotImplementedError: speculative method 'dflash' needs the flash_attn backend"),
    ([PREFIX + "RuntimeError: Failed to infer device type"],
     "RuntimeError: Failed to infer device type"),
])
def test_a_start_up_that_dies_before_its_engine_line_fails_with_its_exception(
        error: list[str], shown: str) -> None:
    old = engine_lines("/m/t", "/m/d")  # the last run, started and ready
    result = _runtime([*old, BANNER_032, ARGS_032, *FRAMES, *error], ready_at=None)
    assert result.status is Status.FAIL, result.summary
    assert result.summary == f"the server failed at start-up, before its engine started: {shown}"
    assert "before starting its engine" in result.hint
    excerpt = result.evidence[1].excerpt
    assert f"current run starts at byte {len(old)}" in excerpt
    assert "vLLM version: 0.32.0" in excerpt
    assert "start-up not complete in this run" in excerpt
    links = _links("pass", "pass", "pass", "pass")
    links[2] = result
    assert root_cause(links, PROFILE.requires()) == "runtime-activation"


def test_a_refusal_before_the_engine_line_fails_with_its_hint() -> None:
    result = _runtime([BANNER_032, ARGS_032, *FRAMES,
                       "ValueError: DFlash sliding_attention layers require `sliding_window` "
                       "in config."], ready_at=None)
    assert result.status is Status.FAIL
    assert result.summary.startswith("vLLM refused the drafter before its engine started: "
                                     "ValueError: DFlash sliding_attention")
    assert "use_sliding_window" in result.hint


def test_a_run_between_its_arguments_and_its_engine_line_is_starting() -> None:
    result = _runtime([*engine_lines("/m/t", "/m/d"), BANNER_032, ARGS_032], ready_at=None)
    assert result.status is Status.UNKNOWN
    assert "has not started its engine yet" in result.summary
