"""`vllm-console demo` in a real terminal (tmux, 160x50): what a person sees and types."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.tmux import Terminal, app_env, demo_processes

pytestmark = pytest.mark.tmux

CONSOLE = [sys.executable, "-m", "vllm_console"]


def demo_terminal(tmp_path: Path, width: int = 160, height: int = 50) -> Terminal:
    """`vllm-console demo` in tmux at this size; its temp tree, state and data in tmp_path."""
    env = app_env()
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["TMPDIR"] = str(tmp_path)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return Terminal([*CONSOLE, "demo"], width=width, height=height, env=env).start()


@pytest.fixture
def terminal(tmp_path: Path):
    term = demo_terminal(tmp_path)
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

    assert terminal.quit(), "q did not quit"
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


def test_80x24_shows_the_acceptance_the_verdicts_and_the_root_cause(tmp_path: Path) -> None:
    """The compact layout: what the user came for fits without scrolling; 1 shows the GPUs
    maximised and z brings the layout back."""
    terminal = demo_terminal(tmp_path, 80, 24)
    try:
        screen = terminal.wait_for(lambda s: "acceptance length 1." in s and "ROOT CAUSE" in s,
                                   timeout=40)
        lines = screen.splitlines()
        assert lines[0].startswith(" demo (sim) ● connected"), "the header stays whole"
        assert len(lines) == 24
        assert max(len(line) for line in lines) <= 80
        for verdict in ("code present       pass", "fields extracted   pass",
                        "runtime activation unknown  not proven: press R",
                        "config correct     fail     ROOT CAUSE"):
            assert verdict in screen, verdict
        terminal.wait_for(lambda s: "serve: ready" in s.splitlines()[0], timeout=10)
        terminal.keys("1")
        screen = terminal.wait_for("GPU0", timeout=5)
        assert "ROOT CAUSE" not in screen
        terminal.keys("z")
        terminal.wait_for(lambda s: "ROOT CAUSE" in s and "GPU0" not in s, timeout=5)
    finally:
        terminal.stop()


def test_250x70_shows_long_summaries_whole(tmp_path: Path) -> None:
    """A wide, tall terminal: the checklist's summaries wrap instead of being cut at ~120
    columns, so the whole config-correct finding is readable."""
    terminal = demo_terminal(tmp_path, 250, 70)
    try:
        screen = terminal.wait_for(lambda s: "ROOT CAUSE" in s and "layer_types" in s,
                                   timeout=40)
        checklist = " ".join(line.split("││")[0].strip("│ ") for line in screen.splitlines()
                             if "││" in line)
        words = " ".join(checklist.split())
        assert ("mask_token_id 248064 (want 248070), target_layer_ids [1, 17, 33, 49, 63] "
                "(want [1, 16, 31, 46, 61]), layer_types") in words, words
    finally:
        terminal.stop()


def test_y_in_the_evidence_view_copies_the_command_through_the_terminal(
        tmp_path: Path) -> None:
    """OSC 52 reaches the terminal: tmux (set-clipboard on) keeps it as its paste buffer."""
    terminal = demo_terminal(tmp_path)
    try:
        terminal._tmux("set-option", "-g", "set-clipboard", "on")
        terminal.wait_for("ROOT CAUSE", timeout=40)
        terminal.keys("3")  # the checklist, maximised and focused: the root cause is selected
        terminal.wait_for(lambda s: "ROOT CAUSE" in s and "GPU0" not in s, timeout=5)
        terminal.keys("Enter")
        terminal.wait_for("Evidence · config-correct", timeout=5)
        terminal.keys("y")
        terminal.wait_for("copied", timeout=5)
        deadline = time.monotonic() + 5
        buffer = ""
        while "Qwen3.6-27B-DFlash" not in buffer and time.monotonic() < deadline:
            buffer = terminal._tmux("show-buffer", check=False).stdout
            time.sleep(0.1)
        # The probes' commands, as run on the host, one a line; not the excerpts.
        assert "Qwen3.6-27B-DFlash" in buffer, buffer
        assert "│" not in buffer, "the commands, not the excerpts"
    finally:
        terminal.stop()


def test_unknown_scenario_is_a_clear_message(tmp_path: Path) -> None:
    import subprocess

    result = subprocess.run([*CONSOLE, "demo", "--scenario", "nope"], capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parents[2],
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 2
    assert "unknown scenario 'nope'" in result.stderr
    assert "incident" in result.stderr
    assert "Traceback" not in result.stderr


def _select_sleepers(pid: int) -> list[Path]:
    """The program's threads that sleep in select or poll: Textual's terminal reader, and the
    console's hang-up watcher, which wakes only on a hang-up (Python names no thread for the
    kernel; where a thread sleeps tells them apart from the event loop's and the writer's)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = [task for task in Path(f"/proc/{pid}/task").iterdir()
                 if task.name != str(pid)  # the main thread: the event loop, in epoll
                 and ("poll_schedule_timeout" in (wchan := (task / "wchan").read_text())
                      or "select" in wchan)]
        if len(found) >= 2:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no terminal reader and hang-up watcher found in {pid}")


def _wakeups(tasks: list[Path]) -> int:
    """How often these threads have woken (voluntary context switches, from /proc)."""
    return sum(int((task / "status").read_text().split("voluntary_ctxt_switches:")[1]
                   .split()[0]) for task in tasks)


def test_the_console_left_alone_does_not_poll_the_terminal(terminal: Terminal) -> None:
    """Textual's input thread woke ten times a second to look for a stop: most of an idle
    console's CPU (0.15-0.2% of a core for an empty app). It sleeps until a key now; Escape
    alone still closes a dialog and q still quits at once."""
    terminal.wait_for(lambda s: "acceptance length" in s and "GPU0" in s, timeout=40)
    pid = terminal.pane_pid()
    sleepers = _select_sleepers(pid)
    before = _wakeups(sleepers)
    time.sleep(2.0)
    assert _wakeups(sleepers) - before <= 2  # was ~20
    terminal.keys("?")
    terminal.wait_for("Keys", timeout=5)
    terminal.keys("Escape")
    terminal.wait_for(lambda s: "command palette" not in s, timeout=5)
    assert terminal.quit(), "q did not quit"
