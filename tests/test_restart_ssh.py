"""Restart over a real OpenSSH sshd on loopback, against the simulated serving host.

The server is launched by the login user over SSH (as a person would), so the console may stop
it; decoys (a look-alike of the same user, one of another user) must survive every restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from console.restart import (
    Outcome,
    RestartOptions,
    RestartResult,
    RestartStep,
    Stage,
    plan_restart,
    restart,
)
from console.settings import HostConfig
from console.sim import SimTree, materialise, stop, wait_ready
from console.ssh_host import SSHHost
from tests.sshd import Sshd, chown_to, free_port

pytestmark = pytest.mark.ssh

FAST = RestartOptions(term_timeout_s=5, kill_timeout_s=5, free_timeout_s=10,
                      startup_timeout_s=30, link_timeout_s=30)
MARKER = "[vllm-console] restart at "
# Makes every forked child of the server (the EngineCore) ignore SIGTERM, as a wedged engine
# would: the restart must SIGKILL it after the timeout.
IGNORE_TERM_SITECUSTOMIZE = """\
import os, signal

def _engine_ignores_term():
    real = signal.signal
    def guarded(sig, handler):
        return real(sig, signal.SIG_IGN if sig == signal.SIGTERM else handler)
    signal.signal = guarded
    real(signal.SIGTERM, signal.SIG_IGN)

os.register_at_fork(after_in_child=_engine_ignores_term)
"""


@dataclass
class Served:
    """A simulated host tree whose server runs as the login user."""

    tree: SimTree
    pid: int
    config: HostConfig

    def tree_pids(self) -> list[psutil.Process]:
        proc = psutil.Process(self.pid)
        return [proc, *proc.children(recursive=True)]

    def log_text(self) -> str:
        return self.tree.log.read_text(errors="replace")


@dataclass
class Lab:
    """Starts simulated servers and decoys; stops every process it started."""

    sshd: Sshd
    host: SSHHost
    trees: list[SimTree] = field(default_factory=list)
    others: list[subprocess.Popen[bytes]] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)

    async def serve(self, scenario: str = "incident", *, startup_s: float = 0.5,
                    env: dict[str, str] | None = None) -> Served:
        root = self.sshd.user_dir(f"restart-{scenario}")
        tree = materialise(scenario, root, port=free_port(), startup_s=startup_s,
                           metrics_interval_s=1.0)
        chown_to(root, self.sshd.user)
        self.trees.append(tree)
        pid = await self.host.start_detached(tree.serve_argv(), log=str(tree.log),
                                             cwd=str(tree.root),
                                             env={**tree.serve_env(), **(env or {})})
        assert await asyncio.to_thread(wait_ready, tree, None, 20), self_log(tree)
        config = self.sshd.host_config(
            serve={"match": f"serve {tree.target}"},
            gpu={"nvidia_smi": str(tree.nvidia_smi)})
        return Served(tree, pid, config)

    async def same_user_decoy(self, tree: SimTree) -> int:
        """A look-alike command line, same user, no EngineCore: never to be touched."""
        pid = await self.host.start_detached(
            ["/usr/bin/python3", "-c", "import time; time.sleep(600)", "vllm", "serve",
             str(tree.target)], log="/dev/null")
        self.pids.append(pid)
        return pid

    def other_user_decoy(self, tree: SimTree) -> int:
        """The same look-alike, run as another user (nobody)."""
        proc = subprocess.Popen(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
             "/usr/bin/python3", "-c", "import time; time.sleep(600)", "vllm", "serve",
             str(tree.target)], start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.others.append(proc)
        return proc.pid

    def cleanup(self) -> None:
        for tree in self.trees:
            stop(tree, timeout=1.0)
            shutil.rmtree(tree.root, ignore_errors=True)
        for directory in self.dirs:
            shutil.rmtree(directory, ignore_errors=True)
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in self.others:
            proc.kill()
            proc.wait()


def self_log(tree: SimTree) -> str:
    try:
        return tree.log.read_text(errors="replace")[-3000:]
    except OSError:
        return "(no log)"


@pytest.fixture
async def lab(sshd: Sshd) -> AsyncIterator[Lab]:
    if sshd.proc is None:
        sshd.start()
    host = SSHHost(sshd.host_config(), keepalive_interval=1.0, keepalive_count_max=3)
    await host.connect()
    the_lab = Lab(sshd, host)
    try:
        yield the_lab
    finally:
        the_lab.cleanup()
        await host.close()
        if sshd.proc is None:
            sshd.start()


def gone(procs: list[psutil.Process]) -> bool:
    return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def assert_came_up(result: RestartResult, served: Served) -> psutil.Process:
    assert result.outcome is Outcome.READY, (result.reason, result.error_lines, result.steps)
    assert result.new_pid
    assert result.new_pid != served.pid
    new = psutil.Process(result.new_pid)
    assert new.username() == served.config.username
    assert any(c.name().startswith("VLLM::EngineCor") for c in new.children()), "no EngineCore"
    stages = [s.stage for s in result.steps]
    for stage in (Stage.LOCKED, Stage.STOPPED, Stage.PORT_FREE, Stage.LAUNCHED, Stage.READY,
                  Stage.VERIFIED):
        assert stage in stages, stages
    return new


async def test_restart_replaces_the_whole_tree_and_spares_look_alikes(lab: Lab) -> None:
    served = await lab.serve("incident")
    old = served.tree_pids()
    assert any(p.name().startswith("VLLM::EngineCor") for p in old)
    mine = await lab.same_user_decoy(served.tree)
    theirs = lab.other_user_decoy(served.tree)
    log_before = served.log_text()
    # Discovery sees two matching processes of the login user (the decoy's words match too):
    # the one with the engine goes.
    config = served.config
    plan = await plan_restart(lab.host, config)
    assert plan.pid == served.pid
    assert any(f"left alone: {mine}" in note for note in plan.notes), plan.notes
    assert {pid for pid, _s, _n in plan.members} == {p.pid for p in old}
    assert plan.command.startswith(str(served.tree.python))
    assert plan.log == str(served.tree.log)
    steps: list[RestartStep] = []
    result = await restart(lab.host, config, plan=plan, on_progress=steps.append, options=FAST)
    assert_came_up(result, served)
    assert steps == list(result.steps)
    assert gone(old), "a member of the old tree survived"
    assert psutil.pid_exists(mine)
    assert psutil.Process(mine).status() != psutil.STATUS_ZOMBIE
    assert psutil.pid_exists(theirs)
    assert [s for s in result.steps if s.stage is Stage.GPU_RELEASED]
    # The log goes on: old content intact, one marker, the new start after it.
    log = served.log_text()
    assert log.startswith(log_before)
    added = log[len(log_before):]
    assert added.count(MARKER) == 1
    after = added[added.index(MARKER):]
    assert after.splitlines()[0] == result.marker
    assert result.marker.endswith("trace=off")
    assert "Application startup complete." in after
    phases = [p.phase.value for p in result.phases]
    assert phases[0] == "engine-start"
    assert phases[-1] == "ready"
    assert result.stop_s is not None
    assert result.startup_s is not None


async def test_an_engine_ignoring_sigterm_is_killed_after_the_timeout(lab: Lab) -> None:
    hook = lab.sshd.user_dir("ignore-term")
    lab.dirs.append(hook)
    (hook / "sitecustomize.py").write_text(IGNORE_TERM_SITECUSTOMIZE)
    chown_to(hook, lab.sshd.user)
    served = await lab.serve("healthy", env={"PYTHONPATH": str(hook)})
    engine = next(p for p in served.tree_pids() if p.name().startswith("VLLM::EngineCor"))
    options = FAST.model_copy(update={"term_timeout_s": 1.0})
    t0 = time.monotonic()
    result = await restart(lab.host, served.config, options=options)
    assert_came_up(result, served)
    killed = [s for s in result.steps if s.stage is Stage.KILL_SENT]
    assert killed, result.steps
    assert str(engine.pid) in killed[0].message
    assert gone([engine])
    assert time.monotonic() - t0 < 15


async def test_link_cut_mid_restart_the_server_still_comes_up(lab: Lab) -> None:
    served = await lab.serve("incident", startup_s=2.0)
    old = served.tree_pids()
    cut = asyncio.Event()

    def on_progress(step: RestartStep) -> None:
        if step.stage is Stage.TERM_SENT and not cut.is_set():
            cut.set()
            lab.sshd.kill()  # listener and every session: the laptop's link is gone

    task = asyncio.create_task(restart(lab.host, served.config, on_progress=on_progress,
                                       options=FAST))
    await asyncio.wait_for(cut.wait(), 15)
    # Nobody is connected now: the host finishes on its own.
    assert await asyncio.to_thread(wait_ready, served.tree, None, 20), self_log(served.tree)
    assert gone(old)
    assert not task.done()
    lab.sshd.start()
    result = await asyncio.wait_for(task, 40)
    assert_came_up(result, served)
    stages = [s.stage for s in result.steps]
    assert Stage.LINK_LOST in stages
    assert Stage.LINK_BACK in stages
    assert served.log_text().count(MARKER) == 1


async def test_two_restarts_at_once_one_runs_one_is_told_why_not(lab: Lab) -> None:
    served = await lab.serve("incident", startup_s=1.5)
    second = SSHHost(lab.sshd.host_config())  # a second console
    try:
        plan = await plan_restart(lab.host, served.config)
        results = await asyncio.gather(
            restart(lab.host, served.config, plan=plan, options=FAST),
            restart(second, served.config, plan=plan, options=FAST))
    finally:
        await second.close()
    outcomes = sorted(r.outcome.value for r in results)
    assert outcomes == ["ready", "refused"], [(r.outcome, r.reason) for r in results]
    refused = next(r for r in results if r.outcome is Outcome.REFUSED)
    assert "another restart is running" in refused.reason
    assert "pid " in refused.reason
    assert refused.exit_status == 2
    assert served.log_text().count(MARKER) == 1


async def test_a_server_that_fails_to_start_reports_its_error_lines(lab: Lab) -> None:
    served = await lab.serve("incident")
    # vLLM upgraded under the running server: the new build refuses the mixed drafter on the
    # V1 runner, and serve exits 1.
    materialise("upstream-mixed-swa-v1-runner", served.tree.root, port=served.tree.port,
                startup_s=0.5)
    chown_to(served.tree.root, lab.sshd.user)
    result = await restart(lab.host, served.config, options=FAST)
    assert result.outcome is Outcome.FAILED, (result.reason, result.steps)
    assert result.exit_status == 1
    assert "exited with status 1" in result.reason
    text = "\n".join(result.error_lines)
    assert "VLLM_USE_V2_MODEL_RUNNER=1" in text
    assert "Engine core initialization failed" in text
    # Nothing runs now; the next restart starts the last launch again (and fails again).
    again = await restart(lab.host, served.config, options=FAST)
    assert again.outcome is Outcome.FAILED
    assert again.old_pid is None


@pytest.mark.parametrize(("scenario", "verdict"), [("incident", "fail"), ("healthy", "pass")])
async def test_traced_restart_turns_runtime_activation_into_a_verdict(
        lab: Lab, scenario: str, verdict: str) -> None:
    served = await lab.serve(scenario)
    result = await restart(lab.host, served.config, trace=True, options=FAST)
    new = assert_came_up(result, served)
    log = served.log_text()
    marker_line = log[log.rindex(MARKER):].splitlines()[0]
    assert "trace=on" in marker_line
    after = log[log.rindex(MARKER):]
    calls = [json.loads(line.split("[vllm-console-trace] ", 1)[1])
             for line in after.splitlines() if "[vllm-console-trace] {" in line]
    assert any(c["event"] == "call" and c["fn"].endswith("_get_dflash_layer_types")
               for c in calls), calls
    env = environ(new.pid)
    hook_dir = env["VLLM_CONSOLE_TRACE_HOOK"]
    assert env["PYTHONPATH"] == hook_dir
    assert "/vllm-console/trace-hook-" in hook_dir
    from checks.chain import run_chain

    report = await run_chain(lab.host, served.config.serve)
    runtime = next(link for link in report.links if link.id == "runtime-activation")
    assert runtime.status.value == verdict, (runtime.summary, runtime.evidence)
    # A plain restart drops the hook: the original environment, no hook dirs piling up.
    plain = await restart(lab.host, served.config, options=FAST)
    newer = assert_came_up(plain, Served(served.tree, new.pid, served.config))
    env = environ(newer.pid)
    assert "PYTHONPATH" not in env
    assert not [k for k in env if k.startswith("VLLM_CONSOLE_")]
    assert served.log_text()[served.log_text().rindex(MARKER):].splitlines()[0].endswith(
        "trace=off")


def test_cli_restart_over_ssh(sshd: Sshd, tmp_path: Path) -> None:
    """`vllm-console restart HOST --yes` exits 0 once ready and prints the phases."""
    from console.cli import main

    if sshd.proc is None:
        sshd.start()
    root = sshd.user_dir("restart-cli")
    tree = materialise("incident", root, port=free_port(), startup_s=0.5)
    tree.log.touch()
    chown_to(root, sshd.user)
    with open(tree.log, "ab") as log:
        started = subprocess.Popen(
            ["runuser", "-u", sshd.user, "--", "setsid", *tree.serve_argv()], cwd=tree.root,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_ready(tree, None, 20), self_log(tree)
        args = ["restart", f"{sshd.user}@127.0.0.1:{sshd.port}", "--yes",
                "--identity", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts),
                "--match", f"serve {tree.target}", "--nvidia-smi", str(tree.nvidia_smi)]
        assert main(args) == 0
        assert tree.log.read_text().count(MARKER) == 1
    finally:
        stop(tree, timeout=1.0)
        started.wait()
        shutil.rmtree(root, ignore_errors=True)

