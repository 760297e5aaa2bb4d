"""Link 2, fields extracted: the config vLLM builds from the draft keeps the SWA fields.

The host's own code builds it (see `console/hostside/probes/fields_probe.py`). Pass: every SWA field
config.json has survives with its value. Fail: one is dropped or changed, or the host's
extraction raises on this config. Error: the draft config or the serving interpreter cannot be
used (an import error names the module). A native z-lab config is read by HF as-is; when
transformers is not importable it is not rebuilt, and the evidence says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vllm_console.checks.configs import ConfigRead
from vllm_console.checks.links.common import LINK_HINT, result, run_evidence, short_list, show
from vllm_console.checks.models import Evidence, LinkResult, Status
from vllm_console.checks.profile import FieldsExtractedSpec, RuntimeActivationSpec
from vllm_console.console.transport.remote_scripts import ScriptRun

LINK = "fields-extracted"


def payload(spec: FieldsExtractedSpec, config_path: str, package: str) -> dict[str, Any]:
    """The fields probe's parameters."""
    return {"config_path": config_path, "fields": list(spec.fields),
            "format_key": spec.format_key, "extractor": spec.extractor,
            "package": package, "static_source": spec.static_source}


def compare(source: Mapping[str, Any], built: Mapping[str, Any]) -> dict[str, list[str]]:
    """Fields of config.json kept, dropped or changed in the built config (`lost` holds the
    names of the dropped and changed ones)."""
    out: dict[str, list[str]] = {"kept": [], "dropped": [], "changed": [], "lost": []}
    for key, value in source.items():
        if key not in built:
            out["dropped"].append(key)
            out["lost"].append(key)
        elif built[key] != value:
            out["changed"].append(f"{key} {show(value, 40)} -> {show(built[key], 40)}")
            out["lost"].append(key)
        else:
            out["kept"].append(key)
    return out


def significant(source: Mapping[str, Any]) -> set[str]:
    """The fields whose loss changes the drafter vLLM builds from this config.

    `layer_types` always; with sliding layers also the window and `use_sliding_window` (HF's
    Qwen3Config drops the window without it). Without `layer_types`, HF derives the layer
    types from `use_sliding_window` and `max_window_layers`: then every field counts. A window
    that no layer uses (the incident's full-attention config) may be lost harmlessly.
    """
    types = source.get("layer_types")
    if not isinstance(types, list):
        return set(source) if source.get("use_sliding_window") else {"layer_types"}
    if "sliding_attention" in types:
        return {"layer_types", "sliding_window", "use_sliding_window"}
    return {"layer_types"}


def _static_line(static: Mapping[str, Any]) -> str:
    if not static:
        return ""
    if static.get("error"):
        return f"static reading (fallback): {static.get('file', '')}: {static['error']}"
    mentions = static.get("mentions") or {}
    named = [k for k, v in mentions.items() if v]
    unnamed = [k for k, v in mentions.items() if not v]
    return (f"static reading (fallback, not a verdict) of {static.get('file')}: names "
            f"{short_list(named, 6) or 'none'}; does not name {short_list(unnamed, 6) or '-'}")


def _excerpt(data: Mapping[str, Any], cmp: Mapping[str, list[str]] | None) -> str:
    ext = data.get("extraction") or {}
    lines = [f"format: {data.get('format')}"
             + (f" (speculators_model_type {data.get('algorithm')!r})"
                if data.get("format") == "speculators" else ""),
             f"built with: {ext.get('how')}"
             + (f" (transformers {ext['transformers']})" if ext.get("transformers") else "")]
    where = data.get("source_where") or {}
    for key, value in (data.get("source") or {}).items():
        lines.append(f"config.json {key} = {show(value, 80)} ({where.get(key)})")
    if ext.get("values") is not None:
        for key, value in ext["values"].items():
            lines.append(f"built {key} = {show(value, 80)}")
        if ext.get("absent"):
            lines.append(f"built config lacks: {short_list(ext['absent'], 6)}")
    if ext.get("error"):
        err = ext["error"]
        lines.append(f"{err['kind']} error: {err['type']}: {err['message']}")
    if cmp:
        lines.append(f"kept: {short_list(cmp['kept'], 6) or '-'}; dropped: "
                     f"{short_list(cmp['dropped'], 6) or '-'}; changed: "
                     f"{short_list(cmp['changed'], 4) or '-'}")
    static = _static_line(data.get("static") or {})
    if static:
        lines.append(static)
    return "\n".join(lines)


def evaluate(spec: FieldsExtractedSpec, python: str, draft: ConfigRead,
             run: ScriptRun | None, context: Evidence, *, host: str = "the host",
             kind: str = "dflash-swa", no_python: str = "") -> LinkResult:
    """The verdict from the fields probe's facts (`kind` other than `dflash-swa`: every
    listed field config.json has must survive). `no_python`: as `code_present.evaluate`."""
    title = spec.title
    if not python:
        return result(LINK, title, Status.ERROR,
                      no_python or "no serving interpreter to run the host's extraction with",
                      "start vllm serve, or pass --python /path/to/venv/bin/python", [context])
    if draft.data is None:
        hint = LINK_HINT.format(host=host) if draft.link_failed else \
            "fix the draft path (--draft) or its config.json"
        return result(LINK, title, Status.ERROR, draft.problem, hint,
                      [context, draft.evidence()])
    if run is None or run.data is None:
        why = run.error if run else "the probe did not run"
        hint = LINK_HINT.format(host=host) if run and run.link_failed else \
            f"check that {python} exists on {host} (--python)"
        return result(LINK, title, Status.ERROR, f"cannot run the extraction with {python}: "
                      f"{why}", hint,
                      [context] + ([run_evidence("fields-probe", run, run.stderr)] if run else []))
    data = run.data
    state = data.get("config") or {}
    if state.get("state") != "ok":
        return result(LINK, title, Status.ERROR,
                      f"{python} cannot read {state.get('path')}: {state.get('state')}",
                      "check the draft's config.json", [context, run_evidence(
                          "fields-probe", run, str(state))])
    ext = data.get("extraction") or {}
    source = data.get("source") or {}
    values = ext.get("values")
    cmp = compare(source, values) if values is not None else None
    evidence = [context, run_evidence("fields-probe", run, _excerpt(data, cmp))]
    native = data.get("format") == "native"
    error = ext.get("error")
    details = {"format": data.get("format"), "comparison": cmp}
    if error and error["kind"] == "import":
        if native:
            present = short_list(source, 6) or "none of the SWA fields"
            return result(LINK, title, Status.PASS,
                          f"native config: HF reads it as-is ({present}); not rebuilt: "
                          f"{python} has no usable transformers.AutoConfig "
                          f"({error['type']})", "", evidence, details)
        module = spec.extractor.partition(":")[0]
        return result(LINK, title, Status.ERROR,
                      f"{python} cannot import {module}: {error['type']}: "
                      f"{error['message'].splitlines()[0] if error['message'] else ''}",
                      f"the serving environment is broken (vLLM cannot start from it either): "
                      f"fix it (e.g. install the missing module into {python}'s venv)",
                      evidence, details)
    if error:
        status = Status.UNKNOWN if native else Status.FAIL
        what = "HF could not rebuild the native config" if native else \
            "the host's extraction raised on this config"
        return result(LINK, title, status, f"{what}: {error['type']}: {error['message'][:200]}",
                      "vLLM hits the same error when it loads the draft: fix the draft config "
                      "or the vLLM install", evidence, details)
    assert cmp is not None
    how = "HF (transformers.AutoConfig)" if native else \
        f"speculators {data.get('algorithm')!r} extraction"
    lost = cmp["dropped"] + cmp["changed"]
    harmful = [k for k in cmp["lost"] if k in (significant(source) if kind == "dflash-swa"
                                                else set(source))]
    if harmful and kind != "dflash-swa":
        return result(LINK, title, Status.FAIL, f"{how} loses {short_list(harmful, 4)}",
                      "vLLM builds the drafter without them: use a vLLM whose conversion keeps "
                      "them, or give them in the form this vLLM reads", evidence, details)
    if harmful:
        hint = ("this vLLM's speculators conversion does not carry the SWA fields: install the "
                "PR #40898 branch or vLLM >= 0.26 (algos.py copies them)") if not native else \
            ("HF rebuilds the config without them: set use_sliding_window: true when the draft "
             "has sliding layers (Qwen3Config drops sliding_window otherwise)")
        return result(LINK, title, Status.FAIL,
                      f"{how} loses {short_list(lost, 4)}", hint, evidence, details)
    if not source:
        return result(LINK, title, Status.PASS,
                      f"{how}: config.json holds none of {short_list(spec.fields, 4)} "
                      "(nothing to lose; config-correct judges whether it should)",
                      "", evidence, details)
    absent = [f for f in spec.fields if f not in source]
    note = f" ({short_list(absent, 4)} not in config.json)" if absent else ""
    hint = ""
    if lost:
        note += f" ({len(lost)} unused field(s) lost)"
        hint = (f"warning: {how} loses {short_list(lost, 4)}; harmless for this config (no "
                "layer uses them), but the drafter would lose its window if it had sliding "
                "layers")
    return result(LINK, title, Status.PASS, f"{how} keeps {short_list(cmp['kept'], 4)}{note}",
                  hint, evidence, details)


def evaluate_engine_config(spec: FieldsExtractedSpec, rspec: RuntimeActivationSpec,
                           asked: Mapping[str, Any], run: ScriptRun | None, context: Evidence,
                           *, host: str = "the host") -> LinkResult:
    """Probe `speculative-config` (a method with no draft config, n-gram): the engine's start
    line carries the method and the number of tokens the launch asked for."""
    from vllm_console.checks.links.current_run import read_run
    from vllm_console.checks.links.method_configs import ngram_lookup
    from vllm_console.checks.select import asked_in_log

    title = spec.title
    if run is None or run.data is None:
        why = run.error if run else "no serve log to read"
        hint = LINK_HINT.format(host=host) if run and run.link_failed else \
            "pass --log with the file vllm serve writes to"
        return result(LINK, title, Status.ERROR, f"cannot read the engine's config: {why}",
                      hint, [context])
    data = run.data
    log = read_run(data.get("lines") or [], rspec)
    config = dict(asked) or asked_in_log(log.asked)
    lo, hi = ngram_lookup(config) if config else (None, None)
    lines = [f"asked: {show(config, 300)}" if config else "asked: unknown (no process, no "
             "`non-default args` line)",
             f"engine line: {log.engine_line[:400] if log.engine_line else 'none in this run'}",
             f"prompt lookup as vLLM settles it: min {lo}, max {hi}"]
    evidence = [context, run_evidence("engine-config", run, "\n".join(lines))]
    details = {"asked": config, "engine_method": log.engine_method,
               "engine_tokens": log.engine_tokens}
    if log.engine_line is None:
        return result(LINK, title, Status.UNKNOWN, "no engine start line in the current run: "
                      "the engine's own speculative config is not known yet",
                      "check again once the server is up", evidence, details)
    differ = []
    want_method = config.get("method")
    if want_method and log.engine_method and want_method != log.engine_method:
        differ.append(f"method {log.engine_method!r} (asked {want_method!r})")
    want_n = config.get("num_speculative_tokens")
    if want_n is not None and log.engine_tokens is not None and \
            str(want_n) != str(log.engine_tokens):
        differ.append(f"{log.engine_tokens} speculative tokens (asked {want_n})")
    if differ:
        return result(LINK, title, Status.FAIL, f"the engine runs {', '.join(differ)}",
                      "the running engine is not the launch you checked: restart it with the "
                      "config you want", evidence, details)
    return result(LINK, title, Status.PASS,
                  f"the engine's speculative config carries method {log.engine_method!r} and "
                  f"{log.engine_tokens} speculative tokens"
                  + (f" (prompt lookup {lo}-{hi})" if lo is not None else ""),
                  "", evidence, details)
