"""Config correct for the methods that are not DFlash: EAGLE-3, draft model, n-gram, MTP.

Each function returns the findings config-correct reports (`ok`, `warn`, `fail`), from the
draft config, the target config and the speculative config the launch asked for, with vLLM
0.32's own rules (quoted where they decide):

- eagle3: the head is an EAGLE-3 architecture; its auxiliary layer ids (the config's
  `eagle_aux_hidden_state_layer_ids`, else vLLM's default `(2, n // 2, n - 3)` for an n-layer
  target) are distinct and capturable (0..n: 0 is the embedding output, i the output of layer
  i), and as many as the head's `fc` takes (`num_aux_hidden_states`, else 3) — else the engine
  starts and dies on the first request; hidden size and vocabulary match the target.
- draft-model: same vocabulary size (vLLM refuses otherwise) and the same special token ids
  (a different tokenizer runs silently with near-zero acceptance), `max_position_embeddings`
  covers `--max-model-len`.
- ngram: `num_speculative_tokens`, `prompt_lookup_min/max` inside the profile's limits, with
  vLLM's defaulting (one given: the other equals it; neither: 5 and 5).
- mtp: the target carries MTP layers (`num_nextn_predict_layers` or the family's equivalent);
  more speculative tokens than layers is a warning (vLLM reuses the last layer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vllm_console.checks import draftconfig as dc
from vllm_console.checks.links.config_correct import Finding
from vllm_console.checks.profile import ConfigCorrectSpec

EAGLE3_AUX_DEFAULT = 3
"""How many target hidden states an EAGLE-3 head's `fc` folds when its config does not say."""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _target(target: Mapping[str, Any] | None, key: str) -> int | None:
    return _int(dc.text_value(target, key)) if target else None


def default_eagle3_aux(target_layers: int) -> list[int]:
    """vLLM's `SupportsEagle3.get_eagle3_default_aux_hidden_state_layers`."""
    return [2, target_layers // 2, target_layers - 3]


def eagle3_aux_ids(draft: Mapping[str, Any]) -> list[int] | None:
    """The aux layer ids the config names (top level or `eagle_config`), as vLLM reads them."""
    ids = draft.get("eagle_aux_hidden_state_layer_ids")
    section = draft.get("eagle_config")
    if not ids and isinstance(section, Mapping):
        ids = section.get("eagle_aux_hidden_state_layer_ids")
    if not ids and "aux_hidden_state_layer_ids" in draft:  # speculators format
        ids = draft.get("aux_hidden_state_layer_ids")
    if isinstance(ids, list | tuple) and ids and all(_int(i) is not None for i in ids):
        return list(ids)
    return None


def eagle3_fc_inputs(draft: Mapping[str, Any]) -> int:
    """How many hidden states the head's `fc` takes (vLLM's llama_eagle3 rule)."""
    n = _int(draft.get("num_aux_hidden_states"))
    if n is not None:
        return n
    section = draft.get("eagle_config")
    if isinstance(section, Mapping):
        ids = section.get("eagle_aux_hidden_state_layer_ids")
        if isinstance(ids, list) and ids:
            return len(ids)
    return EAGLE3_AUX_DEFAULT


def aux_problem(ids: list[int], target_layers: int | None, wanted: int) -> str | None:
    """Why these aux layer ids break the head, or None: each must be a distinct position vLLM
    captures (0..n for an n-layer target), as many as `fc` takes."""
    captured = set(ids)
    if target_layers is not None:
        bad = [i for i in ids if not 0 <= i <= target_layers]
        if bad:
            captured -= set(bad)
            return (f"{bad} {'is' if len(bad) == 1 else 'are'} not a position of the target's "
                    f"{target_layers} layers (vLLM captures 0..{target_layers}): "
                    f"{len(captured)} hidden state(s) where the head's fc takes {wanted}")
    if len(captured) != len(ids):
        return (f"{ids} repeat a layer: vLLM captures each once, {len(captured)} hidden "
                f"state(s) where the head's fc takes {wanted}")
    if len(ids) != wanted:
        return f"{len(ids)} ids, but the head's fc takes {wanted} hidden states"
    return None


def eagle3(draft: Mapping[str, Any], target: Mapping[str, Any] | None,
           spec: ConfigCorrectSpec) -> list[Finding]:
    """An EAGLE-3 head against its target."""
    out: list[Finding] = []
    archs = draft.get("architectures")
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    known = set(spec.eagle3_architectures)
    if dc.is_speculators(draft):
        kind = draft.get(dc.SPECULATORS_KEY)
        out.append(Finding("ok" if kind == "eagle3" else "fail", "architecture",
                           f"speculators_model_type {kind!r}" + ("" if kind == "eagle3" else
                                                                 " is not an EAGLE-3 head")))
    elif known and not known & set(archs):
        out.append(Finding("fail", "architecture", f"architectures {archs} is not an EAGLE-3 "
                                                   f"head (vLLM's: {sorted(known)[:3]}, ...)",
                           "not an EAGLE-3 head"))
    else:
        out.append(Finding("ok", "architecture", f"architectures {archs}: an EAGLE-3 head"))
    layers = _target(target, "num_hidden_layers")
    wanted = eagle3_fc_inputs(draft)
    ids = eagle3_aux_ids(draft)
    if ids is None:
        if layers is None:
            out.append(Finding("warn", "aux_layers", "no aux layer ids in the config and the "
                                                     "target's layer count is unknown: vLLM's "
                                                     "default could not be checked"))
        else:
            default = default_eagle3_aux(layers)
            problem = aux_problem(default, layers, wanted)
            if problem:
                out.append(Finding("fail", "aux_layers",
                                   f"no eagle_aux_hidden_state_layer_ids: vLLM takes the "
                                   f"model's default {tuple(default)}, and {problem}: the "
                                   "engine starts, then dies on the first request",
                                   f"default aux layers {tuple(default)} invalid for "
                                   f"{layers} target layers"))
            else:
                out.append(Finding("ok", "aux_layers", f"aux layers: the model's default "
                                                       f"{tuple(default)}, valid for {layers} "
                                                       "target layers"))
    else:
        problem = aux_problem(ids, layers, wanted)
        if problem:
            out.append(Finding("fail", "aux_layers", f"eagle_aux_hidden_state_layer_ids {ids}: "
                                                     f"{problem}",
                               f"aux layer ids {ids} invalid"))
        else:
            out.append(Finding("ok", "aux_layers", f"aux layer ids {ids} valid"
                                                   + (f" for {layers} target layers"
                                                      if layers is not None else "")))
    hidden = _int(draft.get("target_hidden_size")) or _int(draft.get("hidden_size"))
    t_hidden = _target(target, "hidden_size")
    if hidden is not None and t_hidden is not None:
        out.append(Finding("ok" if hidden == t_hidden else "fail", "hidden_size",
                           f"head's target hidden size {hidden} "
                           + ("= " if hidden == t_hidden else "!= ")
                           + f"target hidden_size {t_hidden}"))
    vocab, t_vocab = _int(draft.get("vocab_size")), _target(target, "vocab_size")
    if vocab is not None and t_vocab is not None:
        out.append(Finding("ok" if vocab == t_vocab else "fail", "vocab_size",
                           f"vocab_size {vocab} " + ("= " if vocab == t_vocab else "!= ")
                           + f"target vocab_size {t_vocab}"))
    d_vocab = _int(draft.get("draft_vocab_size"))
    if d_vocab is not None and t_vocab is not None and d_vocab > t_vocab:
        out.append(Finding("fail", "draft_vocab_size", f"draft_vocab_size {d_vocab} > target "
                                                       f"vocab_size {t_vocab}"))
    return out


def draft_model(draft: Mapping[str, Any], target: Mapping[str, Any] | None,
                max_model_len: int | None) -> list[Finding]:
    """A separate draft model against its target: the tokenizer (through config.json's
    vocabulary size and special token ids) and the context length."""
    out: list[Finding] = []
    if target is None:
        return [Finding("warn", "target", "target config unavailable: vocabulary and tokenizer "
                                          "not compared")]
    vocab, t_vocab = _int(dc.text_value(draft, "vocab_size")), _target(target, "vocab_size")
    if vocab is not None and t_vocab is not None and vocab != t_vocab:
        out.append(Finding("fail", "vocab_size", f"draft vocab_size {vocab} != target "
                                                 f"vocab_size {t_vocab}: vLLM refuses the pair "
                                                 "(same vocabulary size required)"))
    elif vocab is not None:
        out.append(Finding("ok", "vocab_size", f"vocab_size {vocab} = target's"))
    differ = []
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        mine, theirs = dc.text_value(draft, key), dc.text_value(target, key)
        if mine is not None and theirs is not None and mine != theirs:
            differ.append(f"{key} {mine} (target {theirs})")
    if differ:
        out.append(Finding("fail", "tokenizer",
                           f"the draft's tokenizer is not the target's: {', '.join(differ)}; "
                           "vLLM runs the pair without an error and accepts almost nothing",
                           "tokenizer differs from the target's"))
    else:
        out.append(Finding("ok", "tokenizer", "special token ids match the target's (tokenizer "
                                              "compared through config.json)"))
    positions = _int(dc.text_value(draft, "max_position_embeddings"))
    if max_model_len is not None and positions is not None:
        if positions < max_model_len:
            out.append(Finding("fail", "max_model_len",
                               f"draft max_position_embeddings {positions} < max_model_len "
                               f"{max_model_len}: the draft cannot cover the served context",
                               f"draft max_position_embeddings {positions} < {max_model_len}"))
        else:
            out.append(Finding("ok", "max_model_len", f"draft max_position_embeddings "
                                                      f"{positions} >= max_model_len "
                                                      f"{max_model_len}"))
    return out


def ngram_lookup(asked: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """prompt_lookup_min/max as vLLM 0.32 settles them (config/speculative.py): neither given,
    5 and 5; one given, the other equals it."""
    lo, hi = _as_int(asked.get("prompt_lookup_min")), _as_int(asked.get("prompt_lookup_max"))
    if lo is None and hi is None:
        return 5, 5
    return (lo if lo is not None else hi), (hi if hi is not None else lo)


def _as_int(value: Any) -> int | None:
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value)
    return _int(value)


def ngram(asked: Mapping[str, Any], spec: ConfigCorrectSpec) -> list[Finding]:
    """The n-gram numbers the launch asked for, against the profile's limits."""
    if not asked:
        return [Finding("warn", "speculative_config", "the launch's speculative config is "
                                                      "unknown (no process, no `non-default "
                                                      "args` line): nothing to judge")]
    lo, hi = ngram_lookup(asked)
    values = {"num_speculative_tokens": _as_int(asked.get("num_speculative_tokens")),
              "prompt_lookup_min": lo, "prompt_lookup_max": hi}
    out: list[Finding] = []
    for key, value in values.items():
        limit = spec.limits.get(key)
        if value is None:
            out.append(Finding("fail" if key == "num_speculative_tokens" else "warn", key,
                               f"{key} not set"))
        elif limit is not None and not limit.min <= value <= limit.max:
            out.append(Finding("fail", key, f"{key} {value} outside {limit.min}-{limit.max}: "
                                            f"{limit.why}", f"{key} {value} (want "
                                                            f"{limit.min}-{limit.max})"))
        else:
            out.append(Finding("ok", key, f"{key} {value}"))
    if lo is not None and hi is not None and lo > hi:
        out.append(Finding("fail", "prompt_lookup", f"prompt_lookup_min {lo} > "
                                                    f"prompt_lookup_max {hi}"))
    return out


def mtp(target: Mapping[str, Any] | None, asked: Mapping[str, Any],
        spec: ConfigCorrectSpec) -> list[Finding]:
    """The target carries MTP layers."""
    if target is None:
        return [Finding("fail", "mtp_layers", "target config unavailable: cannot tell whether "
                                              "it carries MTP layers")]
    for key in spec.mtp_fields:
        n = _int(dc.text_value(target, key))
        if n is not None:
            if n <= 0:
                return [Finding("fail", "mtp_layers", f"the target's {key} is {n}: it carries "
                                                      "no MTP layers to draft with")]
            tokens = _as_int(asked.get("num_speculative_tokens"))
            found = [Finding("ok", "mtp_layers", f"the target carries {n} MTP layer(s) "
                                                 f"({key})")]
            if tokens is not None and tokens > n:
                found.append(Finding("warn", "num_speculative_tokens",
                                     f"num_speculative_tokens {tokens} > {n} MTP layer(s): "
                                     "vLLM reuses the last layer for the extra positions "
                                     "(acceptance drops with each)"))
            return found
    return [Finding("fail", "mtp_layers", f"the target config has none of "
                                          f"{', '.join(spec.mtp_fields)}: it carries no MTP "
                                          "layers (use the checkpoint that ships them)",
                    "target has no MTP layers")]
