"""Link 4, config correct: the draft config.json against its reference and invariants.

Field by field against the reference for that drafter (the profile's `compare` list, with
`dflash_config` keys folded in), and invariants that need no reference: `layer_types` has one
valid entry per layer; a sliding layer has a window; `target_layer_ids` increase, lie inside
the target's layers, and follow the family's default spacing (a warning when not);
`mask_token_id` is below the target's vocabulary; hidden sizes and layer counts agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_console.checks import draftconfig as dc
from vllm_console.checks.configs import ConfigRead
from vllm_console.checks.links.common import LINK_HINT, result, short_list, show
from vllm_console.checks.models import Evidence, LinkResult, Status
from vllm_console.checks.profile import ConfigCorrectSpec
from vllm_console.checks.references import Reference

LINK = "config-correct"


@dataclass(frozen=True)
class Finding:
    """One comparison or invariant: `ok`, `warn` or `fail`, and why."""

    level: str
    check: str
    message: str
    short: str = ""
    """A few words for the one-line summary (the message when empty)."""


def compare_reference(draft: Mapping[str, Any], reference: Mapping[str, Any],
                      fields: tuple[str, ...]) -> list[Finding]:
    """Field-by-field differences from the reference (only fields the reference has)."""
    mine, ref = dc.normalised(draft), dc.normalised(reference)
    out = []
    for key in fields:
        if key not in ref or (key == "architectures" and dc.is_speculators(draft)):
            continue
        if key not in mine:
            out.append(Finding("fail", f"reference:{key}",
                               f"{key} missing (reference {show(ref[key], 60)})",
                               f"{key} missing"))
        elif mine[key] != ref[key]:
            mine_s, ref_s = show(mine[key], 200), show(ref[key], 200)
            short = f"{key} {mine_s} (want {ref_s})" if len(mine_s + ref_s) <= 40 else key
            out.append(Finding("fail", f"reference:{key}",
                               f"{key} {mine_s} != reference {ref_s}", short))
        else:
            out.append(Finding("ok", f"reference:{key}", f"{key} matches"))
    return out


def _layer_types(draft: Mapping[str, Any], spec: ConfigCorrectSpec) -> list[Finding]:
    out = []
    types = draft.get("layer_types")
    n = draft.get("num_hidden_layers")
    if types is None:
        return [Finding("ok", "layer_types", "no layer_types (every layer full attention)")]
    if dc.layer_types(draft) is None:
        return [Finding("fail", "layer_types", f"layer_types is not a list of strings: "
                                               f"{show(types, 60)}")]
    if isinstance(n, int) and len(types) != n:
        out.append(Finding("fail", "layer_types", f"layer_types has {len(types)} entries, "
                                                  f"num_hidden_layers is {n}"))
    bad = sorted({t for t in types if t not in spec.layer_type_values})
    if bad:
        out.append(Finding("fail", "layer_types", f"invalid layer_types value(s) {bad} "
                                                  f"(valid: {list(spec.layer_type_values)})"))
    sliding = dc.sliding_layers(draft, spec.sliding_value)
    if sliding and dc.swa_window(draft) is None:
        out.append(Finding("fail", "window", f"{len(sliding)} sliding layer(s) but no window "
                                             "(sliding_window or dflash_config.swa_window_size)"))
    elif sliding and draft.get("use_sliding_window") is False:
        out.append(Finding("warn", "window", "use_sliding_window is false: HF's Qwen3Config "
                                             "drops sliding_window then"))
    if not out:
        kinds = "all full attention" if not sliding else \
            f"{len(sliding)} sliding (window {dc.swa_window(draft)}), " \
            f"{len(types) - len(sliding)} full"
        out.append(Finding("ok", "layer_types", f"layer_types valid: {kinds}"))
    return out


def _target_ids(draft: Mapping[str, Any], target_layers: int | None) -> list[Finding]:
    ids = dc.target_layer_ids(draft)
    raw = dc.normalised(draft).get("target_layer_ids")
    if raw is None:
        return [Finding("fail", "target_layer_ids", "no target_layer_ids (dflash_config or top "
                                                    "level)")]
    if ids is None:
        return [Finding("fail", "target_layer_ids", f"target_layer_ids is not a list of ints: "
                                                    f"{show(raw, 60)}")]
    out = []
    if any(b <= a for a, b in zip(ids, ids[1:], strict=False)):
        out.append(Finding("fail", "target_layer_ids", f"target_layer_ids {ids} do not "
                                                       "increase"))
    if target_layers is not None and any(i < 0 or i >= target_layers for i in ids):
        out.append(Finding("fail", "target_layer_ids", f"target_layer_ids {ids} fall outside "
                                                       f"the target's {target_layers} layers"))
    if target_layers is not None and ids:
        # z-lab spaces one id per draft layer: k is the number of ids.
        default = dc.default_spacing(target_layers, len(ids))
        if ids != default:
            out.append(Finding("warn", "spacing", f"target_layer_ids {ids} differ from the "
                                                  f"default spacing {default} for "
                                                  f"{target_layers} target layers"))
    if not any(f.level == "fail" for f in out):
        out.append(Finding("ok", "target_layer_ids", f"target_layer_ids {ids} valid"))
    return out


def check_invariants(draft: Mapping[str, Any], target: Mapping[str, Any] | None,
                     spec: ConfigCorrectSpec) -> list[Finding]:
    """Everything that must hold whatever the reference."""
    draft = dc.normalised(draft)
    out = _layer_types(draft, spec)
    t_layers = dc.text_value(target, "num_hidden_layers") if target else None
    t_vocab = dc.text_value(target, "vocab_size") if target else None
    t_hidden = dc.text_value(target, "hidden_size") if target else None
    n_target = draft.get("num_target_layers")
    layers = t_layers if isinstance(t_layers, int) else \
        (n_target if isinstance(n_target, int) else None)
    out += _target_ids(draft, layers)
    if isinstance(t_layers, int) and isinstance(n_target, int) and n_target != t_layers:
        out.append(Finding("fail", "num_target_layers", f"num_target_layers {n_target} but the "
                                                        f"target has {t_layers} layers"))
    mask = dc.normalised(draft).get("mask_token_id")
    vocab = t_vocab if isinstance(t_vocab, int) else draft.get("vocab_size")
    whose = "target" if isinstance(t_vocab, int) else "draft"
    if not isinstance(mask, int):
        out.append(Finding("fail", "mask_token_id", "no mask_token_id"))
    elif isinstance(vocab, int):
        if not 0 <= mask < vocab:
            out.append(Finding("fail", "mask_token_id", f"mask_token_id {mask} is outside the "
                                                        f"{whose} vocabulary ({vocab})"))
        else:
            out.append(Finding("ok", "mask_token_id", f"mask_token_id {mask} < {whose} vocab "
                                                      f"{vocab}"))
    hidden = draft.get("target_hidden_size") or draft.get("hidden_size")
    if isinstance(t_hidden, int) and isinstance(hidden, int) and hidden != t_hidden:
        out.append(Finding("fail", "hidden_size", f"draft hidden size {hidden} != target "
                                                  f"hidden_size {t_hidden}"))
    return out


NO_DRAFT_KINDS = ("ngram", "mtp")
"""Kinds whose drafter has no config of its own (n-gram: none; MTP: the target's layers)."""


def evaluate(spec: ConfigCorrectSpec, draft: ConfigRead, target: ConfigRead,
             reference: Reference | None, context: Evidence, *, host: str = "the host",
             kind: str = "dflash-swa", method_findings: list[Finding] | None = None
             ) -> LinkResult:
    """The verdict for the draft config: DFlash's invariants, or `method_findings` (the
    profile's kind's own, `checks.links.method_configs`), and the reference when there is one."""
    title = spec.title
    needs_draft = kind not in NO_DRAFT_KINDS
    evidence = [context, draft.evidence()] if needs_draft else [context]
    if needs_draft and draft.data is None:
        hint = LINK_HINT.format(host=host) if draft.link_failed else \
            "fix the draft path (--draft) or the file, then check again"
        return result(LINK, title, Status.ERROR, draft.problem, hint, evidence)
    evidence.append(target.evidence())
    if method_findings is not None:
        findings = list(method_findings)
    else:
        assert draft.data is not None
        findings = check_invariants(draft.data, target.data, spec)
    if reference is not None and draft.data is not None and needs_draft:
        findings = compare_reference(draft.data, reference.config, spec.compare) + findings
    fails = [f for f in findings if f.level == "fail"]
    warns = [f for f in findings if f.level == "warn"]
    lines = [f"{f.level.upper():4}  {f.message}" for f in findings]
    if reference is None:
        lines.insert(0, "no reference for this drafter: invariants only" if needs_draft else
                     f"{kind}: no draft config of its own; judged: the launch's speculative "
                     "config and the target's config")
    else:
        lines.insert(0, f"reference {reference.name} ({reference.source})")
    if target.data is None:
        lines.append(f"target config unavailable ({target.problem}): target checks used the "
                     "draft's own figures")
    evidence.append(Evidence.make("draft-config-checks", "", None, "\n".join(lines)))
    details = {"findings": [f.__dict__ for f in findings],
               "reference": reference.name if reference else None,
               # The file a person edits: the checklist's root-cause row names it.
               "file": draft.path if needs_draft else None}
    ref_fails = [f for f in fails if f.check.startswith("reference:")]
    other = [f for f in fails if not f.check.startswith("reference:")]
    if fails:
        parts = []
        if ref_fails:
            name = reference.name if reference else "the reference"
            parts.append(f"{len(ref_fails)} field(s) differ from {name}: "
                         + short_list((f.short or f.message for f in ref_fails), 4))
        if other:
            parts.append(short_list((f.message for f in other), 2))
        fix = {"ngram": "relaunch with n-gram numbers inside these limits "
                        "(--speculative-config)",
               "mtp": "serve a checkpoint that carries its MTP layers, or another method"}
        hint = fix.get(kind) or f"fix {draft.path}" + (
            f" from the reference {reference.name} (the console's draft diff shows each field)"
            if reference else "") + "; then restart vllm serve"
        if warns:
            hint += "; also: " + "; ".join(w.message for w in warns)
        return result(LINK, title, Status.FAIL, "; ".join(parts), hint, evidence, details)
    against = f"matches {reference.name}" if reference else "no reference for this drafter"
    if not needs_draft:
        against = "; ".join(f.message for f in findings if f.level == "ok")[:200] or "nothing"
    summary = f"{against}; invariants hold" + (f" ({len(warns)} warning(s))" if warns else "")
    hint = "; ".join(w.message for w in warns)
    if reference is None and needs_draft:
        hint = (hint + "; " if hint else "") + "pass --reference PATH to compare field by field"
    return result(LINK, title, Status.PASS, summary, hint, evidence, details)
