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
from typing import TYPE_CHECKING, Any

from vllm_console.checks import draftconfig as dc
from vllm_console.console.transport.host import Host, HostError
from vllm_console.console.transport.remote_scripts import Inside

if TYPE_CHECKING:  # the pane shows a DraftDiff from the first frame; the chain's links,
    # profiles and references (pydantic models read from TOML) load when a diff is made
    from vllm_console.checks.links.config_correct import Finding
    from vllm_console.checks.profile import Profile
    from vllm_console.checks.references import Reference

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
    changes: tuple[Change, ...] = ()
    """What applying the reference (`a`) writes, in the draft's format."""
    inside: str = ""
    """Where `path` is when not on the host (`the docker container NAME`)."""
    container: Inside | None = None
    """That container (`a` writes through its mount)."""

    @property
    def wrong(self) -> tuple[FieldRow, ...]:
        return tuple(r for r in self.rows if not r.ok)


async def _read_inside(host: Host, inside: Inside, path: str) -> bytes:
    """A file at the container's path (`docker exec NAME cat`), never the host's namesake."""
    result = await host.run([inside.runtime, "exec", inside.ref, "cat", "--", path],
                            timeout=30)
    if not result.ok:
        why = result.error_text.strip().splitlines()[-1:] or [f"exit {result.exit_status}"]
        if "No such file" in why[0]:
            raise FileNotFoundError(path)
        if "Permission denied" in why[0]:
            raise PermissionError(path)
        raise HostError(f"{path} inside {inside.words}: {why[0][:300]}")
    return result.stdout


async def _read_json(host: Host, path: str, inside: Inside | None = None
                     ) -> tuple[dict[str, Any] | None, str]:
    where = f" (inside {inside.words})" if inside else ""
    try:
        raw = await _read_inside(host, inside, path) if inside else \
            await host.read_file(path, max_bytes=MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None, f"{path}: no such file{where}"
    except PermissionError:
        return None, f"{path}: permission denied{where}"
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
    from vllm_console.checks.references import choose_reference, load_reference_file

    if explicit:
        return load_reference_file(explicit)
    names = [draft_dir.rstrip("/"), str(draft.get("_name_or_path") or "")]
    return choose_reference(profile, names)


def compare(draft: Mapping[str, Any], reference: Mapping[str, Any] | None,
            fields: tuple[str, ...]) -> tuple[FieldRow, ...]:
    """The compared fields the draft's format carries (a speculators config's `architectures`
    names the speculator class, not the model: never compared, as in config-correct)."""
    if reference is None:
        return ()
    mine, ref = dc.normalised(draft), dc.normalised(reference)
    return tuple(FieldRow(k, ref[k], mine.get(k), k in mine) for k in fields
                 if k in ref and not _not_carried(draft, k))


def _not_carried(draft: Mapping[str, Any], key: str) -> bool:
    return key == "architectures" and dc.is_speculators(draft)


def json_value(value: Any) -> str:
    """A config value as the file shows it (`null`, `"full_attention"`), cut when long."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 160 else text[:159] + "…"


@dataclass(frozen=True)
class Change:
    """One write `a` makes: where in config.json (a dotted path), the value there now (absent
    when `present` is false), the new value, and why when it is not the reference's."""

    where: tuple[str, ...]
    old: Any
    new: Any
    present: bool
    why: str = ""

    def line(self) -> str:
        """`dflash_config.mask_token_id: 248064 -> 248070`, JSON values."""
        old = json_value(self.old) if self.present else "(absent)"
        return f"{'.'.join(self.where)}: {old} -> {json_value(self.new)}" + \
            (f"  ({self.why})" if self.why else "")


def _place(draft: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """Where this draft's format keeps `key`: `dflash_config` for a nested DFlash field,
    `transformer_layer_config` for a speculators layer field, else the top level."""
    section = draft.get("dflash_config")
    if isinstance(section, Mapping) and (key in section or key in ("mask_token_id",
                                                                    "target_layer_ids")
                                         and key not in draft):
        return ("dflash_config", key)
    if dc.is_speculators(draft):
        layer = draft.get("transformer_layer_config")
        if key == "target_layer_ids" and "target_layer_ids" not in draft and \
                "aux_hidden_state_layer_ids" in draft:
            return ("aux_hidden_state_layer_ids",)
        if isinstance(layer, Mapping) and key in layer and key not in draft:
            return ("transformer_layer_config", key)
    return (key,)


def _get(cfg: Mapping[str, Any], where: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = cfg
    for part in where:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _set(cfg: dict[str, Any], where: tuple[str, ...], value: Any) -> None:
    node = cfg
    for part in where[:-1]:
        node = node.setdefault(part, {})
    node[where[-1]] = copy.deepcopy(value)


def planned_changes(draft: Mapping[str, Any], reference: Mapping[str, Any],
                    fields: tuple[str, ...]) -> tuple[Change, ...]:
    """What `a` writes, in the draft's own format: each compared field that differs from the
    reference, where the format keeps it (fields the format does not carry are left alone);
    then what the console would otherwise warn about in the result (sliding layers with
    `use_sliding_window: false`, which makes HF drop the window)."""
    ref = dc.normalised(reference)
    mine = dc.normalised(draft)
    changes = []
    for key in fields:
        if key not in ref or _not_carried(draft, key) or (key in mine and mine[key] == ref[key]):
            continue
        where = _place(draft, key)
        present, old = _get(draft, where)
        changes.append(Change(where, old, ref[key], present))
    after = _with(draft, changes)
    if dc.sliding_layers(dc.normalised(after)) and dc.normalised(after).get(
            "use_sliding_window") is False:
        where = _place(draft, "use_sliding_window")
        changes.append(Change(where, False, True, True, "HF drops sliding_window when it is "
                                                        "false"))
    return tuple(changes)


def _with(draft: Mapping[str, Any], changes: tuple[Change, ...] | list[Change]
          ) -> dict[str, Any]:
    out = copy.deepcopy(dict(draft))
    for change in changes:
        _set(out, change.where, change.new)
    return out


def json_diff(draft: Mapping[str, Any], reference: Mapping[str, Any] | None) -> tuple[str, ...]:
    if reference is None:
        return ()
    a = json.dumps(reference, indent=2, sort_keys=True, default=repr).splitlines()
    b = json.dumps(draft, indent=2, sort_keys=True, default=repr).splitlines()
    return tuple(difflib.unified_diff(a, b, "reference", "draft config.json", lineterm=""))


async def load_draft_diff(host: Host, profile: Profile, draft_dir: str, target_dir: str = "",
                          reference: str = "", inside: Inside | None = None) -> DraftDiff:
    """Read the draft (and target) config on the host, or inside the server's container at
    its paths, and compare. Never raises for bad input: the DraftDiff carries the error."""
    from vllm_console.checks.links.config_correct import Finding, check_invariants
    from vllm_console.checks.profile import ProfileError

    if not draft_dir:
        return DraftDiff(error="no draft model known: is vllm serve running with a "
                               "--speculative-config? (or pass --draft)")
    path = config_path(draft_dir)
    draft, problem = await _read_json(host, path, inside)
    if draft is None:
        return DraftDiff(path=path, error=problem)
    target = None
    if target_dir:
        target, _ = await _read_json(host, config_path(target_dir), inside)
    try:
        ref = pick_reference(profile, draft_dir, draft, reference)
    except ProfileError as exc:
        return DraftDiff(path=path, error=str(exc), draft=draft)
    spec = profile.links.config_correct
    try:
        findings = tuple(check_invariants(draft, target, spec))
    except (TypeError, ValueError, RecursionError) as exc:
        findings = (Finding("fail", "config", f"cannot check the invariants: {exc}"),)
    return DraftDiff(path=path, inside=inside.words if inside else "", container=inside,
                     reference=ref.name if ref else None,
                     reference_source=ref.source if ref else "",
                     rows=compare(draft, ref.config if ref else None, spec.compare),
                     findings=findings, full_diff=json_diff(draft, ref.config if ref else None),
                     draft=draft, reference_config=ref.config if ref else {},
                     changes=planned_changes(draft, ref.config, spec.compare) if ref else ())


def with_reference_values(draft: Mapping[str, Any], reference: Mapping[str, Any],
                          fields: tuple[str, ...]) -> dict[str, Any]:
    """The draft with `planned_changes` made."""
    return _with(draft, planned_changes(draft, reference, fields))


async def apply_reference(host: Host, diff: DraftDiff, fields: tuple[str, ...],
                          clock: Any = time.time) -> str:
    """Write the reference values into the draft config.json, keeping a timestamped private
    backup of the original first. Returns the backup's path. Raises HostError."""
    if diff.error or not diff.path:
        raise HostError(diff.error or "no draft config to change")
    if not diff.reference_config:
        raise HostError("no reference for this drafter: nothing to apply (pass --reference)")
    target = diff.path
    if diff.container is not None:  # the host path of the same name is another file, or none
        target = await mount_source(host, diff.container, diff.path)
    original = await host.read_file(target, max_bytes=MAX_CONFIG_BYTES)
    try:
        if json.loads(original.decode("utf-8")) != diff.draft:
            # Through a mount: the container's file is this one only if they read the same.
            raise HostError(f"{target} changed since it was read: reload the diff (c) and "
                            "apply again")
    except (UnicodeDecodeError, ValueError):
        raise HostError(f"{target} is no longer valid JSON; not touching it") from None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
    backup = f"{target}.bak-{stamp}"
    await host.write_file(backup, original, mode=0o600)
    fixed = with_reference_values(diff.draft, diff.reference_config, fields)
    await host.write_file(target, (json.dumps(fixed, indent=2) + "\n").encode(), mode=0o644)
    return backup


async def mount_source(host: Host, inside: Inside, path: str) -> str:
    """The host path of the container's file `path`: through the mount (a bind mount or a
    volume, read-write) whose destination holds it, the longest first. Raises HostError
    naming why there is none: the file is in the container's own layer, or on a read-only
    mount (nothing is ever written inside a container with `docker exec`)."""
    result = await host.run([inside.runtime, "inspect", "-f", "{{json .Mounts}}", inside.ref],
                            timeout=30)
    try:
        mounts = json.loads(result.stdout) if result.ok else None
    except ValueError:
        mounts = None
    if not isinstance(mounts, list):
        why = result.error_text.strip()[:300] or f"exit {result.exit_status}"
        raise HostError(f"cannot read the mounts of {inside.words}: {why}")
    found = [m for m in mounts if isinstance(m, dict) and isinstance(m.get("Destination"), str)
             and isinstance(m.get("Source"), str) and m["Source"]
             and (path == m["Destination"] or path.startswith(m["Destination"].rstrip("/") + "/"))]
    if not found:
        raise HostError(f"{path} is in {inside.words}'s own files, not on a mount: the console "
                        "does not write inside a container; change it in the image, or mount "
                        "its directory")
    mount = max(found, key=lambda m: len(m["Destination"]))
    if not mount.get("RW", False):
        raise HostError(f"{path} is on a read-only mount of {inside.words} "
                        f"({mount['Source']}): not written")
    return mount["Source"].rstrip("/") + path[len(mount["Destination"].rstrip("/")):]
