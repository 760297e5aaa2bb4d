"""The draft config against its reference: per-field rows, the invariant findings, the full
JSON diff, and writing the reference values into the draft config.json (with a backup).

Headless: the draft-diff pane renders a `DraftDiff`; the `a` key calls `apply_reference`.
The comparison itself is the config-correct link's (`checks.links.config_correct`), so the
pane and the checklist can never disagree.
"""

from __future__ import annotations

import copy
import difflib
import json
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from checks import draftconfig as dc
from checks.links.config_correct import Finding, check_invariants
from checks.profile import Profile, ProfileError
from checks.references import Reference, choose_reference, load_reference_file
from console.host import Host, HostError

MAX_CONFIG_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class FieldRow:
    """One compared field: the reference's value, the draft's, and whether they agree."""

    field: str
    expected: Any
    actual: Any
    present: bool

    @property
    def ok(self) -> bool:
        return self.present and self.actual == self.expected


@dataclass(frozen=True)
class DraftDiff:
    """Everything the draft-diff pane shows. `error` is set when the draft could not be read."""

    path: str = ""
    reference: str | None = None
    reference_source: str = ""
    rows: tuple[FieldRow, ...] = ()
    findings: tuple[Finding, ...] = ()
    full_diff: tuple[str, ...] = ()
    error: str = ""
    draft: Mapping[str, Any] = field(default_factory=dict, repr=False)
    reference_config: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def wrong(self) -> tuple[FieldRow, ...]:
        return tuple(r for r in self.rows if not r.ok)


async def _read_json(host: Host, path: str) -> tuple[dict[str, Any] | None, str]:
    try:
        raw = await host.read_file(path, max_bytes=MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None, f"{path}: no such file"
    except PermissionError:
        return None, f"{path}: permission denied"
    except HostError as exc:
        return None, str(exc)
    if len(raw) > MAX_CONFIG_BYTES:
        return None, f"{path}: larger than {MAX_CONFIG_BYTES // 1024 // 1024} MiB"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"{path}: not valid JSON ({exc})"
    if not isinstance(data, dict):
        return None, f"{path}: not a JSON object"
    return data, ""


def config_path(model_dir: str) -> str:
    return model_dir if model_dir.endswith(".json") else posixpath.join(model_dir, "config.json")


def pick_reference(profile: Profile, draft_dir: str, draft: Mapping[str, Any],
                   explicit: str = "") -> Reference | None:
    """`--reference` first, else the profile's reference for this drafter's names."""
    if explicit:
        return load_reference_file(explicit)
    names = [draft_dir.rstrip("/"), str(draft.get("_name_or_path") or "")]
    return choose_reference(profile, names)


def compare(draft: Mapping[str, Any], reference: Mapping[str, Any] | None,
            fields: tuple[str, ...]) -> tuple[FieldRow, ...]:
    if reference is None:
        return ()
    mine, ref = dc.normalised(draft), dc.normalised(reference)
    return tuple(FieldRow(k, ref[k], mine.get(k), k in mine) for k in fields if k in ref)


def json_diff(draft: Mapping[str, Any], reference: Mapping[str, Any] | None) -> tuple[str, ...]:
    if reference is None:
        return ()
    a = json.dumps(reference, indent=2, sort_keys=True, default=repr).splitlines()
    b = json.dumps(draft, indent=2, sort_keys=True, default=repr).splitlines()
    return tuple(difflib.unified_diff(a, b, "reference", "draft config.json", lineterm=""))


async def load_draft_diff(host: Host, profile: Profile, draft_dir: str, target_dir: str = "",
                          reference: str = "") -> DraftDiff:
    """Read the draft (and target) config on the host and compare. Never raises for bad
    input: the DraftDiff carries the error."""
    if not draft_dir:
        return DraftDiff(error="no draft model known: is vllm serve running with a "
                               "--speculative-config? (or pass --draft)")
    path = config_path(draft_dir)
    draft, problem = await _read_json(host, path)
    if draft is None:
        return DraftDiff(path=path, error=problem)
    target = None
    if target_dir:
        target, _ = await _read_json(host, config_path(target_dir))
    try:
        ref = pick_reference(profile, draft_dir, draft, reference)
    except ProfileError as exc:
        return DraftDiff(path=path, error=str(exc), draft=draft)
    spec = profile.links.config_correct
    try:
        findings = tuple(check_invariants(draft, target, spec))
    except (TypeError, ValueError, RecursionError) as exc:
        findings = (Finding("fail", "config", f"cannot check the invariants: {exc}"),)
    return DraftDiff(path=path, reference=ref.name if ref else None,
                     reference_source=ref.source if ref else "",
                     rows=compare(draft, ref.config if ref else None, spec.compare),
                     findings=findings, full_diff=json_diff(draft, ref.config if ref else None),
                     draft=draft, reference_config=ref.config if ref else {})


def with_reference_values(draft: Mapping[str, Any], reference: Mapping[str, Any],
                          fields: tuple[str, ...]) -> dict[str, Any]:
    """The draft with each compared field set to the reference's value, where the draft keeps
    it: inside `dflash_config` when the draft nests it there, else at the top level."""
    out = copy.deepcopy(dict(draft))
    ref = dc.normalised(reference)
    section = out.get("dflash_config") if isinstance(out.get("dflash_config"), dict) else None
    for key in fields:
        if key not in ref:
            continue
        if section is not None and (key in section or key in ("mask_token_id",
                                                                "target_layer_ids")
                                    and key not in out):
            section[key] = copy.deepcopy(ref[key])
        else:
            out[key] = copy.deepcopy(ref[key])
    return out


async def apply_reference(host: Host, diff: DraftDiff, fields: tuple[str, ...],
                          clock: Any = time.time) -> str:
    """Write the reference values into the draft config.json, keeping a timestamped private
    backup of the original first. Returns the backup's path. Raises HostError."""
    if diff.error or not diff.path:
        raise HostError(diff.error or "no draft config to change")
    if not diff.reference_config:
        raise HostError("no reference for this drafter: nothing to apply (pass --reference)")
    original = await host.read_file(diff.path, max_bytes=MAX_CONFIG_BYTES)
    try:
        if json.loads(original.decode("utf-8")) != diff.draft:
            raise HostError(f"{diff.path} changed on the host since it was read: reload the "
                            "diff (c) and apply again")
    except (UnicodeDecodeError, ValueError):
        raise HostError(f"{diff.path} is no longer valid JSON; not touching it") from None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    backup = f"{diff.path}.bak-{stamp}"
    await host.write_file(backup, original, mode=0o600)
    fixed = with_reference_values(diff.draft, diff.reference_config, fields)
    await host.write_file(diff.path, (json.dumps(fixed, indent=2) + "\n").encode(), mode=0o644)
    return backup
