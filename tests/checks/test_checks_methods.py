"""Every speculative method's profile on crafted configs and logs: which profile judges, and the
failure each method hides (EAGLE-3 aux layers, a draft's tokenizer, n-gram numbers, missing MTP
layers), named by the right link. The real engine's side is in tests/real_vllm/."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vllm_console.checks import Status, run_chain
from vllm_console.checks.configs import ConfigRead
from vllm_console.checks.links import (
    config_correct,
    current_run,
    method_configs,
    runtime_activation,
)
from vllm_console.checks.models import Evidence
from vllm_console.checks.profile import (
    expected_acceptance,
    load_profile,
    method_family,
    shipped_profiles,
)
from vllm_console.checks.select import choose, infer_method
from vllm_console.console.hostclient.discovery import parse_serve_argv
from vllm_console.console.settings import ServeSettings
from vllm_console.console.transport.local_host import LocalHost

TARGET = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 128,
          "vocab_size": 1024, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 3,
          "max_position_embeddings": 512}
EAGLE3 = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 128,
          "target_hidden_size": 128, "vocab_size": 1024, "draft_vocab_size": 1024,
          "num_hidden_layers": 1}
DRAFT = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 1, "hidden_size": 128,
         "vocab_size": 1024, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 3,
         "max_position_embeddings": 512}
CONTEXT = Evidence.make("discovery")


def _fails(findings: list[Any]) -> list[str]:
    return [f.message for f in findings if f.level == "fail"]


# -- which profile judges ----------------------------------------------------------------------

def test_every_shipped_profile_names_its_methods_and_expected_acceptance() -> None:
    assert set(shipped_profiles()) >= {"dflash-swa", "dflash", "eagle3", "draft-model", "ngram",
                                       "mtp"}
    for name in shipped_profiles():
        profile = load_profile(name)
        assert profile.methods, name
        assert profile.acceptance is not None, name
        assert profile.acceptance.source, name
        assert 1.0 <= profile.acceptance.low < profile.acceptance.high, name
    assert expected_acceptance("qwen3_next_mtp") == load_profile("mtp").acceptance
    assert expected_acceptance("ngram").workload_bound  # type: ignore[union-attr]
    assert expected_acceptance("suffix") is None


@pytest.mark.parametrize(("spec", "draft", "method"), [
    ({"method": "eagle3", "model": "/m/head"}, None, "eagle3"),
    ({"method": "deepseek_mtp"}, None, "mtp"),
    ({"method": "ngram_gpu"}, None, "ngram"),
    ({"model": "/m/small"}, DRAFT, "draft_model"),  # vLLM's inference: a plain model
    ({"model": "/m/head"}, EAGLE3, "eagle3"),
    ({"model": "/m/d"}, {"architectures": ["DFlashDraftModel"]}, "dflash"),
    ({"model": "/m/d"}, {"speculators_model_type": "eagle3"}, "eagle3"),
    ({}, None, None),
])
def test_the_method_as_vllm_infers_it(spec: dict[str, Any], draft: dict[str, Any] | None,
                                      method: str | None) -> None:
    assert infer_method(spec, draft) == method


def test_dflash_with_or_without_sliding_layers_and_no_method() -> None:
    sliding = {"layer_types": ["sliding_attention"], "sliding_window": 64}
    assert choose("dflash", "argv", draft=sliding, draft_names=[]).profile.name == "dflash-swa"
    full = {"layer_types": ["full_attention"]}
    assert choose("dflash", "argv", draft=full, draft_names=[]).profile.name == "dflash"
    # A full-attention draft whose reference has sliding layers: the SWA profile, which
    # then blames the draft config (the incident).
    assert choose("dflash", "argv", draft=full, draft_names=[],
                  reference=sliding).profile.name == "dflash-swa"
    assert choose("dflash", "argv", draft=full,
                  draft_names=["/m/Qwen3.6-27B-DFlash"]).profile.name == "dflash-swa"
    none = choose(None, "", draft=None, draft_names=[])
    assert none.profile.name == "dflash-swa"
    assert "the default" in none.why
    assert "no shipped profile judges method 'suffix'" in \
        choose("suffix", "argv", draft=None, draft_names=[]).why
    assert method_family("GLM4_MOE_MTP") == "mtp"


def test_the_serve_command_line_keeps_the_whole_speculative_config() -> None:
    args = parse_serve_argv(["vllm", "serve", "/m/t", "--max-model-len", "4096",
                             "--speculative-config", json.dumps({"method": "ngram",
                                                                 "prompt_lookup_max": 3}),
                             "--spec-tokens", "5"])
    assert args.speculative == {"method": "ngram", "prompt_lookup_max": 3,
                                "num_speculative_tokens": "5"}
    assert args.max_model_len == 4096
    flags = parse_serve_argv(["vllm", "serve", "/m/t", "--spec-method=eagle3",
                              "--spec-model", "/m/head"])
    assert (flags.speculative_method, flags.draft) == ("eagle3", "/m/head")


# -- config correct, per method ------------------------------------------------------------------

EAGLE_SPEC = load_profile("eagle3").links.config_correct


def test_eagle3_default_aux_layers_on_a_two_layer_target_fail() -> None:
    fails = _fails(method_configs.eagle3(EAGLE3, TARGET, EAGLE_SPEC))
    assert len(fails) == 1
    assert "the model's default (2, 1, -1)" in fails[0]
    assert "2 hidden state(s) where the head's fc takes 3" in fails[0]
    assert "dies on the first request" in fails[0]
    deep = {**TARGET, "num_hidden_layers": 32}
    assert _fails(method_configs.eagle3(EAGLE3, deep, EAGLE_SPEC)) == []  # (2, 16, 29)


@pytest.mark.parametrize(("change", "words"), [
    ({"eagle_aux_hidden_state_layer_ids": [0, 1, 5]}, "[5] is not a position"),
    ({"eagle_aux_hidden_state_layer_ids": [1, 1, 2]}, "repeat a layer"),
    ({"eagle_aux_hidden_state_layer_ids": [0, 1]}, "2 ids, but the head's fc takes 3"),
    ({"target_hidden_size": 256}, "head's target hidden size 256 != target hidden_size 128"),
    ({"vocab_size": 2048}, "vocab_size 2048 != target vocab_size 1024"),
    ({"architectures": ["LlamaForCausalLM"]}, "is not an EAGLE-3 head"),
])
def test_eagle3_config_failures(change: dict[str, Any], words: str) -> None:
    head = {**EAGLE3, "eagle_aux_hidden_state_layer_ids": [0, 1, 2], **change}
    fails = _fails(method_configs.eagle3(head, TARGET, EAGLE_SPEC))
    assert any(words in f for f in fails), fails


def test_eagle3_ids_in_eagle_config_set_the_fc_width() -> None:
    head = {**EAGLE3, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 2]}}
    assert _fails(method_configs.eagle3(head, TARGET, EAGLE_SPEC)) == []


@pytest.mark.parametrize(("change", "words"), [
    ({"vocab_size": 2048}, "vLLM refuses the pair"),
    ({"bos_token_id": 4, "pad_token_id": 1}, "bos_token_id 4 (target 0), pad_token_id 1"),
    ({"max_position_embeddings": 256}, "max_position_embeddings 256 < max_model_len 512"),
])
def test_draft_model_failures(change: dict[str, Any], words: str) -> None:
    assert _fails(method_configs.draft_model(DRAFT, TARGET, 512)) == []
    fails = _fails(method_configs.draft_model({**DRAFT, **change}, TARGET, 512))
    assert any(words in f for f in fails), fails


NGRAM_SPEC = load_profile("ngram").links.config_correct


def test_ngram_numbers_against_the_limits_with_vllms_defaults() -> None:
    ok = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3,
          "prompt_lookup_min": 2}
    assert _fails(method_configs.ngram(ok, NGRAM_SPEC)) == []
    assert method_configs.ngram_lookup({"prompt_lookup_max": 4}) == (4, 4)
    assert method_configs.ngram_lookup({}) == (5, 5)  # vLLM's when neither is given
    fails = _fails(method_configs.ngram({**ok, "num_speculative_tokens": 24,
                                         "prompt_lookup_min": 1}, NGRAM_SPEC))
    assert any("num_speculative_tokens 24 outside 1-10" in f for f in fails)
    assert any("prompt_lookup_min 1 outside 2-8" in f for f in fails)
    unknown = method_configs.ngram({}, NGRAM_SPEC)
    assert [f.level for f in unknown] == ["warn"]


MTP_SPEC = load_profile("mtp").links.config_correct


def test_mtp_needs_a_target_that_carries_mtp_layers() -> None:
    deepseek = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}
    assert _fails(method_configs.mtp(deepseek, {"num_speculative_tokens": 1}, MTP_SPEC)) == []
    warned = method_configs.mtp(deepseek, {"num_speculative_tokens": 3}, MTP_SPEC)
    assert [f.level for f in warned] == ["ok", "warn"]
    qwen_next = {"text_config": {"mtp_num_hidden_layers": 1}}
    assert _fails(method_configs.mtp(qwen_next, {}, MTP_SPEC)) == []
    assert "carries no MTP layers" in _fails(method_configs.mtp(
        {"num_nextn_predict_layers": 0}, {}, MTP_SPEC))[0]
    assert "none of num_nextn_predict_layers" in _fails(method_configs.mtp(
        {"architectures": ["Qwen3ForCausalLM"]}, {}, MTP_SPEC))[0]


def test_config_correct_for_a_method_without_a_draft_config() -> None:
    no_draft = ConfigRead("draft", "", problem="no draft: not configured")
    target = ConfigRead("target", "/m/t", "/m/t/config.json", "directory", data=TARGET)
    link = config_correct.evaluate(
        NGRAM_SPEC, no_draft, target, None, CONTEXT, kind="ngram",
        method_findings=method_configs.ngram({"num_speculative_tokens": 30}, NGRAM_SPEC))
    assert link.status is Status.FAIL
    assert "num_speculative_tokens 30 outside 1-10" in link.summary
    assert link.hint.startswith("relaunch with n-gram numbers")
    mtp = config_correct.evaluate(
        MTP_SPEC, no_draft, target, None, CONTEXT, kind="mtp",
        method_findings=method_configs.mtp(TARGET, {}, MTP_SPEC))
    assert mtp.status is Status.FAIL
    assert "carries no MTP layers" in mtp.summary


# -- runtime activation, per method -------------------------------------------------------------

ENGINE = ("(EngineCore pid=9) INFO 12-03 08:07:39 [core.py:133] Initializing a V1 LLM engine "
          "(v0.32.0) with config: model='/m/t', speculative_config=SpeculativeConfig("
          "method='{method}', model={model}, num_spec_tokens={n}), tokenizer='/m/t'")
READY = "INFO:     Application startup complete."
SPEC = ("(APIServer pid=8) INFO 12-03 08:08:28 [metrics.py:120] SpecDecoding metrics: Mean "
        "acceptance length: {length}, Accepted throughput: 0.00 tokens/s, Drafted throughput: "
        "4.50 tokens/s, Accepted: 0 tokens, Drafted: 189 tokens, Per-position acceptance rate: "
        "0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%")


def _runtime(kind: str, lines: list[str], *, method: str, cfg: dict[str, Any] | None = None,
             target: dict[str, Any] | None = TARGET, tail: list[str] = ()) -> Any:
    profile = load_profile(kind)
    numbered = [[i * 100, line] for i, line in enumerate(lines)]
    tail_lines = [[100_000 + i, line] for i, line in enumerate(tail)]
    log = current_run.read_run(numbered, profile.links.runtime_activation, tail_lines)
    from vllm_console.console.transport.remote_scripts import ScriptRun

    run = ScriptRun(command="log_probe", exit=0, data={
        "log": {"state": "ok", "path": "/l", "size": 1}, "lines": numbered, "tail": tail_lines},
        stderr="", error="")
    draft = ConfigRead("draft", "/m/d", "/m/d/config.json", "directory", data=cfg)
    link = runtime_activation.evaluate(
        profile.links.runtime_activation, "/l", run, draft, CONTEXT, watch=profile.watch,
        host_label="h", kind=profile.kind, methods=profile.methods,
        expected=profile.acceptance, target=target)
    return link, log


def test_an_engine_that_died_on_its_first_request_fails_runtime_activation() -> None:
    lines = [ENGINE.format(method="eagle3", model="'/m/h'", n=3),
             "(Worker pid=10) INFO 12-03 08:07:53 [cpu_model_runner.py:75] Loading drafter "
             "model...", READY,
             "(Worker pid=10) ERROR 12-03 08:08:21 [multiproc_executor.py:1063] RuntimeError: "
             "mat1 and mat2 shapes cannot be multiplied (26x256 and 384x128)",
             "(APIServer pid=8) ERROR 12-03 08:08:21 [async_llm.py:906] vllm.v1.engine."
             "exceptions.EngineDeadError: EngineCore encountered an issue."]
    link, log = _runtime("eagle3", lines, method="eagle3", cfg=EAGLE3)
    assert log.failures == ()
    assert len(log.died) == 2
    assert link.status is Status.FAIL
    assert "the engine started, then died on a request: RuntimeError: mat1 and mat2" in \
        link.summary
    # The same lines past the probe's start-up scan (its tail) say the same.
    link, _ = _runtime("eagle3", lines[:3], method="eagle3", cfg=EAGLE3, tail=lines[3:])
    assert link.status is Status.FAIL
    assert "died on a request" in link.summary


def test_eagle3_aux_line_against_the_config_and_the_target() -> None:
    aux = ("(Worker pid=10) INFO 12-03 08:09:34 [gpu_model_runner.py:5243] Using auxiliary "
           "layers from speculative config: (1, 2, 3)")
    head = {**EAGLE3, "eagle_aux_hidden_state_layer_ids": [1, 2, 3]}
    four = {**TARGET, "num_hidden_layers": 4}
    engine = ENGINE.format(method="eagle3", model="'/m/h'", n=3)
    link, _ = _runtime("eagle3", [engine, aux, READY], method="eagle3", cfg=head, target=four)
    assert link.status is Status.PASS
    assert "aux layers (1, 2, 3) as the config names them" in link.summary
    link, _ = _runtime("eagle3", [engine, aux, READY], method="eagle3",
                       cfg={**head, "eagle_aux_hidden_state_layer_ids": [0, 1, 2]},
                       target=four)
    assert link.status is Status.FAIL
    assert "the config names [0, 1, 2]" in link.summary
    # The default aux layers are taken silently: unknown, with a traced restart offered.
    silent = [engine, READY]
    link, _ = _runtime("eagle3", silent, method="eagle3", cfg=EAGLE3, target=four)
    assert link.status is Status.UNKNOWN
    assert "vLLM logs nothing when it takes the model's default aux layers" in link.summary
    assert "--trace" in link.hint


def test_a_traced_restart_reports_the_default_eagle3_aux_layers() -> None:
    trace = ('(Worker pid=10) [vllm-console-trace] {"v": 1, "event": "call", "pid": 10, '
             '"fn": "vllm.model_executor.models.interfaces:SupportsEagle3.'
             'get_eagle3_default_aux_hidden_state_layers", "args": {}, '
             '"result": [2, 1, -1], "raised": null}')
    engine = ENGINE.format(method="eagle3", model="'/m/h'", n=3)
    link, _ = _runtime("eagle3", [engine, trace, READY], method="eagle3", cfg=EAGLE3)
    assert link.status is Status.FAIL, link.summary
    assert "the traced run took the model's default aux layers (2, 1, -1)" in link.summary


def test_acceptance_far_below_the_range_is_flagged_and_ngram_is_workload_bound() -> None:
    draft_lines = [ENGINE.format(method="draft_model", model="'/m/d'", n=3),
                   "(Worker pid=10) INFO 12-03 08:07:38 [cpu_model_runner.py:75] Loading "
                   "drafter model...", READY]
    link, log = _runtime("draft-model", draft_lines, method="draft_model", cfg=DRAFT,
                         tail=[SPEC.format(length="1.00")])
    assert log.acceptance == 1.0
    assert log.drafted == 189
    assert link.status is Status.PASS
    assert "acceptance 1.00, far below the expected 1.5-3.5" in link.summary
    assert link.details["acceptance_flagged"] is True
    ngram = [ENGINE.format(method="ngram", model="None", n=4), READY]
    link, _ = _runtime("ngram", ngram, method="ngram", tail=[SPEC.format(length="1.05")])
    assert link.status is Status.PASS
    assert "workload-bound" in link.summary
    assert "not a fault" in link.hint
    link, _ = _runtime("ngram", ngram, method="ngram", tail=[SPEC.format(length="4.69")])
    assert link.details["acceptance_flagged"] is False
    assert link.hint == ""


def test_the_engine_running_another_method_than_the_profile_judges_fails() -> None:
    lines = [ENGINE.format(method="ngram", model="None", n=4), READY]
    link, _ = _runtime("eagle3", lines, method="ngram", cfg=EAGLE3)
    assert link.status is Status.FAIL
    assert "runs speculative method 'ngram', which this profile (eagle3)" in link.summary


def test_mtp_layers_loaded_by_vllm() -> None:
    lines = [ENGINE.format(method="mtp", model="'/m/t'", n=1),
             "(Worker pid=10) INFO 12-03 08:07:54 [llm_base_proposer.py:1472] Detected MTP "
             "model. Sharing target model embedding weights with the draft model.", READY]
    link, _ = _runtime("mtp", lines, method="mtp", cfg=None,
                       target={"num_nextn_predict_layers": 1})
    assert link.status is Status.PASS
    assert "vLLM logged 'Detected MTP model'" in link.summary


def test_dflash_without_swa_is_proven_by_the_aux_layer_line() -> None:
    cfg = {"dflash_config": {"target_layer_ids": [0, 2], "mask_token_id": 4}}
    aux = ("(Worker pid=10) INFO 12-03 08:09:34 [gpu_model_runner.py:5243] Using auxiliary "
           "layers from speculative config: {aux}")
    engine = ENGINE.format(method="dflash", model="'/m/d'", n=3)
    link, _ = _runtime("dflash", [engine, aux.format(aux="(1, 3)"), READY], method="dflash",
                       cfg=cfg)
    assert link.status is Status.PASS
    assert "aux layers (1, 3) = target_layer_ids + 1" in \
        link.summary
    link, _ = _runtime("dflash", [engine, aux.format(aux="(0, 2)"), READY], method="dflash",
                       cfg=cfg)
    assert link.status is Status.FAIL
    assert "#40727 offset" in link.summary


# -- the whole chain, picking the profile --------------------------------------------------------

@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vc-methods-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.programs
async def test_the_chain_picks_eagle3_from_the_log_and_blames_the_config(root: Path) -> None:
    """No server left (it died): the log's engine line names the method, the default aux
    layers are invalid for the 2-layer target, the crash is runtime activation's evidence."""
    target, head = root / "target", root / "head"
    for path, cfg in ((target, TARGET), (head, EAGLE3)):
        path.mkdir()
        (path / "config.json").write_text(json.dumps(cfg))
    log = root / "serve.log"
    log.write_text("\n".join([
        "(APIServer pid=8) INFO 12-03 08:07:15 [api_utils.py:286] non-default args: "
        f"{{'model': '{target}', 'speculative_config': {{'method': 'eagle3', 'model': "
        f"'{head}', 'num_speculative_tokens': 3}}}}",
        ENGINE.format(method="eagle3", model=f"'{head}'", n=3), READY,
        "(APIServer pid=8) ERROR 12-03 08:08:21 [async_llm.py:906] vllm.v1.engine.exceptions."
        "EngineDeadError: EngineCore encountered an issue.", ""]))
    settings = ServeSettings(match="no such serve process here", log=str(log),
                             target=str(target), draft=str(head), python="/nonexistent/python")
    report = await run_chain(LocalHost("methods"), settings)
    assert report.profile == "eagle3"
    assert "profile eagle3: method eagle3 (from the engine start line)" in \
        report.link("config-correct").evidence[0].excerpt
    assert report.link("config-correct").status is Status.FAIL
    assert report.link("runtime-activation").status is Status.FAIL
    assert report.root_cause == "config-correct"
    assert report.to_json()["profile"] == "eagle3"
    # --profile wins over the engine's method.
    forced = await run_chain(LocalHost("methods"), settings, profile=load_profile("ngram"))
    assert forced.profile == "ngram"
    assert "runs speculative method 'eagle3'" in forced.link("runtime-activation").summary


def test_a_traced_restart_watches_what_the_methods_profiles_name() -> None:
    from vllm_console.checks.select import watch_for_argv

    eagle = watch_for_argv(["vllm", "serve", "/m", "--speculative-config",
                            json.dumps({"method": "eagle3", "model": "/h"})])
    assert "vllm.model_executor.models.interfaces:SupportsEagle3." \
           "get_eagle3_default_aux_hidden_state_layers" in eagle
    dflash = watch_for_argv(["vllm", "serve", "/m", "--spec-method", "dflash"])
    assert set(load_profile("dflash-swa").watch) <= set(dflash)  # SWA evidence included
    assert watch_for_argv(["vllm", "serve", "/m"]) == ()


def test_a_request_the_api_server_refused_is_not_the_engine_breaking() -> None:
    lines = [ENGINE.format(method="ngram", model="None", n=4), READY]
    refused = ["(APIServer pid=8) ERROR 12-03 08:08:21 [serving.py:201] NotFoundError: The "
               "model `x` does not exist.",
               'INFO:     127.0.0.1:48698 - "POST /v1/completions HTTP/1.1" 404 Not Found']
    link, log = _runtime("ngram", lines, method="ngram", tail=refused)
    assert log.died == ()
    assert link.status is Status.PASS
