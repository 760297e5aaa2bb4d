"""`vllm-console restart HOST --debug` over a real OpenSSH sshd against the simulated host: the
same debug restart as the TUI's `D`. It says the debugging switches as an environment diff,
relaunches with them (the new server's environment has them, its log DEBUG lines), and a plain
`restart` after it takes them out again, showing that too; a switch the person set themselves
stays."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_vllm.support import cli
from tests.sshd import Sshd, chown_to, free_port, start_as
from vllm_console.console.sim import SimTree, materialise, stop, wait_ready

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(300)]
MARKER = "[vllm-console] restart at "


@pytest.fixture
def served(sshd: Sshd) -> Iterator[tuple[SimTree, Path]]:
    root = sshd.user_dir("debug-restart")
    tree = materialise("healthy", root / "host", port=free_port(), startup_s=0.3,
                       metrics_interval_s=1.0)
    chown_to(root, sshd.user)
    proc = start_as(tree, sshd.user)
    try:
        assert wait_ready(tree, proc, 30)
        hosts = sshd.hosts_file(root / "hosts.toml", "box", tree.root, tree.nvidia_smi)
        yield tree, hosts
    finally:
        stop(tree, timeout=2.0)
        proc.wait()


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def serve_pid(tree: SimTree) -> int:
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "serve" in cmd and str(tree.target) in cmd:
            return int(proc.pid)
    raise AssertionError("no server")


def test_debug_restart_then_a_plain_one_takes_the_switches_out(
        served: tuple[SimTree, Path]) -> None:
    tree, hosts = served
    done = cli("restart", "box", "--config", str(hosts), "--debug", "--yes", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "restarting on box with the debug switches:" in out
    assert "- env: VLLM_LOGGING_LEVEL unset" in out
    assert "+ env: VLLM_LOGGING_LEVEL=DEBUG" in out
    assert "+ env: NCCL_DEBUG=INFO" in out
    assert "+ env: CUDA_LAUNCH_BLOCKING=1" in out  # the simulated host has GPUs
    env = environ(serve_pid(tree))
    assert env["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert env["NCCL_DEBUG"] == "INFO"

    done = cli("restart", "box", "--config", str(hosts), "--yes", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "restarting on box without the debug switches:" in out
    assert "- env: VLLM_LOGGING_LEVEL=DEBUG" in out
    assert "+ env: VLLM_LOGGING_LEVEL unset" in out
    env = environ(serve_pid(tree))
    assert "VLLM_LOGGING_LEVEL" not in env
    assert "NCCL_DEBUG" not in env
    runs = tree.log.read_text(errors="replace").split(MARKER)
    assert len(runs) == 3  # the first run, the debug run, the plain run
    assert " DEBUG " in runs[1]  # the debug run logged at DEBUG (its engine's exit line)
    assert " DEBUG " not in runs[2]

    # Nothing left to take out: a plain restart is plain and says no diff.
    done = cli("restart", "box", "--config", str(hosts), "--yes", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "debug switches" not in done.stdout
    assert "env:" not in done.stdout
