"""The host side's long-lived helpers, the agent and the log follower, when their console goes
away: stdin reaching EOF (the SSH channel closed), SIGTERM, SIGHUP. Each ends within seconds
with status 0, and leaves nothing behind (the agent's nvidia-smi loops). Run as a host runs
them: the bundle, `/usr/bin/python3`, a pipe as stdin."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostside.bundle import entry_argv
from tests.hostside.test_agent import NO_NVML, PYTHON
from vllm_console.console.sim.tree import SimTree, materialise

ENDS_WITHIN_S = 5.0
HOW = ["stdin-closed", "sigterm", "sighup"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> SimTree:
    """A simulated host tree, for its fake nvidia-smi (nothing is started)."""
    return materialise("incident", tmp_path_factory.mktemp("hostside-sim"), gpus=2)


def children(pid: int) -> list[int]:
    """The live (not zombie) children of `pid`."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.append(pid)
    return left


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The helpers a test starts, killed should one outlive it (the failure under test)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def end(proc: subprocess.Popen[bytes], how: str) -> int:
    """Tell the helper its console went away, `how`; its exit status."""
    assert proc.stdin is not None
    if how == "stdin-closed":
        proc.stdin.close()
    else:
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGHUP)
    try:
        return proc.wait(timeout=ENDS_WITHIN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {ENDS_WITHIN_S:.0f} s after {how}")


def follower(path: Path, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(entry_argv(PYTHON, "follow", str(path), "--start", "begin"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    started.append(proc)
    return proc


@pytest.mark.programs
@pytest.mark.parametrize("how", HOW)
def test_the_follower_of_a_log_ends(tmp_path: Path, how: str,
                                    started: list[subprocess.Popen[bytes]]) -> None:
    log = tmp_path / "serve.log"
    log.write_text("INFO one\n")
    proc = follower(log, started)
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["t"] == "open"
    assert end(proc, how) == 0


@pytest.mark.programs
@pytest.mark.parametrize("how", HOW)
def test_the_follower_waiting_for_a_missing_log_ends(tmp_path: Path, how: str,
                                                     started: list[subprocess.Popen[bytes]]
                                                     ) -> None:
    proc = follower(tmp_path / "not-yet.log", started)
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["t"] == "missing"
    assert end(proc, how) == 0


@pytest.mark.programs
@pytest.mark.parametrize("how", HOW)
def test_the_agent_ends_and_takes_its_nvidia_smi_loops_with_it(
        sim: SimTree, how: str, started: list[subprocess.Popen[bytes]]) -> None:
    proc = subprocess.Popen([*entry_argv(PYTHON, "agent"), "--interval", "0.2", "--nvidia-smi",
                             str(sim.nvidia_smi), *NO_NVML], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    started.append(proc)
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["gpu_source"] == "nvidia-smi"
    assert json.loads(proc.stdout.readline())["t"] == "sample"
    loops = children(proc.pid)
    assert len(loops) == 2, "one GPU loop and one compute-apps loop"
    assert end(proc, how) == 0
    deadline = time.monotonic() + ENDS_WITHIN_S
    while alive(loops) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(loops) == [], "the agent left its nvidia-smi loops running"


@pytest.mark.programs
def test_a_one_shot_follower_reads_to_the_end_with_its_stdin_already_closed(
        tmp_path: Path) -> None:
    """`status` reads the log with `follow --once`, its stdin at EOF from the start (nothing to
    send): that EOF is not a console gone away, and the whole log is read, not cut short."""
    from vllm_console.console.hostclient.follower import FrameDecoder

    log = tmp_path / "serve.log"
    lines = 200_000
    log.write_text("".join(f"INFO line {i}\n" for i in range(lines)))
    done = subprocess.run(entry_argv(PYTHON, "follow", str(log), "--start", "begin", "--once"),
                          input=b"",
                          capture_output=True, timeout=60)
    assert done.returncode == 0
    payload = b"".join(body for _, body in FrameDecoder().feed(done.stdout))
    assert payload.count(b"\n") == lines
    assert payload.endswith(f"INFO line {lines - 1}\n".encode())
