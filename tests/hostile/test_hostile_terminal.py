"""Hostile text from the host, in a real terminal (tmux): log lines and file names carrying OSC
title sets, clipboard writes, screen clears, cursor moves, alternate-screen exits, 8-bit C1
controls and bidi overrides reach the terminal as inert characters.

What a terminal would do with them, had they passed, is what is checked: the pane title stays,
the alternate screen stays on, the console's header and footer stay where they are, no marker
text lands outside the log pane, and the markers are visible as plain text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tmux import Terminal, app_env, demo_processes

pytestmark = pytest.mark.tmux

CONSOLE = [sys.executable, "-m", "vllm_console"]
ROOT = Path(__file__).resolve().parents[2]

# Each carries a marker (HOSTILE-n) that must show up as text, and only inside the log pane.
HOSTILE_LINES: list[bytes] = [
    b"HOSTILE-1 osc title \x1b]0;PWNED-TITLE\x07 after",
    b"HOSTILE-2 osc title st \x1b]2;PWNED-TITLE-2\x1b\\ after",
    b"HOSTILE-3 clear \x1b[2J\x1b[H\x1b[3J after",
    b"HOSTILE-4 full reset \x1bc after",
    b"HOSTILE-5 cursor \x1b[1;1HPWNED-AT-HOME \x1b[10A\x1b[200C after",
    b"HOSTILE-6 leave alt screen \x1b[?1049l\x1b[?47l after",
    b"HOSTILE-7 c1 csi \xc2\x9b2J \xc2\x9d0;PWNED-C1\xc2\x9c after",
    b"HOSTILE-8 raw c1 \x9b2J \x9d0;PWNED-RAW\x07 after",
    b"HOSTILE-9 bidi \xe2\x80\xaeevil\xe2\x80\xac \xe2\x81\xa6iso\xe2\x81\xa9 after",
    b"HOSTILE-10 clipboard \x1b]52;c;UFdORUQ=\x07 hyperlink \x1b]8;;http://x\x07t\x1b]8;;\x07",
    b"HOSTILE-11 dcs \x1bPq#0;2;0;0;0\x1b\\ bell \x07\x07 backspace \x08\x08 after",
    b"HOSTILE-12 unterminated osc \x1b]0;PWNED-OPEN after",
    b"HOSTILE-13 invalid utf8 \xff\xfe\xc3\x28 nul \x00 del \x7f after",
]
MARKERS = [f"HOSTILE-{i}" for i in range(1, len(HOSTILE_LINES) + 1)]


def tmux_format(term: Terminal, fmt: str) -> str:
    return subprocess.run(["tmux", "-L", term.socket, "display-message", "-p", "-t", "main",
                           fmt], capture_output=True, text=True).stdout.strip()


def assert_terminal_intact(term: Terminal, title_before: str) -> None:
    assert term.title() == title_before, "the pane title was changed"
    assert "PWNED" not in term.title()
    raw = term.raw_screen()
    assert "\x1b]" not in raw


@pytest.fixture
def demo(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = app_env()
    env.update({"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data"),
                "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)})
    term = Terminal([*CONSOLE, "demo"], env=env).start()
    yield term
    term.stop()  # the terminal closed under it (tmux kill-server), not `q`
    deadline = time.monotonic() + 15
    while demo_processes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert demo_processes(tmp_path) == [], "the console or its host outlived the terminal"


def test_hostile_log_lines_are_inert_in_a_real_terminal(demo: Terminal, tmp_path: Path) -> None:
    screen = demo.wait_for(lambda s: "GPU0" in s and "SpecDecoding" in s, timeout=40)
    title = demo.title()
    assert tmux_format(demo, "#{alternate_on}") == "1"
    log = next(tmp_path.glob("vllm-console-demo-*/host/logs/vllm-serve.log"))
    with open(log, "ab") as fh:
        fh.write(b"\n".join(HOSTILE_LINES) + b"\nHOSTILE-END sentinel\n")
    # The log pane follows the end: the sentinel shows once every hostile line was drawn.
    demo.keys("F")  # follow off and on again: whatever the state, end up following
    demo.keys("F")
    screen = demo.wait_for("HOSTILE-END", timeout=15)
    time.sleep(0.5)  # any late effect of the sequences would show by now
    screen = demo.screen()
    assert_terminal_intact(demo, title)
    assert tmux_format(demo, "#{alternate_on}") == "1", "the alternate screen was left"
    lines = screen.splitlines()
    assert "vllm-console" in lines[0], "the header was cleared or overwritten"
    assert "Quit" in lines[-1], "the footer was cleared or overwritten"
    log_top = next(i for i, line in enumerate(lines) if "Serve log" in line)
    visible = [m for m in MARKERS if any(m + " " in line for line in lines)]
    assert len(visible) >= 10, f"hostile lines not shown: {set(MARKERS) - set(visible)}"
    for i, line in enumerate(lines):
        if "HOSTILE" in line or "PWNED" in line:
            assert i > log_top, f"hostile text outside the log pane, row {i}: {line!r}"
    assert "PWNED-AT-HOME" not in lines[0]
    shown = "\n".join(lines)
    assert "<U+202E>" in shown, "the bidi override is not shown as inert text"
    assert "HOSTILE-7 c1 csi" in shown
    # The app still answers keys: help opens and closes.
    demo.keys("?")
    demo.wait_for("Keys", timeout=5)
    demo.keys("Escape")
    demo.wait_for(lambda s: "command palette" not in s, timeout=5)
    assert_terminal_intact(demo, title)


def test_status_prints_hostile_host_text_inert(tmp_path: Path) -> None:
    """`status` prints to the terminal directly: a serve process whose log file name and
    arguments carry escape sequences must not retitle or clear it."""
    from vllm_console.console.cli.commands.demo import free_port
    from vllm_console.console.sim import materialise, stop
    from vllm_console.console.sim.runner import wait_ready

    tree = materialise("incident", tmp_path / "host", port=free_port(), startup_s=0.3,
                       metrics_interval_s=0.3)
    hostile_log = tree.log.parent / "serve \x1b]0;PWNED-LOGNAME\x07 \x1b[2J \u202eevil.log"
    argv = [*tree.serve_argv(), "--served-model-name", "m\x1b]2;PWNED-ARGV\x07\x1b[2Jx"]
    with open(hostile_log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=tree.root, start_new_session=True)
    term: Terminal | None = None
    try:
        assert wait_ready(tree, proc, timeout=30)
        script = tmp_path / "run.sh"
        script.write_text(
            "echo BEFORE-STATUS\n"
            f"{' '.join(json.dumps(w) for w in CONSOLE)} status demo --local "
            f"--match {json.dumps(str(tree.root) + '/venv serve')} "
            f"--nvidia-smi {json.dumps(str(tree.nvidia_smi))}\n"
            "echo AFTER-STATUS $?\nsleep 30\n")
        env = app_env()
        env["PYTHONPATH"] = str(ROOT)
        term = Terminal(["sh", str(script)], env=env).start()
        title = term.title()
        screen = term.wait_for("AFTER-STATUS", timeout=30)
        assert "AFTER-STATUS 0" in screen, screen
        assert "BEFORE-STATUS" in screen, "the screen was cleared"
        assert_terminal_intact(term, title)
        assert "serve" in screen
        assert "running" in screen
        assert "PWNED-LOGNAME" in screen, "the log path is not shown"
    finally:
        if term is not None:
            term.stop()
        stop(tree, timeout=5)
        proc.wait(5)
    assert not os.path.exists(tmp_path / "PWNED")
