"""`vllm-console demo` in a real terminal (tmux, 160x50): what a person sees and types."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.tmux import Terminal, app_env, demo_processes

pytestmark = pytest.mark.tmux

CONSOLE = [sys.executable, "-m", "console"]


@pytest.fixture
def terminal(tmp_path: Path):
    env = app_env()
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["TMPDIR"] = str(tmp_path)
    term = Terminal([*CONSOLE, "demo"], env=env)
    term.env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    term.start()
    yield term
    term.stop()


def test_demo_tells_the_incident_story_in_a_real_terminal(terminal: Terminal,
                                                          tmp_path: Path) -> None:
    screen = terminal.wait_for("vllm-console", timeout=15)
    assert "demo" in screen
    # The acceptance can come from /metrics before the first SpecDecoding log line (written
    # every 2 s, and scrolled off by request lines in between): wait for all three at once.
    screen = terminal.wait_for(lambda s: "acceptance length 1." in s and "ROOT CAUSE" in s
                               and "SpecDecoding metrics" in s, timeout=40)
    assert "GPU0" in screen
    assert "mask_token_id" in screen
    assert "config correct" in screen
    lines = screen.splitlines()
    assert len(lines) == 50
    assert max(len(line) for line in lines) <= 160

    terminal.keys("?")
    screen = terminal.wait_for("Keys", timeout=5)
    assert "command palette" in screen
    terminal.keys("Escape")
    terminal.wait_for(lambda s: "command palette" not in s, timeout=5)

    terminal.keys("f")
    terminal.wait_for("filter (regex", timeout=5)
    terminal.keys("SpecDecoding", "Enter")
    screen = terminal.wait_for("filter /SpecDecoding/", timeout=5)
    log_lines = [line for line in screen.splitlines()[28:-2] if "pid=" in line]
    assert log_lines
    assert all("SpecDecoding" in line for line in log_lines)

    terminal.keys("q")
    deadline = time.monotonic() + 15
    while terminal.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not terminal.alive(), "q did not quit"
    deadline = time.monotonic() + 10
    while demo_processes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert demo_processes(tmp_path) == [], "the demo left its simulated server running"
    assert not any(p.name.startswith("vllm-console-demo-") for p in tmp_path.iterdir())


def test_closing_the_terminal_stops_the_demo(terminal: Terminal, tmp_path: Path) -> None:
    terminal.wait_for(lambda s: "acceptance length" in s or "GPU0" in s, timeout=40)
    assert demo_processes(tmp_path)
    terminal.stop()
    deadline = time.monotonic() + 15
    while demo_processes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert demo_processes(tmp_path) == []


def test_unknown_scenario_is_a_clear_message(tmp_path: Path) -> None:
    import subprocess

    result = subprocess.run([*CONSOLE, "demo", "--scenario", "nope"], capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parents[2],
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 2
    assert "unknown scenario 'nope'" in result.stderr
    assert "incident" in result.stderr
    assert "Traceback" not in result.stderr
