"""`vllm-console fleet` in a real terminal: Enter on a row that maps to a hosts-file entry
with `ssh` opens the full console over a real OpenSSH sshd, and `q` comes back to the table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.prometheus import Job, running_prometheus
from tests.sshd import Sshd, chown_to, free_port, start_as
from tests.tmux import Terminal, app_env
from vllm_console.console.sim import stop
from vllm_console.console.sim.tree import materialise

pytestmark = [pytest.mark.ssh, pytest.mark.tmux, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[2]


def test_enter_opens_the_ssh_console_and_q_comes_back(sshd: Sshd, tmp_path: Path) -> None:
    if sshd.proc is None:
        sshd.start()
    tree = materialise("incident", sshd.user_dir("fleet") / "incident", port=free_port(),
                       startup_s=0.5, metrics_interval_s=0.3)
    chown_to(tree.root, sshd.user)
    server = start_as(tree, sshd.user)
    target = f"127.0.0.1:{tree.port}"
    term = None
    try:
        with running_prometheus([Job("vllm", [target])]) as prom:
            prom.wait_for("rate(vllm:spec_decode_num_drafts_total[1m]) > 0",
                          lambda v: len(v) == 1)
            hosts = tmp_path / "hosts.toml"
            # The row `127.0.0.1:PORT` maps to gpu1 by its ssh host (the only entry on it).
            hosts.write_text(
                f'[fleet]\nprometheus = "{prom.url}"\n'
                f'[hosts.gpu1]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
                f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                f'[hosts.gpu1.serve]\nmatch = "{tree.root}/venv serve"\n'
                f'[hosts.gpu1.gpu]\nnvidia_smi = "{tree.nvidia_smi}"\n')
            env = app_env()
            env.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path / "state"))
            term = Terminal([sys.executable, "-m", "vllm_console", "fleet", "--config", str(hosts)],
                            width=200, env=env).start()
            screen = term.wait_for(lambda s: "1/1 servers" in s and "LOW (expect ~6.4)" in s,
                                   timeout=30)
            assert "gpu1" in screen  # the hosts-file column
            term.keys("Enter")
            screen = term.wait_for(lambda s: "ROOT CAUSE" in s and "GPU0" in s, timeout=60)
            assert "connected" in screen.splitlines()[0]
            assert "URL only" not in screen
            term.keys("q")
            term.wait_for("1/1 servers", timeout=30)
            term.keys("q")
            term.wait_for(lambda s: not term.alive(), timeout=10)
    finally:
        if term is not None:
            term.stop()
        stop(server)
        stop(tree)
