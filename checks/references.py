"""Choosing and loading the reference draft config the config-correct link compares against.

Order: an explicit reference (`--reference PATH` / `checks.reference`, a file on this machine);
else the profile's reference whose name matches the draft directory's name or the draft
config's `_name_or_path` (the last path part, case-insensitive, or an alias); else none, and
config-correct checks the invariants alone (and says so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_console.checks.profile import Profile, ProfileError


class ReferenceError(ProfileError):
    """An explicit reference file cannot be read or is not a JSON object."""


@dataclass(frozen=True)
class Reference:
    """A reference config and where it came from."""

    name: str
    """The drafter it is for, or the file name of an explicit reference."""
    source: str
    """`--reference PATH`, or `shipped with profile NAME`."""
    config: Mapping[str, Any] = field(repr=False)


def load_reference_file(path: str) -> Reference:
    """An explicit reference config.json (or a directory holding one). Raises ReferenceError."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReferenceError(f"reference {p}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReferenceError(f"reference {p}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ReferenceError(f"reference {p}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ReferenceError(f"reference {p}: not a JSON object")
    drafter = data.get("_name_or_path")
    return Reference(p.name, f"--reference {p}" + (f" (for {drafter})" if drafter else ""), data)


def _key(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1].lower()


def choose_reference(profile: Profile, draft_names: Sequence[str]) -> Reference | None:
    """The profile's reference for a draft known by these names (dir, `_name_or_path`)."""
    wanted = {_key(n) for n in draft_names if n}
    for spec in profile.references:
        keys = {_key(spec.name), *(_key(a) for a in spec.aliases)}
        if wanted & keys:
            path = Path(profile.base_dir, spec.file)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ProfileError(f"profile {profile.name}: reference {spec.name} "
                                   f"({path}) cannot be read: {exc}") from None
            return Reference(spec.name, f"shipped with profile {profile.name}", data)
    return None
