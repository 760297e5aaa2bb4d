"""The host agent script, run as the host would run it: `/usr/bin/python3`, stdlib only.

GPU source fallbacks (NVML through pynvml -> the simulated host's fake nvidia-smi -> none, each
with its reason), the serve tree from /proc (top-most match, descendants with their kernel names,
never another user's process), and how it ends (stdin closed, SIGTERM: no nvidia-smi left).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostside.bundle import bundle_path, entry_argv
from vllm_console.console.hostclient.agent.samples import AgentSample, ServeTree
from vllm_console.console.hostside.gpu import smi
from vllm_console.console.sim.tree import SimTree, materialise

PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
NO_NVML = ["--nvml-lib", "libnvidia-ml-missing-for-test.so"]

FAKE_PYNVML = '''
from types import SimpleNamespace as NS
MIB = 1024 * 1024
NVML_TEMPERATURE_GPU = 0
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return b"NVIDIA H200"
def nvmlDeviceGetUUID(h): return "GPU-%d" % h
def nvmlDeviceGetUtilizationRates(h): return NS(gpu=50 + h, memory=10)
def nvmlDeviceGetMemoryInfo(h): return NS(total=143771 * MIB, used=(h + 1) * 1024 * MIB, free=0)
def nvmlDeviceGetTemperature(h, sensor): return 40 + h
def nvmlDeviceGetPowerUsage(h): raise RuntimeError("Not Supported")
def nvmlDeviceGetComputeRunningProcesses(h):
    return [NS(pid=4242, usedGpuMemory=512 * MIB)] if h == 0 else []
'''


def agent_lines(*args: str, env: dict[str, str] | None = None, timeout: float = 30
                ) -> list[dict]:
    out = subprocess.run(entry_argv(PYTHON, "agent", *args), capture_output=True, timeout=timeout,
                         env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert lines, out.stderr.decode()
    return lines


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> SimTree:
    """A simulated host tree, for its fake nvidia-smi (nothing is started)."""
    return materialise("incident", tmp_path_factory.mktemp("agent-sim"), gpus=2)


def test_nvidia_smi_rows_with_missing_values() -> None:
    row = smi.parse_gpu_row(
        "3, GPU-ab, NVIDIA H200, [N/A], 100, 143771, 41, [Not Supported]")
    assert row == {"index": 3, "uuid": "GPU-ab", "name": "NVIDIA H200", "util_pct": None,
                   "mem_used_mib": 100.0, "mem_total_mib": 143771.0, "temp_c": 41.0,
                   "power_w": None}
    assert smi.parse_gpu_row("No devices were found") is None
    assert smi.parse_gpu_row("0, GPU-x, H200, nan, inf, 1, 2, 3")["util_pct"] is None
    assert smi.parse_app_row("77, 1024, GPU-ab") == {"pid": 77, "used_mib": 1024.0,
                                                            "gpu_uuid": "GPU-ab"}
    assert smi.parse_app_row("No running processes found") is None


@pytest.mark.programs
def test_nvml_through_pynvml_when_importable(tmp_path: Path) -> None:
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    hello, sample = agent_lines("--once", env={"PYTHONPATH": str(tmp_path)})
    assert hello["t"] == "hello"
    assert hello["gpu_source"] == "nvml"
    assert hello["gpu_detail"] == "pynvml"
    parsed = AgentSample.from_json(sample, time.time())
    assert [g.index for g in parsed.gpus] == [0, 1]
    assert parsed.gpus[0].name == "NVIDIA H200"
    assert parsed.gpus[1].mem_used_mib == 2048.0
    assert parsed.gpus[0].power_w is None  # not supported: unknown, never 0
    assert [(p.pid, p.gpu, p.used_mib) for p in parsed.gpu_procs] == [(4242, 0, 512.0)]


# nvidia-ml-py as it answers on a real H200 (driver 580.159.04, measured with 20 GiB held):
# the first memory call counts the driver's reservation (615 MiB) as used, the v2 call that
# nvidia-smi reads does not (nvidia-smi: 21363 MiB used; NVML v1: 21977.9 MiB).
REAL_H200_PYNVML = FAKE_PYNVML.replace(
    "def nvmlDeviceGetMemoryInfo(h): return NS(total=143771 * MIB, used=(h + 1) * 1024 * MIB, "
    "free=0)", """
nvmlMemory_v2 = 0x02000028
RESERVED = 615 * MIB
def nvmlDeviceGetMemoryInfo(h, version=None):
    used = 21363 * MIB
    if version is None:
        return NS(total=143771 * MIB, used=used + RESERVED, free=0)
    assert version == nvmlMemory_v2
    return NS(version=version, total=143771 * MIB, reserved=RESERVED, used=used, free=0)
""")


@pytest.mark.programs
@pytest.mark.parametrize("has_v2", [True, False])
def test_nvml_memory_used_is_what_nvidia_smi_says(tmp_path: Path, has_v2: bool) -> None:
    fake = REAL_H200_PYNVML
    if not has_v2:  # an nvidia-ml-py older than the v2 call: the first call's figure
        fake = fake.replace("nvmlMemory_v2 = 0x02000028", "")
    (tmp_path / "pynvml.py").write_text(fake)
    sample = agent_lines("--once", env={"PYTHONPATH": str(tmp_path)})[1]
    gpu = AgentSample.from_json(sample, time.time()).gpus[0]
    assert gpu.mem_total_mib == 143771.0
    assert gpu.mem_used_mib == (21363.0 if has_v2 else 21978.0)


@pytest.mark.programs
def test_nvml_missing_falls_back_to_one_looping_nvidia_smi(sim: SimTree) -> None:
    lines = agent_lines("--interval", "0.2", "--count", "3", "--nvidia-smi",
                        str(sim.nvidia_smi), *NO_NVML)
    hello, samples = lines[0], lines[1:]
    assert hello["gpu_source"] == "nvidia-smi"
    assert "pynvml not importable" in hello["gpu_reason"]
    assert "libnvidia-ml-missing-for-test.so not found" in hello["gpu_reason"]
    assert len(samples) == 3
    for sample in samples:
        parsed = AgentSample.from_json(sample, time.time())
        assert [g.index for g in parsed.gpus] == [0, 1]
        assert parsed.gpus[0].mem_total_mib == 143771.0
        assert parsed.gpus[0].name == "NVIDIA H200"


@pytest.mark.programs
def test_the_first_sample_does_not_wait_for_nvidia_smis_second_reading(sim: SimTree) -> None:
    """nvidia-smi's loop prints every GPU's row and then waits its period. A reading was taken
    as whole only when the next one began, so the first sample (and the console's first GPU
    figures) came a whole period late: with a 30 s period, not before 30 s."""
    lines = agent_lines("--interval", "30", "--count", "1", "--nvidia-smi",
                        str(sim.nvidia_smi), *NO_NVML, timeout=10)
    parsed = AgentSample.from_json(lines[1], time.time())
    assert [g.index for g in parsed.gpus] == [0, 1]


@pytest.mark.programs
def test_a_first_reading_whose_rows_straggle_is_shown_whole(tmp_path: Path) -> None:
    """A first reading is shown once its rows stop coming; a row that comes later still joins
    it, and from the second reading on each is whole, never one GPU alone."""
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        "case \"$1\" in --query-gpu=*) ;; *) sleep 60; exit 0;; esac\n"
        "while true; do\n"
        "  echo '0, GPU-a, NVIDIA H200, 10, 100, 143771, 40, 100'\n"
        "  sleep 0.4\n"
        "  echo '1, GPU-b, NVIDIA H200, 20, 200, 143771, 41, 110'\n"
        "  sleep 0.6\n"
        "done\n")
    script.chmod(0o755)
    source = smi.SmiSource(str(script), 1.0)
    try:
        first, _, _ = source.read()
        assert [g["index"] for g in first] == [0]  # the rows stopped coming: shown at once
        time.sleep(0.6)
        for _ in range(8):
            gpus, _, _ = source.read()
            assert [g["index"] for g in gpus] == [0, 1]
            time.sleep(0.2)
    finally:
        source.close()


@pytest.mark.programs
def test_a_broken_pynvml_falls_back_too(sim: SimTree, tmp_path: Path) -> None:
    (tmp_path / "pynvml.py").write_text("def nvmlInit():\n    raise OSError('no driver')\n")
    hello = agent_lines("--once", "--nvidia-smi", str(sim.nvidia_smi), *NO_NVML,
                        env={"PYTHONPATH": str(tmp_path)})[0]
    assert hello["gpu_source"] == "nvidia-smi"
    assert "nvmlInit failed: no driver" in hello["gpu_reason"]


@pytest.mark.programs
def test_no_gpu_source_says_why(tmp_path: Path) -> None:
    failing = tmp_path / "nvidia-smi"
    failing.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\\''t "
                       "communicate with the NVIDIA driver.'\nexit 9\n")
    failing.chmod(0o755)
    hello, sample = agent_lines("--once", "--nvidia-smi", str(failing), *NO_NVML)
    assert hello["gpu_source"] == sample["gpu_source"] == "none"
    assert "couldn't communicate with the NVIDIA driver" in hello["gpu_reason"]
    assert sample["gpus"] == []
    assert sample["gpu_age_s"] is None
    hello = agent_lines("--once", "--nvidia-smi", str(tmp_path / "absent"), *NO_NVML)[0]
    assert hello["gpu_source"] == "none"
    assert "nvidia-smi not found" in hello["gpu_reason"]
    hello = agent_lines("--once", "--gpu-source", "none")[0]
    assert hello["gpu_reason"] == "GPU telemetry turned off"


ENGINE = ("import ctypes, time\n"
          "ctypes.CDLL(None).prctl(15, b'VLLM::EngineCor', 0, 0, 0)\n"
          "time.sleep(60)\n")
SERVER = ("import subprocess, sys, time\n"
          "code = sys.argv[1]\n"
          "words = sys.argv[2:]\n"
          "child = subprocess.Popen(['VLLM::EngineCore', '-c', code] + words,\n"
          "                         executable=sys.executable)\n"
          "time.sleep(60)\n")


@functools.cache
def _vllm_script() -> Path:
    """A `vllm` console script whose `serve` starts an engine child: a server entry point by
    discovery's rule (a `python -c` line that merely says `vllm serve` is a look-alike)."""
    directory = Path(tempfile.mkdtemp(prefix="vc-agent-vllm-", dir="/tmp"))
    directory.chmod(0o755)
    atexit.register(shutil.rmtree, directory, True)
    script = directory / "vllm"
    script.write_text(f"#!{PYTHON}\nimport subprocess, sys, time\n"
                      f"child = subprocess.Popen(['VLLM::EngineCore', '-c', {ENGINE!r}]\n"
                      "                         + sys.argv[1:], executable=sys.executable)\n"
                      "time.sleep(60)\n")
    script.chmod(0o755)
    return script


def _spawn_server(mark: str, *args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([PYTHON, str(_vllm_script()), "serve", mark, *args],
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            **kwargs)  # type: ignore[call-overload]


def _spawn_lookalike(mark: str) -> subprocess.Popen[bytes]:
    """`python -c ... vllm serve MARK`: its words match, yet it starts no server."""
    return subprocess.Popen([PYTHON, "-c", SERVER, ENGINE, "vllm", "serve", mark],
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def mark() -> Iterator[str]:
    return f"vc-agent-test-{uuid.uuid4().hex[:8]}"


def _tree_after(mark: str, predicate, *, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    serve: dict = {}
    while time.monotonic() < deadline:
        sample = agent_lines("--once", "--gpu-source", "none", "--match",
                             f"vllm serve {mark}")[1]
        serve = sample["serve"]
        if predicate(serve):
            return serve
        time.sleep(0.1)
    pytest.fail(f"serve tree never as expected: {serve}")


@pytest.mark.programs
def test_serve_tree_top_most_match_and_descendants(mark: str) -> None:
    first = _spawn_server(mark)
    try:
        serve = _tree_after(mark, lambda s: len(s["procs"]) == 2)
        # The engine's command line matches too; the top-most match is the server.
        assert serve["root"] == first.pid
        root, engine = serve["procs"]
        assert (root["pid"], root["depth"]) == (first.pid, 0)
        assert engine["ppid"] == first.pid
        assert engine["depth"] == 1
        assert engine["comm"] == "VLLM::EngineCor"
        assert engine["argv"][0] == "VLLM::EngineCore"
        assert root["start_time"] == pytest.approx(time.time(), abs=30)
        assert root["state"] in "RS"
        assert root["cwd"] == os.getcwd()
        second = _spawn_server(mark)
        try:
            serve = _tree_after(mark, lambda s: s["others"] == [second.pid])
            assert serve["root"] == first.pid  # the oldest
        finally:
            _kill(second)
    finally:
        _kill(first)
    serve = _tree_after(mark, lambda s: s["root"] is None)
    assert serve["procs"] == []


@pytest.mark.programs
def test_another_helper_of_the_bundle_is_never_the_serve_process(tmp_path: Path) -> None:
    """A follower run from the same bundle directory matches words taken from its own command
    line (`hostside`, `follow`); it is a console helper all the same, never the server."""
    log = tmp_path / "serve.log"
    log.write_text("x\n")
    follower = subprocess.Popen(entry_argv(PYTHON, "follow", str(log)),
                                stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while b"follow" not in Path(f"/proc/{follower.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the follower never started"
            time.sleep(0.05)
        sample = agent_lines("--once", "--gpu-source", "none", "--match", "hostside follow")[1]
        assert sample["serve"]["root"] is None, sample["serve"]
    finally:
        _kill(follower)


@pytest.mark.programs
def test_a_helper_of_another_bundle_is_never_the_serve_process(tmp_path: Path) -> None:
    """Another console's follower (its bundle in another cache dir) matches `hostside follow`
    too: no command line but a vLLM server's is ever the server (issue 24: a flaky test when a
    second console ran beside the suite)."""
    other = tmp_path / "other-cache" / "hostside.pyz"
    other.parent.mkdir()
    other.write_bytes(bundle_path().read_bytes())
    log = tmp_path / "serve.log"
    log.write_text("x\n")
    follower = subprocess.Popen([PYTHON, str(other), "follow", str(log)],
                                stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while b"follow" not in Path(f"/proc/{follower.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the follower never started"
            time.sleep(0.05)
        sample = agent_lines("--once", "--gpu-source", "none", "--match", "hostside follow")[1]
        assert sample["serve"]["root"] is None, sample["serve"]
    finally:
        _kill(follower)


@pytest.mark.programs
def test_a_look_alike_is_never_the_serve_process(mark: str) -> None:
    lookalike = _spawn_lookalike(mark)
    try:
        time.sleep(0.3)
        serve = agent_lines("--once", "--gpu-source", "none", "--match",
                            f"vllm serve {mark}")[1]["serve"]
        assert serve["root"] is None, serve
    finally:
        _kill(lookalike)


@pytest.mark.programs
def test_the_server_of_another_port_is_never_this_entrys(mark: str) -> None:
    """The agent's live tree follows discovery's port rule: with nothing on the configured
    port, a server started for another port is not this entry's server (issue 24: `status`
    showed another port's server as running)."""
    other = _spawn_server(mark, "--port", "18991")
    try:
        serve = _tree_after(mark, lambda s: s["root"] == other.pid)  # no port configured
        assert serve["root"] == other.pid
        for port, expected in (("18992", None), ("18991", other.pid)):
            serve = agent_lines("--once", "--gpu-source", "none", "--match",
                                f"vllm serve {mark}", "--port", port)[1]["serve"]
            assert serve["root"] == expected, (port, serve)
    finally:
        _kill(other)


@pytest.mark.programs
def test_the_process_listening_on_the_port_is_the_server(mark: str) -> None:
    """With a configured port, the tree that listens on it is the server even when an older
    candidate exists, as discovery says."""
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    older = _spawn_server(mark, "--port", str(port))
    try:
        time.sleep(0.2)
        holder = subprocess.Popen(
            [PYTHON, "-c", "import socket, sys, time, os\n"
             f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen()\n"
             "s.set_inheritable(True)\n"
             "os.execv(sys.argv[1], sys.argv[1:])", PYTHON, str(_vllm_script()), "serve",
             mark, "--port", str(port)],
            stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=())
        try:
            deadline = time.monotonic() + 10
            while True:
                serve = agent_lines("--once", "--gpu-source", "none", "--match",
                                    f"vllm serve {mark}", "--port", str(port))[1]["serve"]
                if serve["root"] == holder.pid or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert serve["root"] == holder.pid, serve
        finally:
            _kill(holder)
    finally:
        _kill(older)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")
def test_another_users_server_is_never_the_serve_process(sshd, mark: str) -> None:
    user = pwd.getpwnam(sshd.user)
    theirs = _spawn_server(mark, user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                           cwd="/tmp")
    try:
        time.sleep(0.5)
        assert Path(f"/proc/{theirs.pid}").stat().st_uid == user.pw_uid
        serve = agent_lines("--once", "--gpu-source", "none", "--match",
                            f"vllm serve {mark}")[1]["serve"]
        assert serve["root"] is None
        assert serve["procs"] == []
    finally:
        _kill(theirs)


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(entry.name))
    return out


def _wait_gone(pids: list[int], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if Path(f"/proc/{p}").exists()
                 and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1][:3]]
        if not alive:
            return
        time.sleep(0.05)
    pytest.fail(f"still running: {alive}")


@pytest.mark.programs
@pytest.mark.parametrize("how", ["stdin-closed", "sigterm"])
def test_agent_ends_and_takes_its_nvidia_smi_with_it(sim: SimTree, how: str) -> None:
    proc = subprocess.Popen([*entry_argv(PYTHON, "agent"), "--interval", "0.2", "--nvidia-smi",
                             str(sim.nvidia_smi), *NO_NVML], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        assert proc.stdin is not None
        assert json.loads(proc.stdout.readline())["gpu_source"] == "nvidia-smi"
        smi = _children(proc.pid)
        assert len(smi) == 2  # one GPU loop, one compute-apps loop: never one per tick
        for _ in range(3):
            assert json.loads(proc.stdout.readline())["t"] == "sample"
        assert sorted(_children(proc.pid)) == sorted(smi)
        if how == "stdin-closed":
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        _wait_gone(smi)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.programs
def test_once_gives_its_sample_even_with_stdin_closed() -> None:
    # As `Host.run` runs it: stdin is a pipe that is closed at once.
    out = subprocess.run(entry_argv(PYTHON, "agent", "--once", "--gpu-source", "none"),
                         input=b"", capture_output=True, timeout=30)
    kinds = [json.loads(line)["t"] for line in out.stdout.splitlines()]
    assert kinds == ["hello", "sample"]


def test_an_engine_core_taking_gpu_memory_changes_the_tree_shape() -> None:
    # nvidia-smi can list the EngineCore a sample after the process appeared: the tree's
    # shape (what raises ServeTreeChanged) must change then, or its GPU memory is never told.
    tree = {"root": 10, "procs": [
        {"pid": 10, "ppid": 1, "depth": 0, "comm": "vllm", "argv": ["vllm", "serve"]},
        {"pid": 11, "ppid": 10, "depth": 1, "comm": "VLLM::EngineCor",
         "argv": ["VLLM::EngineCore"], "state": "S"}]}
    before = ServeTree.from_json(tree, {})
    after = ServeTree.from_json(tree, {11: 20480.0})
    assert before.shape != after.shape
    assert after.gpu_mem_mib == 20480.0
    assert ServeTree.from_json(tree, {11: 20000.0}).shape == after.shape  # amounts alone: no


@pytest.mark.programs
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_the_live_tree_and_discovery_name_the_same_serve_log(mark: str, tmp_path: Path,
                                                             stream: str) -> None:
    """`vllm serve ... 2>serve.log` (stdout a terminal or a pipe) has its log on fd 2.
    Discovery took fd 1, else fd 2; the agent's tree, which telemetry falls back to, took fd 1
    only, and said there was no log (issue 25: one rule for a process's serve log)."""
    from vllm_console.console.hostclient.agent.samples import ServeTree
    from vllm_console.console.hostclient.discovery import serve_from_facts
    from vllm_console.console.hostside import discover
    from vllm_console.console.settings import ServeSettings
    from vllm_console.console.telemetry.host_telemetry import serve_info_from_tree

    log = tmp_path / "serve.log"
    with open(log, "ab") as out:
        where = {stream: out, ("stderr" if stream == "stdout" else "stdout"): subprocess.PIPE}
        proc = _spawn_server(mark, **where)
    try:
        serve = _tree_after(mark, lambda s: s["root"] == proc.pid)
        tree = ServeTree.from_json(serve, {})
        assert serve_info_from_tree(ServeSettings(), tree).log == str(log)
        facts = discover.probe({"match": ["vllm", "serve", mark], "port": None})
        found = serve_from_facts(facts, f"vllm serve {mark}")
        assert found is not None
        assert found.log == str(log)
    finally:
        _kill(proc)
