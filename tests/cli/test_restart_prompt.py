"""`vllm-console restart HOST` asks `Restart now? [y/N]` in a real terminal (tmux): Ctrl+C
there cancels at once, as it does at any prompt. It did nothing until Enter was pressed: the
question was read on a worker thread that the interrupted command then waited for."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.sshd import free_port
from tests.tmux import Terminal, app_env
from vllm_console.console.sim import materialise, start_background, stop, wait_ready


@pytest.mark.tmux
@pytest.mark.programs
def test_ctrl_c_at_the_restart_question_cancels_at_once(tmp_path: Path) -> None:
    tree = materialise("healthy", tmp_path / "host", port=free_port(), startup_s=1)
    proc = start_background(tree)
    words = [sys.executable, "-m", "vllm_console", "restart", "h", "--local", "--match",
             f"serve {tree.target}", "--log", str(tree.log)]
    env = {**app_env(), "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(tmp_path))}
    # The shell outlives the Ctrl+C (a handler, not ignored: the command gets the default).
    term = Terminal(["sh", "-c", f"trap : INT; {shlex.join(words)}; echo exit=$?"], 120, 36,
                    env)
    try:
        assert wait_ready(tree, proc, 40)
        term.start()
        term.wait_for("Restart now? [y/N]", timeout=60)
        pressed = time.monotonic()
        term.keys("C-c")
        screen = term.wait_for("exit=", timeout=10)
        took = time.monotonic() - pressed
        assert "exit=130" in screen
        assert "cancelled: nothing was changed" in screen
        assert "Traceback" not in screen
        assert took < 3, took  # not after an Enter that never comes
        assert proc.poll() is None  # the server was left alone
        term.stop()
        # The question still reads what is typed: `n` and Enter, the default, cancel too.
        term = Terminal(list(term.command), 120, 36, env).start()
        term.wait_for("Restart now? [y/N]", timeout=60)
        term.keys("n", "Enter")
        screen = term.wait_for("exit=", timeout=10)
        assert "exit=2" in screen
        assert "vllm-console restart: cancelled: nothing was changed" in screen
        assert proc.poll() is None
    finally:
        term.stop()
        stop(tree, timeout=2.0)
        proc.wait()
