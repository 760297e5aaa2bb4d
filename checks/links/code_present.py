"""Link 1, code present: the serving interpreter's vLLM has DFlash SWA support, whole.

Pass: one variant's symbols are all there (PR #40898 branch or upstream), a compiled extension
is present, and RECORD vouches for every file (present, same size and hash). Error: the
interpreter cannot find vLLM, or cannot import it (a module it needs, e.g. torch, is not
installed: looked up without importing, which would take seconds). Fail: no variant,
no compiled extension, or a RECORD mismatch (an interrupted build leaves Python files new and
binaries old or absent). The #40727 offset not found in the source is a warning only: its place
moves between versions, and the runtime link settles it from the aux-layer line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vllm_console.checks.links.common import LINK_HINT, result, run_evidence, short_list
from vllm_console.checks.models import Evidence, LinkResult, Status
from vllm_console.checks.profile import CodePresentSpec
from vllm_console.console.transport.remote_scripts import ScriptRun

LINK = "code-present"


def payload(spec: CodePresentSpec) -> dict[str, Any]:
    """The code probe's parameters."""
    return {
        "package": spec.package,
        "distribution": spec.distribution,
        "compiled": list(spec.compiled),
        "requires_modules": list(spec.requires_modules),
        "variants": [v.model_dump() for v in spec.variants],
        "offset": spec.offset.model_dump() if spec.offset else None,
        "verify_record": spec.verify_record,
        "max_listed": 20,
    }


def _version(dist: Mapping[str, Any] | None) -> str:
    if not dist:
        return "version unknown (no distribution metadata)"
    text = f"vLLM {dist.get('version')}"
    commit = dist.get("commit")
    if commit:
        text += f" (commit {str(commit)[:12]})"
    if dist.get("editable"):
        text += " (editable)"
    return text


def _excerpt(data: Mapping[str, Any]) -> str:
    lines = [f"python: {data.get('python')} ({data.get('python_version')})",
             f"package: {data.get('package_dir')}"]
    dist = data.get("distribution")
    if dist:
        lines.append(f"distribution: {dist.get('name')} {dist.get('version')} at "
                     f"{dist.get('dist_info')}")
        named = dist.get("named")
        if named:
            lines.append(f"  it owns the {data.get('package_dir', '').rsplit('/', 1)[-1]} "
                         f"package; the distribution named {named.get('name')} "
                         f"({named.get('version')}, {named.get('dist_info')}) owns none of its "
                         "files (metadata only)")
        if dist.get("direct_url"):
            lines.append(f"direct_url.json: {dist.get('direct_url')}")
    record = data.get("record")
    if record and not record.get("skipped"):
        lines.append(f"RECORD: {record['entries']} entries, {record['hashed']} hashed "
                     f"({record['bytes'] / 1e6:.1f} MB in {record['seconds']} s), "
                     f"{record['missing_count']} missing, {record['mismatched_count']} differ")
        lines += [f"  missing: {m}" for m in record["missing"]]
        lines += [f"  differs: {m}" for m in record["mismatched"]]
    compiled = data.get("compiled") or {}
    lines.append(f"compiled extension: {short_list(compiled.get('present') or ['none'])} "
                 f"(looked for {short_list(compiled.get('expected') or [])})")
    for v in data.get("variants") or []:
        state = "all present" if not v["missing"] and not v["error"] else \
            (v["error"] or f"missing {short_list(v['missing'], 5)}")
        lines.append(f"{v['name']} ({v['file']}): {state}")
    offset = data.get("offset")
    if offset:
        lines.append(f"offset: {'found at ' + offset['where'] + ': ' + offset['line'] if offset['found'] else 'not found in ' + short_list(offset['looked'], 6)}")  # noqa: E501
    modules = data.get("modules") or {}
    if modules:
        lines.append("modules: " + ", ".join(f"{k} {'ok' if v else 'MISSING'}"
                                             for k, v in modules.items()))
    return "\n".join(lines)


def evaluate(spec: CodePresentSpec, python: str, run: ScriptRun | None,
             context: Evidence, *, host: str = "the host", no_python: str = "") -> LinkResult:
    """The verdict from the code probe's facts. `no_python`: why there is no interpreter,
    when it is not that no server runs (a server in a container)."""
    title = spec.title
    if not python:
        return result(LINK, title, Status.ERROR,
                      no_python or "no serving interpreter: no running serve process was "
                                   "found and serve.python is not set",
                      "start vllm serve, or pass --python /path/to/venv/bin/python",
                      [context])
    if run is None or run.data is None:
        why = run.error if run else "the probe did not run"
        hint = LINK_HINT.format(host=host) if run and run.link_failed else \
            f"check that {python} exists on {host} and runs vllm serve (--python)"
        return result(LINK, title, Status.ERROR, f"cannot run the code probe with {python}: "
                      f"{why}", hint, [context] + ([run_evidence("code-probe", run, run.stderr)]
                                                   if run else []))
    data = run.data
    evidence = [context, run_evidence("code-probe", run, _excerpt(data))]
    if not data.get("found"):
        return result(LINK, title, Status.ERROR,
                      f"{python} cannot find the {spec.package} package",
                      f"point --python at the interpreter that runs vllm serve on {host}",
                      evidence)
    fails: list[str] = []
    hints: list[str] = []
    warnings: list[str] = []
    variants = data.get("variants") or []
    good = [v for v in variants if not v["missing"] and not v["error"]]
    if not good:
        missing = "; ".join(f"{v['name']}: missing {short_list(v['missing'], 3)}"
                            if not v["error"] else f"{v['name']}: {v['error']}"
                            for v in variants)
        fails.append(f"no DFlash SWA support in {spec.package} ({missing})")
        hints.append(f"install the PR #40898 branch or an upstream vLLM >= 0.26 into "
                     f"{python}'s environment")
    compiled = data.get("compiled") or {}
    if spec.compiled and not compiled.get("present"):
        fails.append(f"no compiled extension ({short_list(spec.compiled)}) in "
                     f"{data.get('package_dir')}")
        hints.append("the build did not finish (or is Python-only): rebuild or reinstall vLLM")
    dist = data.get("distribution")
    record = data.get("record")
    if dist is None:
        warnings.append("no installed distribution metadata: the install cannot be verified")
    elif record is None:
        warnings.append("no RECORD: the install cannot be verified file by file")
    elif dist.get("owns_package") is False:
        warnings.append(f"no installed distribution's RECORD lists the {spec.package} "
                        f"package ({dist.get('name')}'s does not): the install cannot be "
                        "verified file by file")
    elif not record.get("skipped") and (record["missing_count"] or record["mismatched_count"]):
        first = (record["missing"] + record["mismatched"])[:2]
        fails.append(f"incomplete install: {record['missing_count']} file(s) missing, "
                     f"{record['mismatched_count']} differ from RECORD "
                     f"(e.g. {short_list(first, 2)})")
        hints.append("a build or install was interrupted: reinstall vLLM "
                     "(pip install --force-reinstall --no-deps ...)")
    if dist is not None and dist.get("same_tree") is False:
        warnings.append(f"the source read ({data.get('package_dir')}) is not the tree RECORD "
                        f"describes ({dist.get('base')})")
    missing_modules = [k for k, ok in (data.get("modules") or {}).items() if not ok]
    if missing_modules:
        # Not a verdict on the code: this interpreter cannot import vLLM at all.
        return result(LINK, title, Status.ERROR,
                      f"{python} cannot import {spec.package}: {short_list(missing_modules)} "
                      "not installed in its environment",
                      f"install {short_list(missing_modules)} into {python}'s environment "
                      "(vLLM cannot start from it either), or point --python at the "
                      "interpreter that runs vllm serve", evidence)
    offset = data.get("offset")
    if spec.offset is not None and offset is not None and not offset.get("found"):
        warnings.append(f"{spec.offset.name} not found in the source (its place moves between "
                        "versions: the runtime link checks the aux-layer line)")
    version = _version(dist)
    details = {"version": dist.get("version") if dist else None,
               "commit": dist.get("commit") if dist else None,
               "variant": good[0]["name"] if good else None,
               "warnings": warnings}
    warn = f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''})" if warnings else ""
    if fails:
        return result(LINK, title, Status.FAIL, f"{version}: {'; '.join(fails)}{warn}",
                      "; ".join(hints) + (f" (also: {'; '.join(warnings)})" if warnings else ""),
                      evidence, details)
    verified = ""
    if record and not record.get("skipped") and dist and dist.get("owns_package") is not False:
        verified = f"; RECORD of {dist.get('name')} {dist.get('version')}: " \
                   f"{record['hashed']} files verified"
    summary = f"{version}: {good[0]['name']} symbols present{verified}{warn}"
    hint = "warning: " + "; ".join(warnings) if warnings else ""
    return result(LINK, title, Status.PASS, summary, hint, evidence, details)
