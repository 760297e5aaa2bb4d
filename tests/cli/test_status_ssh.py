"""`vllm-console status HOST --json` through a real OpenSSH sshd, on simulated scenarios.

Each scenario's tree lives under /tmp, owned by the login user, and its fake `vllm serve` runs as
that user (the console only ever sees its own user's processes). The command runs as a user
would run it, in a subprocess, with a hosts file: the exact schema of docs/design.md, the
incident's 1.17 against the healthy ~6.4, a server that failed to start, one still starting, a
host without GPU telemetry, and exit 2 with one line when it cannot run. Every figure is checked
against its source: the serve log's own lines, the process's start time, the tree's paths and
port.
"""

from __future__ import annotations

import ctypes.util
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.sshd import Sshd, chown_to, free_port, start_as
from vllm_console.console.parsers.startup import StartupPhase
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.tree import SimTree, materialise

pytestmark = pytest.mark.ssh

GPU_KEYS = {"index", "name", "util_pct", "mem_used_mib", "mem_total_mib", "temp_c", "power_w"}
SPEC_KEYS = {"mean_acceptance_length", "draft_acceptance_rate_pct", "per_position",
             "accepted_tokens", "drafted_tokens"}
TOP_KEYS = {"host", "gpus", "gpu_source", "gpu_source_reason", "serve", "engine", "spec_decode",
            "throughput", "errors", "latency", "requests", "servers"}
SERVE_KEYS = {"running", "pid", "cmdline", "health", "state", "phase", "started_at", "uptime_s",
              "log", "url", "engine", "engine_reason", "engines", "container"}
ENGINE_KEYS = {"version", "model", "speculative_config", "aux_layers", "max_model_len",
               "tensor_parallel_size", "data_parallel_size"}
THROUGHPUT_KEYS = {"prompt_tps", "generation_tps", "running", "waiting", "kv_cache_usage_pct",
                   "prefix_cache_hit_rate_pct", "source", "rates_source", "at"}
STATES = {"starting", "ready", "failed", "exited", "down", "unknown", "not-answering"}
ENGINE_STATES = {"ok", "idle", "stalled", "dead", "unknown"}
LATENCY_KEYS = {"ttft_s", "itl_s", "e2e_s", "queue_s", "window_s", "since_start", "source",
                "at"}
FAILING = "upstream-mixed-swa-v1-runner"
STARTING = "starting"  # the healthy scenario, with a start-up that takes ten minutes
SCENARIOS = ("incident", "healthy", FAILING, STARTING)
HAS_NVML = ctypes.util.find_library("nvidia-ml") is not None



def host_entry(sshd: Sshd, name: str, tree: SimTree, log: bool) -> str:
    """A hosts-file table for the scenario; `match` names the tree so that each host sees
    only its own server (and never a colleague's test server). Without `log`, the log is
    found from the running process."""
    return (f'[hosts.{name}]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
            f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
            f'[hosts.{name}.serve]\nmatch = "vllm serve {tree.root}/"\n'
            + (f'log = "{tree.log}"\n' if log else "")
            + f'[hosts.{name}.gpu]\nnvidia_smi = "{tree.nvidia_smi}"\n')


@pytest.fixture(scope="module")
def hosts(sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[Path, dict[str, SimTree]]]:
    if sshd.proc is None:
        sshd.start()
    base = sshd.user_dir("status")
    trees: dict[str, SimTree] = {}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name in SCENARIOS:
            scenario, startup_s = ("healthy", 600.0) if name == STARTING else (name, 0.3)
            tree = materialise(scenario, base / name, port=free_port(), startup_s=startup_s,
                               metrics_interval_s=0.3)
            chown_to(tree.root, sshd.user)
            trees[name] = tree
            LAUNCHED[name] = time.time()
            procs.append(start_as(tree, sshd.user))
        for name, proc in zip(SCENARIOS, procs, strict=True):
            if name == FAILING:
                proc.wait(timeout=30)  # refuses to start, as vLLM does
            elif name == STARTING:
                _wait_for_line(trees[name].log, "LLM engine (", 30)
            else:
                assert wait_ready(trees[name], proc, timeout=30)
        time.sleep(1.0)  # a few SpecDecoding intervals
        config = tmp_path_factory.mktemp("status") / "hosts.toml"
        # The server that died can only be read through a configured log.
        entries = [host_entry(sshd, name, tree, name == FAILING) for name, tree in trees.items()]
        # The healthy server again, with a GPU tool that is not there.
        entries.append(host_entry(sshd, "nogpu", trees["healthy"], False).replace(
            f'nvidia_smi = "{trees["healthy"].nvidia_smi}"', 'nvidia_smi = "/nonexistent/smi"'))
        # And with a log that is not there: only the process, /health and /metrics speak.
        entries.append(host_entry(sshd, "nolog", trees["healthy"], True).replace(
            f'log = "{trees["healthy"].log}"', 'log = "/nonexistent/serve.log"'))
        config.write_text("".join(entries))
        yield config, trees
    finally:
        for proc in procs:
            stop(proc, timeout=3)


LAUNCHED: dict[str, float] = {}
"""When each scenario's server was launched (this machine's clock, which is the host's)."""


def _wait_for_line(log: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in {log}"
        time.sleep(0.1)


_FIGURES = {"prompt_tps": r"Avg prompt throughput: ([\d.]+) tokens/s",
            "generation_tps": r"Avg generation throughput: ([\d.]+) tokens/s",
            "running": r"Running: (\d+) reqs", "waiting": r"Waiting: (\d+) reqs",
            "kv_cache_usage_pct": r"GPU KV cache usage: ([\d.]+)%",
            "prefix_cache_hit_rate_pct": r"Prefix cache hit rate: ([\d.]+)%"}


def throughput_lines(log: Path) -> list[dict[str, float]]:
    """The figures of every `Engine 000: Avg prompt throughput ...` line of the log, in order,
    read with plain regexes (not the console's parser)."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if "Avg prompt throughput:" not in line:
            continue
        figures = {}
        for key, pattern in _FIGURES.items():
            m = re.search(pattern, line)
            if m is not None:
                figures[key] = float(m[1])
        out.append(figures)
    return out


def epoch(iso: str) -> float:
    """`2026-12-03T05:41:01Z` as seconds since the epoch (jq's `fromdateiso8601` form)."""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", iso), iso
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def status(config: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_console", "status", *args, "--config",
                           str(config)], capture_output=True, text=True, timeout=timeout)


def status_json(config: Path, name: str) -> dict:
    """`status NAME --json`: it ran (exit 0), and its object has docs/design.md's schema."""
    result = status(config, name, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    check_schema(data)
    return data  # type: ignore[no-any-return]


def check_schema(data: dict) -> None:
    assert set(data) == TOP_KEYS
    assert set(data["serve"]) == SERVE_KEYS
    assert set(data["engine"]) == ENGINE_KEYS
    assert set(data["throughput"]) == THROUGHPUT_KEYS
    assert data["throughput"]["source"] in ("log", "metrics", None)
    assert data["throughput"]["rates_source"] in ("log", None)
    assert data["serve"]["state"] in STATES
    assert data["serve"]["container"] is None  # the simulated servers are bare processes
    assert data["serve"]["engine"] in ENGINE_STATES
    assert data["serve"]["engine_reason"]
    assert set(data["latency"]) == LATENCY_KEYS
    assert set(data["requests"]) == {"preemptions_total", "finished", "errors_total"}
    for gpu in data["gpus"]:
        assert set(gpu) == GPU_KEYS
    assert data["gpu_source"] in ("nvml", "nvidia-smi", "none")
    assert (data["gpu_source_reason"] is None) == (data["gpu_source"] != "none")
    for error in data["errors"]:
        assert set(error) == {"kind", "line"}
    kinds = [error["kind"] for error in data["errors"]]
    assert len(kinds) == len(set(kinds))  # each kind once, with its first line
    if data["engine"]["speculative_config"] is not None:
        assert set(data["engine"]["speculative_config"]) == {"method", "model",
                                                             "num_spec_tokens"}
    if data["spec_decode"] is not None:
        assert set(data["spec_decode"]) == SPEC_KEYS


@pytest.mark.parametrize(("name", "low", "high"), [("incident", 1.0, 1.5),
                                                   ("healthy", 5.0, 7.5)])
def test_status_json_on_a_running_scenario(hosts, name: str, low: float, high: float) -> None:
    config, trees = hosts
    tree = trees[name]
    data = status_json(config, name)
    assert data["host"] == name
    if not HAS_NVML:
        assert data["gpu_source"] == "nvidia-smi"
        assert [g["name"] for g in data["gpus"]] == ["NVIDIA H200"]
        assert data["gpus"][0]["mem_used_mib"] > 0  # the EngineCore holds memory
    serve = data["serve"]
    assert serve["running"] is True
    assert serve["health"] == "healthy"
    assert str(tree.target) in serve["cmdline"]
    assert "--speculative-config" in serve["cmdline"]
    assert data["engine"]["model"] == str(tree.target)
    assert data["engine"]["version"]
    assert data["engine"]["speculative_config"] == {"method": "dflash", "model": str(tree.draft),
                                                    "num_spec_tokens": 15}
    spec = data["spec_decode"]
    assert low <= spec["mean_acceptance_length"] <= high
    assert len(spec["per_position"]) == 15
    assert spec["drafted_tokens"] > 0
    # The grown schema: a server that is up, since when, what it follows and where it answers.
    assert serve["state"] == "ready"
    assert serve["phase"] is None
    assert serve["log"] == str(tree.log)  # found from the running process, not configured
    assert serve["url"] == f"http://127.0.0.1:{tree.port}"
    started = epoch(serve["started_at"])
    assert LAUNCHED[name] - 2 <= started <= time.time()
    assert 0 <= serve["uptime_s"] <= time.time() - LAUNCHED[name] + 2
    assert abs(serve["uptime_s"] - (time.time() - started)) < 5
    engine = data["engine"]
    target_layer_ids = json.loads((tree.draft / "config.json").read_text())[
        "dflash_config"]["target_layer_ids"]
    assert engine["aux_layers"] == [i + 1 for i in target_layer_ids]  # the #40727 offset ran
    assert engine["max_model_len"] == 262144  # the engine line's max_seq_len
    assert engine["tensor_parallel_size"] == 1
    assert engine["data_parallel_size"] == 1
    throughput = data["throughput"]
    # One source per figure (issue 40: `running 4` beside `6 running`): the gauges from the
    # /metrics scrape the engine's state was judged from, the rates from the newest stat line
    # when status read the log (the server has written a few since).
    assert (throughput["source"], throughput["rates_source"]) == ("metrics", "log")
    rates = ("prompt_tps", "generation_tps", "prefix_cache_hit_rate_pct")
    assert {key: throughput[key] for key in rates} in [
        {key: line[key] for key in rates} for line in throughput_lines(tree.log)[-30:]]
    assert data["errors"] == []
    # Serving: the simulated engine keeps requests in flight and tokens coming; status watched
    # it for the latency window and saw the requests that finished meanwhile.
    assert serve["engine"] == "ok", serve["engine_reason"]
    assert serve["engine_reason"].startswith(
        f"{throughput['running']} running, {throughput['waiting']} waiting"), (
        serve["engine_reason"], throughput)
    latency = data["latency"]
    assert latency["source"] == "metrics"
    assert latency["window_s"] >= 2
    assert 0 < latency["ttft_s"]["p50"] <= latency["ttft_s"]["p99"] < 5
    assert latency["e2e_s"]["p50"] > latency["ttft_s"]["p50"]
    assert data["requests"]["finished"]["stop"] > 0
    assert data["requests"]["errors_total"] == 0
    if name == "incident":
        human = status(config, name)
        assert human.returncode == 0
        assert "spec    acceptance length 1." in human.stdout
        assert f"healthy at http://127.0.0.1:{tree.port}" in human.stdout
        text = human.stdout
        assert "state   ready, up " in text
        assert f"max model len 262144, TP 1, DP 1, aux layers {tuple(engine['aux_layers'])}" \
            in text
        load = re.search(r"load    running (\d+), waiting \d+, KV cache [\d.]+% \(from "
                         r"/metrics\); prompt [\d.]+ tokens/s, generation [\d.]+ tokens/s, "
                         r"prefix cache hit [\d.]+% \(from the log\)", text)
        assert load is not None, text
        assert "errors  none in the current run" in text
        # One figure, said once: the serving line's count is the load line's.
        assert re.search(rf"serving ok: {load[1]} running", text), text
        assert re.search(r"latency TTFT p50 [\d.]+ s, p99 [\d.]+ s", text), text


def test_status_of_a_server_that_failed_to_start(hosts) -> None:
    config, trees = hosts
    data = status_json(config, FAILING)
    serve = data["serve"]
    assert {key: serve[key] for key in ("running", "pid", "cmdline", "health")} == {
        "running": False, "pid": None, "cmdline": None, "health": "down"}
    assert data["spec_decode"] is None
    assert data["engine"]["speculative_config"]["method"] == "dflash"  # from its log
    # It failed (a fatal line), which is more than "exited": the kinds say why.
    assert serve["state"] == "failed"
    assert serve["phase"] is None
    assert serve["uptime_s"] is None  # nothing is up
    assert serve["log"] == str(trees[FAILING].log)
    assert LAUNCHED[FAILING] - 2 <= epoch(serve["started_at"]) <= time.time()
    errors = {error["kind"]: error["line"] for error in data["errors"]}
    # 0.33 on the V1 runner: the engine config refuses the drafter in the API server, before
    # any engine starts (as real vLLM 0.32 does): no engine line, no engine failure.
    assert "Model Runner V1 does not support: mixed sliding/full dflash drafts" in \
        errors["dflash-needs-v2-runner"]
    assert "engine-failed" not in errors
    engine = data["engine"]
    assert engine["aux_layers"] is None  # it died before the drafter said which layers
    assert engine["max_model_len"] is None  # no engine line: not known
    assert engine["tensor_parallel_size"] is None
    assert data["throughput"] == dict.fromkeys(THROUGHPUT_KEYS)  # not known: null
    human = status(config, FAILING).stdout
    assert "V1 does not support" in human  # why it exited
    assert "state   failed" in human
    assert "error   dflash-needs-v2-runner: Value error, Model Runner V1 does not support" \
        in human
    assert "load    unknown (no stat line in the log, no /metrics)" in human


def test_status_of_a_server_still_starting(hosts) -> None:
    config, trees = hosts
    data = status_json(config, STARTING)
    serve = data["serve"]
    assert serve["running"] is True
    assert serve["health"] == "starting"
    assert serve["state"] == "starting"
    assert serve["phase"] in {p.value for p in StartupPhase} - {"ready"}
    assert 0 <= serve["uptime_s"] <= time.time() - LAUNCHED[STARTING] + 2
    assert data["throughput"]["source"] is None
    assert data["spec_decode"] is None
    assert data["engine"]["aux_layers"] is None  # the drafter is not loaded yet
    human = status(config, STARTING).stdout
    assert f"state   starting ({serve['phase']}), up " in human


@pytest.mark.skipif(HAS_NVML, reason="NVML answers here, whatever nvidia-smi is")
def test_status_says_why_there_are_no_gpu_figures(hosts) -> None:
    config, _ = hosts
    data = status_json(config, "nogpu")
    assert data["gpu_source"] == "none"
    assert data["gpus"] == []
    assert "/nonexistent/smi" in data["gpu_source_reason"]
    assert data["serve"]["state"] == "ready"  # the server is still there
    human = status(config, "nogpu").stdout
    assert f"no GPU telemetry: {data['gpu_source_reason']}" in human


def test_status_that_cannot_run_exits_2_with_one_line(hosts, tmp_path: Path) -> None:
    config, _ = hosts
    unreachable = tmp_path / "hosts.toml"
    unreachable.write_text(config.read_text().replace(f":{_port_of(config)}\"",
                                                      f":{free_port()}\""))
    result = status(unreachable, "incident", "--json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "cannot connect" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.toml"
    bad.write_text('[hosts.x]\nssh = "h"\nbogus = 1\n')
    result = status(bad, "x")
    assert result.returncode == 2
    assert "unknown key" in result.stderr
    assert "Traceback" not in result.stderr


def _port_of(config: Path) -> str:
    line = next(x for x in config.read_text().splitlines() if x.startswith("ssh = "))
    return line.rsplit(":", 1)[1].strip('"')


def test_status_without_the_log_says_the_load_comes_from_metrics(hosts) -> None:
    config, trees = hosts
    tree = trees["healthy"]
    data = status_json(config, "nolog")
    serve = data["serve"]
    assert serve["log"] == "/nonexistent/serve.log"
    assert serve["state"] == "ready", serve  # /health answers, though no log line says so
    assert 0 <= serve["uptime_s"] <= time.time() - LAUNCHED["healthy"] + 2
    throughput = data["throughput"]
    assert throughput["source"] == "metrics"
    assert throughput["prompt_tps"] is None  # a rate needs two scrapes: not known, not guessed
    assert throughput["generation_tps"] is None
    assert isinstance(throughput["running"], int)
    assert 0 <= throughput["kv_cache_usage_pct"] <= 100
    assert data["engine"]["max_model_len"] is None  # only the log says it
    assert data["engine"]["aux_layers"] is None
    assert data["errors"] == []
    human = status(config, "nolog").stdout
    assert "load    prompt ?, generation ?, running " in human
    assert "(from /metrics)" in human
    assert str(tree.root) in serve["cmdline"]
