"""`vllm-console HOST` in a real terminal, over a real OpenSSH sshd, on a simulated serving
host launched as the login user: the way a person uses it, hosts file and all."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.fault_support import helpers_on_host
from tests.sshd import Sshd, chown_to, free_port, start_as
from tests.tmux import Terminal, app_env
from vllm_console.console.sim import stop
from vllm_console.console.sim.tree import materialise

pytestmark = [pytest.mark.ssh, pytest.mark.tmux]

ROOT = Path(__file__).resolve().parents[2]


def test_console_over_ssh_in_a_real_terminal(sshd: Sshd, tmp_path: Path) -> None:
    if sshd.proc is None:
        sshd.start()
    tree = materialise("incident", sshd.user_dir("tui") / "incident", port=free_port(),
                       startup_s=0.5, metrics_interval_s=0.3)
    chown_to(tree.root, sshd.user)
    server = start_as(tree, sshd.user)
    # Only `ssh`, the key and the match: python, log, draft and url are discovered.
    hosts = sshd.hosts_file(tmp_path / "hosts.toml", "gpu1", tree.root, tree.nvidia_smi)
    env = app_env()
    env.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path / "state"))
    term = Terminal([sys.executable, "-m", "vllm_console", "--config", str(hosts), "gpu1"],
                    env=env).start()
    try:
        screen = term.wait_for(lambda s: "ROOT CAUSE" in s and "acceptance length 1." in s,
                               timeout=45)
        assert "gpu1" in screen.splitlines()[0]
        assert "connected" in screen.splitlines()[0]
        assert "GPU0" in screen
        assert "mask_token_id" in screen
        assert "SpecDecoding metrics" in screen
        assert helpers_on_host(tree.root, sshd.user), "no agent or follower found on the host"
        assert term.quit(timeout=10)
        # Nothing of the console is left on the host: only the serve tree runs as the user.
        deadline = time.monotonic() + 5
        while helpers_on_host(tree.root, sshd.user) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert helpers_on_host(tree.root, sshd.user) == []
    finally:
        term.stop()
        stop(server)
        stop(tree)
