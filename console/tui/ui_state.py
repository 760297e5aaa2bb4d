"""What the console remembers between runs (the theme), in the XDG state directory.

Read on start, written only when it changes; nothing is created at import time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import platformdirs

from vllm_console.console import APP_NAME


def state_path() -> Path:
    return Path(platformdirs.user_state_dir(APP_NAME)) / "ui.json"


def load_ui_state(path: Path | None = None) -> dict[str, Any]:
    try:
        data = json.loads((path or state_path()).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_ui_state(changes: dict[str, Any], path: Path | None = None) -> None:
    """Merge `changes` into the state file (private, written atomically). Best effort: a
    read-only home must not break the console."""
    path = path or state_path()
    data = {**load_ui_state(path), **changes}
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass
