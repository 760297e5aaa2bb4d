"""console/tui/ui_state.py: what the console remembers between runs (the theme), read on start and
written when it changes, privately, and never at the cost of the console."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vllm_console.console.tui.ui_state import load_ui_state, save_ui_state, state_path


def test_nothing_saved_yet_reads_as_empty(tmp_path: Path) -> None:
    assert load_ui_state(tmp_path / "missing" / "ui.json") == {}


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", "", "\x00\xff"])
def test_a_damaged_file_reads_as_empty(tmp_path: Path, content: str) -> None:
    path = tmp_path / "ui.json"
    path.write_text(content)
    assert load_ui_state(path) == {}


def test_save_merges_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "vllm-console" / "ui.json"
    save_ui_state({"theme": "vllm-light"}, path)
    save_ui_state({"other": 1}, path)
    assert json.loads(path.read_text()) == {"theme": "vllm-light", "other": 1}
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert not path.with_suffix(".tmp").exists(), "written atomically, no leftover"
    save_ui_state({"theme": "vllm-dark"}, path)
    assert load_ui_state(path)["theme"] == "vllm-dark"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a read-only mode")
def test_a_read_only_home_does_not_break_the_console(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    save_ui_state({"theme": "vllm-light"}, locked / "sub" / "ui.json")  # no exception
    assert load_ui_state(locked / "sub" / "ui.json") == {}


def test_a_path_that_cannot_be_a_directory_does_not_break_the_console(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    save_ui_state({"theme": "vllm-light"}, blocker / "ui.json")  # a file where a dir must be
    assert load_ui_state(blocker / "ui.json") == {}


def test_the_file_lives_in_the_xdg_state_directory(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_path() == tmp_path / "vllm-console" / "ui.json"
