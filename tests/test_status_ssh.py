"""`vllm-console status HOST --json` through a real OpenSSH sshd, on simulated scenarios.

Each scenario's tree lives under /tmp, owned by the login user, and its fake `vllm serve` runs as
that user (the console only ever sees its own user's processes). The command runs as a user
would run it, in a subprocess, with a hosts file: the exact DESIGN.md schema, the incident's 1.17
against the healthy ~6.4, a server that failed to start, and exit 2 with one line when it cannot
run.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.sim.runner import stop, wait_ready
from console.sim.tree import SimTree, materialise
from tests.sshd import Sshd, chown_to, free_port

pytestmark = pytest.mark.ssh

GPU_KEYS = {"index", "name", "util_pct", "mem_used_mib", "mem_total_mib", "temp_c", "power_w"}
SPEC_KEYS = {"mean_acceptance_length", "draft_acceptance_rate_pct", "per_position",
             "accepted_tokens", "drafted_tokens"}
FAILING = "upstream-mixed-swa-v1-runner"
SCENARIOS = ("incident", "healthy", FAILING)
HAS_NVML = ctypes.util.find_library("nvidia-ml") is not None


def start_as(tree: SimTree, user: str) -> subprocess.Popen[bytes]:
    """Launch the tree's `vllm serve` as `user`, output to its log, as an operator would."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.path.expanduser(f"~{user}"),
           "LANG": "C.UTF-8", **tree.serve_env()}
    tree.log.parent.mkdir(parents=True, exist_ok=True)
    tree.log.touch()
    chown_to(tree.log.parent, user)
    kwargs: dict[str, object] = {}
    if os.geteuid() == 0:
        kwargs = {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}
    with open(tree.log, "ab") as log:
        return subprocess.Popen(tree.serve_argv(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tree.root, env=env,
                                start_new_session=True, **kwargs)  # type: ignore[call-overload]


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
            tree = materialise(name, base / name, port=free_port(), startup_s=0.3,
                               metrics_interval_s=0.3)
            chown_to(tree.root, sshd.user)
            trees[name] = tree
            procs.append(start_as(tree, sshd.user))
        for name, proc in zip(SCENARIOS, procs, strict=True):
            if name == FAILING:
                proc.wait(timeout=30)  # refuses to start, as vLLM does
            else:
                assert wait_ready(trees[name], proc, timeout=30)
        time.sleep(1.0)  # a few SpecDecoding intervals
        config = tmp_path_factory.mktemp("status") / "hosts.toml"
        # The server that died can only be read through a configured log.
        config.write_text("".join(host_entry(sshd, name, tree, name == FAILING)
                                  for name, tree in trees.items()))
        yield config, trees
    finally:
        for proc in procs:
            stop(proc, timeout=3)


def status(config: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "status", *args, "--config",
                           str(config)], capture_output=True, text=True, timeout=timeout)


def check_schema(data: dict) -> None:
    assert set(data) == {"host", "gpus", "gpu_source", "serve", "engine", "spec_decode"}
    assert set(data["serve"]) == {"running", "pid", "cmdline", "health"}
    assert set(data["engine"]) == {"version", "model", "speculative_config"}
    for gpu in data["gpus"]:
        assert set(gpu) == GPU_KEYS
    assert data["gpu_source"] in ("nvml", "nvidia-smi", "none")
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
    result = status(config, name, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    check_schema(data)
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
    if name == "incident":
        human = status(config, name)
        assert human.returncode == 0
        assert "spec    acceptance length 1." in human.stdout
        assert f"healthy at http://127.0.0.1:{tree.port}" in human.stdout


def test_status_of_a_server_that_failed_to_start(hosts) -> None:
    config, trees = hosts
    result = status(config, FAILING, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    check_schema(data)
    assert data["serve"] == {"running": False, "pid": None, "cmdline": None, "health": "down"}
    assert data["spec_decode"] is None
    assert data["engine"]["speculative_config"]["method"] == "dflash"  # from its log
    human = status(config, FAILING).stdout
    assert "V2 model runner" in human  # why it exited


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
