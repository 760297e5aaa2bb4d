"""The simulated `vllm serve`, looked at as a probe would: processes in /proc, HTTP /health and
/metrics, nvidia-smi, and the log lines. Every scenario is started; every process is stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vllm_console.console.sim import (
    SCENARIOS,
    SimTree,
    health,
    materialise,
    run_foreground,
    start_background,
    stop,
    tree_processes,
    wait_ready,
)
from vllm_console.console.sim.configs import draft_config
from vllm_console.console.sim.scenarios import RIGHT_DRAFT

FAST = {"startup_s": 0.5, "metrics_interval_s": 0.3}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PREFIX = re.compile(r"^\((?P<proc>[A-Za-z_0-9]+) pid=(?P<pid>\d+)\) "
                    r"(?:(?P<level>[A-Z]+) \d\d-\d\d \d\d:\d\d:\d\d \[(?P<where>[\w.]+:\d+)\] )?")
SPEC = re.compile(r"SpecDecoding metrics: Mean acceptance length: (?P<mean>[\d.]+), Accepted "
                  r"throughput: [\d.]+ tokens/s, Drafted throughput: [\d.]+ tokens/s, Accepted: "
                  r"(?P<acc>\d+) tokens, Drafted: (?P<drafted>\d+) tokens, Per-position "
                  r"acceptance rate: (?P<pos>[\d., ]+), Avg Draft acceptance rate: "
                  r"(?P<rate>[\d.]+)%")
RUNNING = [n for n, s in SCENARIOS.items() if s.expected.serve_exit is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_lines(tree: SimTree) -> list[str]:
    """Lines split on LF only, as a log follower does: tqdm's CR updates stay in their line,
    and multi-line messages joined with CR LF keep a trailing CR (dropped here)."""
    text = ANSI.sub("", tree.log.read_bytes().decode(errors="replace"))  # keep CRs
    return [line.removesuffix("\r") for line in text.split("\n")]


def spec_lines(tree: SimTree) -> list[dict[str, float]]:
    out = []
    for line in log_lines(tree):
        m = SPEC.search(line)
        if m:
            out.append({"mean": float(m["mean"]), "acc": int(m["acc"]),
                        "drafted": int(m["drafted"]), "rate": float(m["rate"]),
                        "pos": [float(p) for p in m["pos"].split(", ")]})
    return out


def wait_for(predicate: Callable[[], object], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def engine_pids(server_pid: int) -> list[int]:
    """Children of the server renamed the way vLLM names its engine."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            comm = (entry / "comm").read_text().strip()
        except (OSError, IndexError):
            continue
        if int(stat[1]) == server_pid and comm.startswith("VLLM::") and stat[0] != "Z":
            found.append(int(entry.name))
    return found


def smi_used(tree: SimTree) -> int:
    out = subprocess.run([str(tree.nvidia_smi), "--query-gpu=memory.used",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    return int(out.split()[0])


def get(tree: SimTree, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"{tree.url}{path}", timeout=5) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode()


def scrape(tree: SimTree) -> dict[str, float]:
    status, text = get(tree, "/metrics")
    assert status == 200
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


class Launcher:
    """Materialises and starts simulated hosts; stops everything it started."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[tuple[SimTree, subprocess.Popen[bytes]]] = []

    def tree(self, scenario: str, name: str | None = None, **kw: object) -> SimTree:
        options = {**FAST, "port": free_port(), **kw}
        return materialise(scenario, self.base / (name or scenario), **options)  # type: ignore[arg-type]

    def start(self, tree: SimTree, **kw: object) -> subprocess.Popen[bytes]:
        proc = start_background(tree, **kw)  # type: ignore[arg-type]
        self.started.append((tree, proc))
        return proc

    def close(self) -> None:
        for tree, proc in self.started:
            stop(proc, timeout=5)
            stop(tree, timeout=5)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    launch = Launcher(tmp_path)
    yield launch
    launch.close()


@pytest.fixture(scope="module")
def scenario_servers(tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, tuple[SimTree, subprocess.Popen[bytes]]]]:
    """Every scenario started at once, each settled into steady traffic (or exited)."""
    launch = Launcher(tmp_path_factory.mktemp("fleet"))
    try:
        running = {}
        for name in SCENARIOS:
            tree = launch.tree(name)
            running[name] = (tree, launch.start(tree))
        for name, (tree, proc) in running.items():
            if name in RUNNING:
                assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
                wait_for(lambda t=tree: len(spec_lines(t)) >= 5)
            else:
                proc.wait(timeout=30)
        yield running
    finally:
        launch.close()


@pytest.mark.parametrize("name", RUNNING)
def test_scenario_serves_as_its_name_says(scenario_servers: dict, name: str) -> None:
    tree, proc = scenario_servers[name]
    scenario = SCENARIOS[name]
    assert proc.poll() is None
    assert health(tree) == 200
    engines = engine_pids(proc.pid)
    assert len(engines) == 1
    engine = engines[0]
    assert Path(f"/proc/{engine}/comm").read_text() == "VLLM::EngineCor\n"
    # No `_DP0` without data parallel: the comm is cut to 15 bytes, the cmdline is whole.
    assert Path(f"/proc/{engine}/cmdline").read_bytes() == b"VLLM::EngineCore\0"
    server_cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    assert server_cmdline[1:4] == [b"-m", b"vllm.entrypoints.cli.main", b"serve"]
    apps = subprocess.run([str(tree.nvidia_smi), "--query-compute-apps=pid,process_name,"
                           "used_memory", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, check=True).stdout
    pid, pname, used = apps.strip().split(", ")
    assert (int(pid), pname) == (engine, "VLLM::EngineCore")
    assert int(used) > 120000
    assert smi_used(tree) == int(used)

    lines = log_lines(tree)
    assert all(PREFIX.match(line) for line in lines if line.strip()), "unprefixed line"
    text = "\n".join(lines)
    version = scenario.build.version
    assert f"Initializing a V1 LLM engine (v{version}) with config: model='{tree.target}', " \
           f"speculative_config=SpeculativeConfig(method='dflash', model='{tree.draft}', " \
           f"num_spec_tokens=15), tokenizer=" in text
    assert f"(APIServer pid={proc.pid}) INFO:     Application startup complete." in text
    assert f"Starting vLLM server on http://127.0.0.1:{tree.port}" in text
    ids = json.loads((tree.draft / "config.json").read_text())
    ids = ids.get("dflash_config", ids).get("target_layer_ids")
    shift = 1 if scenario.build.offset_fix else 0
    aux = f"auxiliary layers from speculative config: {tuple(i + shift for i in ids)}"
    assert f"(EngineCore pid={engine}) " in text
    assert aux in text

    means = [s["mean"] for s in spec_lines(tree)]
    expected = scenario.expected.acceptance
    assert expected is not None
    assert abs(sum(means[-4:]) / 4 - expected) < 0.2, means
    assert all(abs(m - expected) <= 0.3 for m in means), means
    status, body = get(tree, "/version")
    assert (status, json.loads(body)) == (200, {"version": version})
    models = json.loads(get(tree, "/v1/models")[1])
    assert models["data"][0]["id"] == str(tree.target)


def test_spec_lines_and_metrics_agree(scenario_servers: dict) -> None:
    tree, _ = scenario_servers["healthy"]
    metrics = scrape(tree)
    lines = spec_lines(tree)
    for line in lines:
        drafts = line["drafted"] / 15
        assert line["mean"] == pytest.approx(1 + line["acc"] / drafts, abs=0.006)
        assert line["rate"] == pytest.approx(100 * line["acc"] / line["drafted"], abs=0.06)
        assert sum(line["pos"]) == pytest.approx(line["acc"] / drafts, abs=0.01)
        assert line["pos"] == sorted(line["pos"], reverse=True)
    labels = f'{{engine="0",model_name="{tree.target}"}}'
    accepted = metrics[f"vllm:spec_decode_num_accepted_tokens_total{labels}"]
    drafted = metrics[f"vllm:spec_decode_num_draft_tokens_total{labels}"]
    drafts = metrics[f"vllm:spec_decode_num_drafts_total{labels}"]
    # The scrape saw the counters after some number k of logged windows.
    prefix_sums = [(sum(x["acc"] for x in lines[:k]), sum(x["drafted"] for x in lines[:k]))
                   for k in range(len(lines) + 1)]
    assert (accepted, drafted) in prefix_sums
    assert drafted == drafts * 15
    per_pos = [metrics[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",'
                       f'model_name="{tree.target}",position="{i}"}}'] for i in range(15)]
    assert sum(per_pos) == accepted
    assert 6.1 < 1 + accepted / drafts < 6.7
    assert 0 <= metrics[f"vllm:kv_cache_usage_perc{labels}"] <= 1
    assert metrics[f"vllm:num_requests_running{labels}"] >= 1


def test_upstream_mixed_without_v2_runner_exits_1(scenario_servers: dict) -> None:
    tree, proc = scenario_servers["upstream-mixed-swa-v1-runner"]
    assert proc.returncode == 1
    assert health(tree) is None
    assert smi_used(tree) == 0
    lines = log_lines(tree)
    text = "\n".join(lines)
    # Launched with VLLM_USE_V2_MODEL_RUNNER=0: 0.33's engine config refuses the mixed drafter
    # on the V1 runner in the API server (a pydantic ValidationError), before any engine.
    assert not any("does not yet support" in line for line in lines)  # chosen, not a fallback
    # 0.31+: vLLM's prefix is in its log format only; Python prints the uncaught exception.
    assert ("\npydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
            "  Value error, Model Runner V1 does not support: mixed sliding/full dflash drafts "
            "[type=value_error") in text
    assert "Initializing a V1 LLM engine" not in text
    assert "EngineCore" not in text
    assert "version 0.33.0" in text
    assert "Application startup complete" not in text


@pytest.mark.programs
def test_upstream_with_v2_runner_comes_up_right(launcher: Launcher) -> None:
    tree = launcher.tree("upstream-mixed-swa-v1-runner")
    proc = launcher.start(tree, env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert wait_ready(tree, proc, timeout=30)
    wait_for(lambda: len(spec_lines(tree)) >= 3)
    assert "Using Eagle3 auxiliary layers from config: (2, 17, 32, 47, 62)" in "\n".join(
        log_lines(tree))
    assert abs(spec_lines(tree)[-1]["mean"] - 6.4) < 0.3


@pytest.mark.programs
def test_incident_fixed_config_and_restart_climbs(launcher: Launcher) -> None:
    tree = launcher.tree("incident")
    proc = launcher.start(tree)
    assert health(tree) is None  # the port is bound only once start-up is complete
    assert wait_ready(tree, proc, timeout=30)
    wait_for(lambda: len(spec_lines(tree)) >= 3)
    before = spec_lines(tree)
    assert all(abs(s["mean"] - 1.17) < 0.1 for s in before)
    assert stop(proc)
    assert proc.returncode == 0
    wait_for(lambda: smi_used(tree) == 0)
    (tree.draft / "config.json").write_text(json.dumps(draft_config(RIGHT_DRAFT), indent=2))
    proc = launcher.start(tree)
    assert wait_ready(tree, proc, timeout=30)
    wait_for(lambda: len(spec_lines(tree)) >= len(before) + 3)
    after = spec_lines(tree)[len(before):]
    assert all(abs(s["mean"] - 6.4) < 0.3 for s in after), after
    assert "(2, 17, 32, 47, 62)" in "\n".join(log_lines(tree))


@pytest.mark.programs
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_engine_frees_memory_and_health_turns_503(launcher: Launcher, sig: int) -> None:
    tree = launcher.tree("healthy")
    proc = launcher.start(tree)
    assert wait_ready(tree, proc, timeout=30)
    assert smi_used(tree) > 120000
    (engine,) = engine_pids(proc.pid)
    os.kill(engine, sig)
    wait_for(lambda: health(tree) == 503)
    wait_for(lambda: smi_used(tree) == 0)
    assert proc.poll() is None
    text = "\n".join(log_lines(tree))
    assert "Engine core proc EngineCore died unexpectedly" in text
    assert "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue." in text
    assert stop(proc)
    assert proc.returncode == 0


@pytest.mark.programs
def test_orphaned_engine_keeps_memory_and_blocks_the_next_start(launcher: Launcher) -> None:
    tree = launcher.tree("healthy")
    proc = launcher.start(tree)
    assert wait_ready(tree, proc, timeout=30)
    (engine,) = engine_pids(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)  # the API server only, as a careless restart does
    proc.wait()
    time.sleep(0.5)
    assert Path(f"/proc/{engine}/comm").read_text() == "VLLM::EngineCor\n"
    held = smi_used(tree)
    assert held > 120000
    again = launcher.start(tree)
    assert again.wait(timeout=30) == 1
    assert "Free memory on device cuda:0 (" in tree.log.read_text()
    assert smi_used(tree) == held
    assert engine in tree_processes(tree)
    stop(tree)
    wait_for(lambda: smi_used(tree) == 0)
    assert not tree_processes(tree)


@pytest.mark.programs
def test_sigterm_stops_the_whole_tree_cleanly(launcher: Launcher) -> None:
    tree = launcher.tree("offset-bug")
    proc = launcher.start(tree)
    assert wait_ready(tree, proc, timeout=30)
    (engine,) = engine_pids(proc.pid)
    signalled = stop(proc)
    assert proc.pid in signalled
    assert engine in signalled
    assert proc.returncode == 0
    assert not Path(f"/proc/{engine}").exists() or engine not in tree_processes(tree)
    assert health(tree) is None
    assert smi_used(tree) == 0
    text = "\n".join(log_lines(tree))
    assert "Application shutdown complete." in text
    assert "died unexpectedly" not in text
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", tree.port))


TRACE_HOOK = '''\
import json, os
import vllm.model_executor.models.qwen3_dflash as m
for _name in ("_get_dflash_layer_types", "_resolve_layer_attention"):
    _fn = getattr(m, _name, None)
    if _fn is None:
        continue
    def _wrap(*args, __fn=_fn, __name=_name):
        result = __fn(*args)
        line = json.dumps({"fn": __name, "args": [a for a in args if isinstance(a, int)],
                           "result": result})
        os.write(2, ("[trace] " + line + "\\n").encode())
        return result
    setattr(m, _name, _wrap)
'''


@pytest.mark.programs
@pytest.mark.parametrize(("scenario", "env", "calls"), [
    ("healthy", {}, [["_get_dflash_layer_types",
                      ["sliding_attention"] * 4 + ["full_attention"]]]),
    ("upstream-mixed-swa-v1-runner", {"VLLM_USE_V2_MODEL_RUNNER": "1"},
     [["_resolve_layer_attention", [2048, False]]] * 4
     + [["_resolve_layer_attention", [None, False]]]),
])
def test_a_tracing_hook_sees_the_layer_calls(launcher: Launcher, tmp_path: Path, scenario: str,
                                             env: dict[str, str], calls: list) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(TRACE_HOOK)
    tree = launcher.tree(scenario)
    proc = launcher.start(tree, env={"PYTHONPATH": str(hook), **env})
    assert wait_ready(tree, proc, timeout=30)
    traced = [json.loads(line.split("[trace] ", 1)[1]) for line in log_lines(tree)
              if "[trace] " in line]
    assert [[t["fn"], t["result"]] for t in traced] == calls


@pytest.mark.programs
def test_run_foreground_reports_and_returns_the_exit_status(launcher: Launcher) -> None:
    """Stopped by another hand and not relaunched: it waits a moment for a restart's relaunch
    (it says so), then exits with the server's status."""
    tree = launcher.tree("healthy")
    result: list[int] = []
    with tempfile.TemporaryFile("w+") as out:
        thread = threading.Thread(target=lambda: result.append(
            run_foreground(tree, out=out, relaunch_wait_s=1.0)))
        thread.start()
        try:
            wait_for(lambda: health(tree) == 200, timeout=30)
            wait_for(lambda: "ready:" in (out.seek(0) or out.read()))
        finally:
            stop(tree)
            thread.join(timeout=20)
        out.seek(0)
        printed = out.read()
    assert result == [0]
    assert "waiting up to 1 s for a restart to relaunch it" in printed
    assert str(tree.log) in printed
    assert tree.url in printed
    assert not tree_processes(tree)


@pytest.mark.programs
def test_port_in_use_fails_before_loading(launcher: Launcher) -> None:
    tree = launcher.tree("healthy")
    with socket.socket() as s:
        s.bind(("127.0.0.1", tree.port))
        s.listen()
        proc = launcher.start(tree)
        assert proc.wait(timeout=30) == 1
    text = tree.log.read_text()
    assert "Address already in use" in text
    assert "Initializing a V1 LLM engine" not in text


@pytest.mark.programs
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand the tree to another user")
def test_tree_works_for_another_user_after_chown(launcher: Launcher) -> None:
    base = Path(tempfile.mkdtemp(prefix="sim-other-user-"))
    try:
        os.chmod(base, 0o755)
        tree = materialise("healthy", base / "host", port=free_port(), **FAST)  # type: ignore[arg-type]
        subprocess.run(["chown", "-R", "65534:65534", str(base / "host")], check=True)
        with open(tree.log, "ab") as log:
            proc = subprocess.Popen(tree.serve_argv(), stdout=log, stderr=subprocess.STDOUT,
                                    user=65534, group=65534, start_new_session=True, cwd="/",
                                    env={"PATH": "/usr/bin:/bin", "HOME": "/"})
        launcher.started.append((tree, proc))
        assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
        smi = subprocess.run([str(tree.nvidia_smi), "--query-gpu=memory.used",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, user=65534, group=65534, check=True)
        assert int(smi.stdout) > 120000
        assert Path(f"/proc/{proc.pid}").stat().st_uid == 65534
    finally:
        launcher.close()
        subprocess.run(["rm", "-rf", str(base)], check=False)
