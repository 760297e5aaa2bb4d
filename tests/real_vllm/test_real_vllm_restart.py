"""Restart and the activation trace on a real `vllm serve` tree, through the real sshd.

One server (a DFlash drafter whose layers all slide: the SWA layout real vLLM 0.32 builds on
the CPU's V1 model runner), restarted in turn as a user would with `vllm-console restart`:

1. traced: the hook wraps real vLLM's `_resolve_layer_attention` inside the real EngineCore
   and Worker processes, and runtime-activation turns from unknown into pass from their events;
   traced with a profile whose watched function this vLLM lacks, it stays unknown;
2. plain, by SIGTERM: the whole real tree (API server, resource tracker, EngineCore, Worker)
   gone, the port free, the server relaunched detached and followed through its real start;
3. after a SIGKILL of the API server: the EngineCore, Worker and resource tracker it orphans
   to pid 1 are found and stopped, the port freed, the server relaunched;
4. into a layout the real engine refuses (sliding then full attention: vLLM 0.32 builds it on
   its V2 model runner only, which needs Triton, so never on the CPU): exit 1 with the real
   error lines, and the chain names the refusal from the real log.

The module's tests run in this order and share the server (each start costs ~40-70 s here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.real_vllm.fixture import RealServer, RealVllm, dflash_spec, fixture_processes
from tests.real_vllm.support import cli, cli_json, hosts_file, server
from tests.sshd import Sshd, chown_to
from vllm_console import checks
from vllm_console.console.hostside.vocabulary import RESTART_MARKER
from vllm_console.console.parsers.errors import ErrorKind
from vllm_console.console.telemetry.run_log import RunLog

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(900)]

RESTART_TIMEOUT = 600
# What real vLLM 0.32 says (its engine config, in the API server, before any engine starts):
# the CPU build has no Triton, so it always runs the V1 model runner, which refuses the layout.
REFUSAL = "Model Runner V1 does not support: mixed sliding/full dflash drafts"


@dataclass
class Lab:
    fixture: RealVllm
    sshd: Sshd
    server: RealServer
    hosts: Path
    drafter: Path

    def serve_pids(self) -> list[int]:
        """The login user's `vllm serve` API servers listening on our port."""
        found = []
        for pid in fixture_processes(self.fixture, self.sshd.user):
            try:
                proc = psutil.Process(pid)
                argv = proc.cmdline()
            except psutil.Error:
                continue
            if "serve" in argv and str(self.server.port) in argv:
                found.append(pid)
        return found

    def tree(self, pid: int) -> list[psutil.Process]:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]

    def restart(self, *args: str) -> Any:
        return cli("restart", "lab", "--config", str(self.hosts), "--yes", *args,
                   timeout=RESTART_TIMEOUT)

    def check(self) -> dict[str, Any]:
        _, report = cli_json("check", "lab", "--config", str(self.hosts), timeout=300)
        return {link["id"]: link for link in report["links"]} | {"_report": report}


@pytest.fixture(scope="module")
def lab(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Lab]:
    if sshd.proc is None:
        sshd.start()
    home = sshd.user_dir("real-restart-models")
    drafter = home / "dflash"
    shutil.copytree(real_vllm.drafter("dflash-right"), drafter)
    chown_to(home, sshd.user)
    srv = server(real_vllm, sshd, "restart", dflash_spec(drafter))
    hosts = hosts_file(tmp_path_factory.mktemp("real-restart") / "hosts.toml", sshd,
                       {"lab": srv}, reference=real_vllm.reference)
    try:
        srv.start()
        srv.wait_ready()
        yield Lab(real_vllm, sshd, srv, hosts, drafter)
    finally:
        srv.stop()
        shutil.rmtree(home, ignore_errors=True)


def _new_server(lab: Lab, old: set[int]) -> int:
    pids = [p for p in lab.serve_pids() if p not in old]
    assert len(pids) == 1, f"expected one new server, found {pids}"
    return pids[0]


def test_a_traced_restart_proves_the_sliding_layers_were_built(lab: Lab) -> None:
    before = lab.check()
    assert before["runtime-activation"]["status"] == "unknown"
    old = {p.pid for p in lab.tree(lab.server.pid or 0)}
    done = lab.restart("--trace")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ready" in done.stdout
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                   for p in old), "the old tree is gone"
    new = _new_server(lab, old)
    assert lab.server.health() == 200
    log = lab.server.log.read_text(errors="replace")
    calls = [json.loads(m) for m in re.findall(r"\[vllm-console-trace\] (\{.*\})", log)]
    called = [c for c in calls if c.get("event") == "call"]
    assert called, "the hook saw no call of a watched function in the real processes"
    # The calls came from the engine's own processes, not the API server.
    assert {c["pid"] for c in called} - {new}
    assert all(c["fn"].endswith("_resolve_layer_attention") for c in called)
    assert all(c["result"] == [64, True] for c in called), called  # (window, causal)
    after = lab.check()
    runtime = after["runtime-activation"]
    assert runtime["status"] == "pass", runtime
    assert after["config-correct"]["status"] == "pass", after["config-correct"]


def test_a_traced_restart_that_hooks_nothing_proves_nothing(lab: Lab, tmp_path: Path) -> None:
    """A profile written for another vLLM (the PR #40898 branch's `_get_dflash_layer_types`,
    absent from upstream 0.32): the traced run hooks nothing, and runtime activation is
    unknown, naming the missing function, where, and the vLLM version, not fail."""
    shipped = Path(checks.__file__).parent / "profiles" / "dflash-swa.toml"
    text = shipped.read_text().replace('"../reference_configs/',
                                       f'"{shipped.parent.parent}/reference_configs/')
    watch = re.search(r"^watch = \[.*?\]", text, re.S | re.M)
    assert watch is not None
    profile = tmp_path / "pr-branch-only.toml"
    profile.write_text(text.replace(watch.group(0), 'watch = [\n    "vllm.model_executor.'
                                    'models.qwen3_dflash:_get_dflash_layer_types",\n]'))
    done = lab.restart("--trace", "--profile", str(profile))
    assert done.returncode == 0, done.stdout + done.stderr
    _, report = cli_json("check", "lab", "--config", str(lab.hosts), "--profile", str(profile),
                         timeout=300)
    runtime = {link["id"]: link for link in report["links"]}["runtime-activation"]
    assert runtime["status"] == "unknown", runtime
    assert "_get_dflash_layer_types" in runtime["summary"]
    assert "0.32.0" in runtime["summary"]
    assert report["root_cause"] != "runtime-activation"


def test_a_plain_restart_stops_the_whole_real_tree_and_relaunches(lab: Lab) -> None:
    (api,) = lab.serve_pids()
    tree = lab.tree(api)
    names = {p.name() for p in tree}
    assert {"VLLM::EngineCore", "VLLM::Worker"} <= names
    assert any("resource_tracker" in " ".join(p.cmdline()) for p in tree[1:])
    started = time.monotonic()
    done = lab.restart()
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    for proc in tree:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, proc
    new = _new_server(lab, {api})
    # Detached: not a child of the SSH session, in a session of its own.
    assert os.getsid(new) == new or psutil.Process(new).ppid() == 1
    assert lab.server.health() == 200
    for phase in ("stopping", "ready"):
        assert phase in done.stdout, done.stdout
    # The trace was for one run only: a plain restart drops the hook.
    env = psutil.Process(new).environ()
    assert "VLLM_CONSOLE_TRACE_HOOK" not in env
    # The old run said it was asked to stop before its engine went: a console watching it
    # reads a shutdown there, never a dead engine (issue 40).
    old_run = lab.server.log.read_text(errors="replace").rpartition(RESTART_MARKER)[0]
    log = RunLog()
    log.feed_texts(old_run.splitlines())
    assert log.info.stopping is not None, old_run[-3000:]
    assert not any(e.kind is ErrorKind.ENGINE_DEAD for e in log.info.errors), log.info.errors
    print(f"real restart, SIGTERM path: {took:.1f} s to ready\n{done.stdout}")


def test_orphans_of_a_killed_api_server_are_found_stopped_and_replaced(lab: Lab) -> None:
    (api,) = lab.serve_pids()
    children = lab.tree(api)[1:]
    os.kill(api, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.pid_exists(api) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    orphans = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert orphans, "SIGKILL to the API server leaves its engine running (docs/real-vllm.md)"
    # The API server's children are re-parented to pid 1; the Worker stays the EngineCore's.
    alive = {p.pid for p in orphans}
    assert all(p.ppid() == 1 or p.ppid() in alive for p in orphans)
    assert any(p.name() == "VLLM::EngineCore" and p.ppid() == 1 for p in orphans)
    done = lab.restart()
    assert done.returncode == 0, done.stdout + done.stderr
    for proc in orphans:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, \
            f"{proc} {proc.cmdline()} left running:\n{done.stdout}"
    _new_server(lab, {api})
    assert lab.server.health() == 200


def test_a_relaunch_the_real_engine_refuses_exits_1_with_its_error(lab: Lab) -> None:
    config = json.loads((lab.drafter / "config.json").read_text())
    config["layer_types"] = ["sliding_attention", "full_attention"]
    (lab.drafter / "config.json").write_text(json.dumps(config, indent=2))
    (api,) = lab.serve_pids()
    done = lab.restart()
    assert done.returncode == 1, done.stdout + done.stderr
    assert REFUSAL in done.stdout + done.stderr
    assert lab.serve_pids() == []
    links = lab.check()
    runtime = links["runtime-activation"]
    assert runtime["status"] == "fail", runtime
    assert REFUSAL in runtime["summary"] + json.dumps(runtime["evidence"])
    assert "VLLM_USE_V2_MODEL_RUNNER=1" in runtime["hint"]
    # The layout differs from the reference (every layer sliding): the config is the cause.
    assert "layer_types" in links["config-correct"]["summary"]
    assert links["_report"]["root_cause"] == "config-correct"
