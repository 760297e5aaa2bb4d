"""`make demo-real` in a real terminal: the console on a real `vllm serve` shows a real
acceptance figure (it sent no request before, and the spec pane stayed "no drafts seen yet"),
and closing the terminal leaves nothing running (a hang-up ended the demo where it stood, and
the real server ran on)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.real_vllm.demo import MARK
from tests.real_vllm.fixture import RealVllm
from tests.tmux import Terminal, app_env

pytestmark = [pytest.mark.real_vllm, pytest.mark.tmux, pytest.mark.timeout(600)]


def demo_processes(under: Path) -> list[int]:
    """Processes the demo started (its mark names its directory, made under `under`)."""
    needle = f"{MARK}={under}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(v.startswith(needle) for v in (entry / "environ").read_bytes().split(b"\0")):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_demo_real_drives_traffic_so_acceptance_shows(real_vllm: RealVllm,
                                                      tmp_path: Path) -> None:
    env = app_env()
    env["TMPDIR"] = str(tmp_path)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    terminal = Terminal([sys.executable, "-m", "tests.real_vllm", "demo"], width=120,
                        height=36, env=env).start()
    try:
        terminal.wait_for("vllm-console", timeout=120)
        assert demo_processes(tmp_path), "the demo's server did not start"
        screen = terminal.wait_for(lambda s: "acceptance length" in s, timeout=420)
        assert "no drafts seen yet" not in screen
    finally:
        terminal.stop()  # the terminal closed: the server must stop all the same
    deadline = time.monotonic() + 30
    while demo_processes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert demo_processes(tmp_path) == []
