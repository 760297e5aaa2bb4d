"""Fixtures of the TUI tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private XDG state directory: what the console remembers (the theme) stays in the
    test."""
    home = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home
