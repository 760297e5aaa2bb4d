"""`vllm-console sim` under a restart from the console: it used to exit when the restart
stopped its server, leaving the relaunched one orphaned (running, nobody's child, no Ctrl-C
to stop it). It follows the relaunched server now and stops it when it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sshd import free_port
from vllm_console.console.sim import SimTree, tree_processes, wait_ready

pytestmark = pytest.mark.programs

CONSOLE = [sys.executable, "-m", "vllm_console"]


def wait_for_line(proc: subprocess.Popen[str], words: str, timeout: float) -> str:
    """Lines of `proc`'s output up to the first holding `words`."""
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if words in line:
            return "".join(seen)
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"no {words!r} in:\n{''.join(seen)}")


def test_sim_follows_the_server_a_restart_relaunched_and_stops_it(tmp_path: Path) -> None:
    root = tmp_path / "host"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    sim = subprocess.Popen([*CONSOLE, "sim", "--scenario", "healthy", "--root", str(root),
                            "--port", str(free_port())], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    tree: SimTree | None = None
    try:
        wait_for_line(sim, "ready:", 60)
        tree = SimTree.load(root)
        first = tree_processes(tree)
        done = subprocess.run([*CONSOLE, "restart", "h", "--local", "--yes", "--match",
                               f"serve {tree.target}", "--log", str(tree.log)],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        said = wait_for_line(sim, "relaunched: following vllm serve pid", 30)
        new_pid = int(said.rsplit("pid ", 1)[1].split(";")[0])
        assert new_pid not in first
        assert sim.poll() is None, "sim exited under the restart"
        assert wait_ready(tree, None, 5)

        sim.send_signal(signal.SIGINT)  # Ctrl-C: the relaunched server stops with sim
        rest, _ = sim.communicate(timeout=30)
        assert f"vllm serve pid {new_pid} stopped" in rest, rest
        assert tree_processes(tree) == [], "the relaunched server was left running"
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
        if tree is not None:
            from vllm_console.console.sim import stop

            stop(tree, timeout=2)
