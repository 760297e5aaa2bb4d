"""Which profile judges a host: the one for the speculative method its engine runs.

The method comes, in this order, from the serve process's command line (`--speculative-config`,
its dotted keys, `--spec-method`), the console's last launch of it when none runs, or the
current run of the log (the engine start line, else `non-default args`). A config that names a
draft but no method gets the method vLLM would infer (an EAGLE-3 or DFlash architecture, else
`draft_model`). DFlash has two profiles: `dflash-swa` when the draft config (or its reference)
has sliding layers, `dflash` otherwise. No method found: the default profile, and the evidence
says so. `--profile NAME` skips all this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllm_console.checks import draftconfig as dc
from vllm_console.checks.profile import (
    DEFAULT_PROFILE,
    Profile,
    load_profile,
    method_family,
    shipped_by_method,
)
from vllm_console.checks.references import choose_reference
from vllm_console.console.parsers.engine import config_dict


@dataclass(frozen=True)
class Choice:
    """The profile picked and why, in words for the evidence."""

    profile: Profile
    why: str


def infer_method(spec: Mapping[str, Any], draft: Mapping[str, Any] | None) -> str | None:
    """The method of a speculative config, as vLLM infers it when `method` is not given."""
    method = spec.get("method")
    if isinstance(method, str) and method:
        return method_family(method)
    if not spec.get("model"):
        return None
    if draft is not None:
        speculators = draft.get(dc.SPECULATORS_KEY)
        if isinstance(speculators, str):
            return method_family(speculators)
        listed = draft.get("architectures")
        archs = " ".join(a for a in listed if isinstance(a, str)) \
            if isinstance(listed, list) else ""
        if "eagle3" in archs.lower():
            return "eagle3"
        if "dflash" in archs.lower():
            return "dflash"
    return "draft_model"


def asked_in_log(log_asked: Mapping[str, Any]) -> dict[str, Any]:
    """The speculative config of a `non-default args` line (a dict, or JSON text)."""
    out = config_dict(log_asked.get("speculative_config"))
    for flag, key in (("spec_method", "method"), ("spec_model", "model")):
        if log_asked.get(flag) and not out.get(key):
            out[key] = log_asked[flag]
    return out


def _has_sliding(cfg: Mapping[str, Any] | None) -> bool:
    return cfg is not None and bool(dc.sliding_layers(dc.normalised(cfg)))


def _reference_sliding(draft: Mapping[str, Any] | None, draft_names: list[str],
                       explicit: Mapping[str, Any] | None) -> bool:
    if explicit is not None:
        return _has_sliding(explicit)
    if draft is not None and isinstance(draft.get("_name_or_path"), str):
        draft_names = [*draft_names, draft["_name_or_path"]]
    for name in shipped_by_method().get("dflash", ()):
        try:
            ref = choose_reference(load_profile(name), draft_names)
        except Exception:  # an unreadable shipped reference is the profile test's business
            ref = None
        if ref is not None and _has_sliding(ref.config):
            return True
    return False


def choose(method: str | None, where: str, *, draft: Mapping[str, Any] | None,
           draft_names: list[str], reference: Mapping[str, Any] | None = None) -> Choice:
    """The shipped profile for `method` (found in `where`)."""
    if method is None:
        return Choice(load_profile(DEFAULT_PROFILE),
                      f"profile {DEFAULT_PROFILE}: the default (no speculative method found in "
                      "the serve command line, the last launch or the log)")
    names = shipped_by_method().get(method, ())
    if not names:
        return Choice(load_profile(DEFAULT_PROFILE),
                      f"profile {DEFAULT_PROFILE}: the default (no shipped profile judges "
                      f"method {method!r}, from {where}; pass --profile PATH to one that does)")
    if method == "dflash":
        sliding = _has_sliding(draft) or _reference_sliding(draft, draft_names, reference)
        name = "dflash-swa" if sliding else "dflash"
        why = "the draft config or its reference has sliding layers" if sliding else \
            "neither the draft config nor a reference has sliding layers"
        return Choice(load_profile(name), f"profile {name}: method dflash (from {where}); "
                                          f"{why}")
    return Choice(load_profile(names[0]), f"profile {names[0]}: method {method} (from {where})")


def watch_for_argv(argv: list[str]) -> tuple[str, ...]:
    """What a traced restart of this command line should watch (`--profile auto`): the watch
    lists of every shipped profile for its speculative method (DFlash: with and without SWA,
    whose layers only the SWA profile's functions show)."""
    from vllm_console.console.hostclient.discovery import parse_serve_argv

    method = infer_method(parse_serve_argv(argv).speculative, None)
    names = shipped_by_method().get(method or "", ())
    return tuple(dict.fromkeys(w for name in names for w in load_profile(name).watch))
