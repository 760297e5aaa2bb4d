"""Restart over a real OpenSSH sshd on loopback, against the simulated serving host.

The server is launched by the login user over SSH (as a person would), so the console may stop
it; decoys (a look-alike of the same user, one of another user) must survive every restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.sshd import Sshd, chown_to, free_port
from vllm_console.console.restart import (
    Outcome,
    RestartError,
    RestartOptions,
    RestartResult,
    RestartStep,
    Stage,
    plan_restart,
    restart,
)
from vllm_console.console.settings import HostConfig
from vllm_console.console.sim import SimTree, materialise, stop, wait_ready
from vllm_console.console.transport.ssh_host import SSHHost

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
    # The decoy's words match too, but it is no server entry point: named, left alone.
    config = served.config
    plan = await plan_restart(lab.host, config)
    assert plan.pid == served.pid
    assert any(note.startswith(f"pid {mine} matches") and note.endswith("left alone")
               for note in plan.notes), plan.notes
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
    # Every phase was logged while nobody followed: its duration is unknown, never 0.00 s.
    assert len(result.phases) >= 2
    assert [p.duration_s for p in result.phases] == [None] * len(result.phases), result.phases


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


async def refused_relaunch(lab: Lab) -> tuple[Served, RestartResult]:
    """A server launched with VLLM_USE_V2_MODEL_RUNNER=0 (the V1 runner), then vLLM upgraded
    under it, and restarted: the new build refuses the mixed drafter on the V1 runner, and
    serve exits 1."""
    served = await lab.serve("incident", env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    materialise("upstream-mixed-swa-v1-runner", served.tree.root, port=served.tree.port,
                startup_s=0.5)
    chown_to(served.tree.root, lab.sshd.user)
    return served, await restart(lab.host, served.config, options=FAST)


async def test_a_server_that_fails_to_start_reports_its_error_lines(lab: Lab) -> None:
    served, result = await refused_relaunch(lab)
    assert result.outcome is Outcome.FAILED, (result.reason, result.steps)
    assert result.exit_status == 1
    assert "exited with status 1" in result.reason
    text = "\n".join(result.error_lines)
    # 0.33's engine config refuses it in the API server, before any engine starts.
    assert "ValidationError: 1 validation error for VllmConfig" in text
    assert "Model Runner V1 does not support: mixed sliding/full dflash drafts" in text
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
    from vllm_console.checks.chain import run_chain

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
    from vllm_console.console.cli.parser import main

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



# -- issue 14: the wrong process, a hang with the server down, a dead server called ready ------
BENCH = "#!/usr/bin/python3\nimport time\ntime.sleep(600)\n"


async def bench_client(lab: Lab, tree: SimTree) -> int:
    """`vllm bench serve --model M --port P`: a client of the server, same user, run by the
    venv's `vllm` script as a person would."""
    script = lab.sshd.user_dir("bench") / "vllm"
    lab.dirs.append(script.parent)
    script.write_text(BENCH)
    script.chmod(0o755)
    chown_to(script.parent, lab.sshd.user)
    pid = await lab.host.start_detached(
        ["/usr/bin/python3", str(script), "bench", "serve", "--model", str(tree.target),
         "--port", str(tree.port)], log="/dev/null")
    lab.pids.append(pid)
    return pid


def kill_tree(pid: int) -> None:
    """SIGKILL a server and its whole tree, as an OOM killer or a careless `kill -9` would."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(procs, timeout=5)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_look_alike_is_never_stopped_for_the_server(lab: Lab) -> None:
    """The server SIGKILLed, a `vllm bench serve` client of it still running: the client was
    taken for the server, stopped and "relaunched". It is named and left alone; the last
    launch starts again beside it."""
    served = await lab.serve("incident")
    first = await restart(lab.host, served.config, options=FAST)  # a last launch on record
    assert_came_up(first, served)
    assert first.new_pid
    kill_tree(first.new_pid)
    client = await bench_client(lab, served.tree)
    plan = await plan_restart(lab.host, served.config)
    assert plan.pid is None
    assert client not in {pid for pid, _s, _n in plan.members}
    assert any(n.startswith(f"pid {client} matches") and "is no vLLM server" in n
               and n.endswith("left alone") for n in plan.notes), plan.notes
    result = await restart(lab.host, served.config, plan=plan, options=FAST)
    assert result.outcome is Outcome.READY, (result.reason, result.steps)
    assert alive(client)
    assert result.new_pid
    assert "vllm.entrypoints.cli.main" in " ".join(psutil.Process(result.new_pid).cmdline())
    assert served.log_text().count(MARKER) == 2


async def test_status_and_check_skip_an_older_look_alike(lab: Lab) -> None:
    """A same-user `python -c sleep ... vllm serve ...` started before the server."""
    from vllm_console.console.hostclient.discovery import discover_serve

    root = lab.sshd.user_dir("early-decoy")
    lab.dirs.append(root)
    tree = materialise("incident", root, port=free_port(), startup_s=0.5)
    chown_to(root, lab.sshd.user)
    lab.trees.append(tree)
    decoy = await lab.same_user_decoy(tree)
    time.sleep(0.05)
    pid = await lab.host.start_detached(tree.serve_argv(), log=str(tree.log),
                                        cwd=str(tree.root), env=tree.serve_env())
    assert await asyncio.to_thread(wait_ready, tree, None, 20), self_log(tree)
    config = lab.sshd.host_config(serve={"match": f"serve {tree.target}"})
    found = await discover_serve(lab.host, config.serve)
    assert found is not None
    assert found.pid == pid
    assert any(n.startswith(f"pid {decoy} matches") for n in found.notes), found.notes


async def test_the_configured_port_chooses_the_server(lab: Lab) -> None:
    """Two servers of one user match `vllm serve`; the entry's url names one. The other (the
    older, which discovery used to take) is never stopped, also once ours is gone."""
    theirs = await lab.serve("healthy")
    ours = await lab.serve("incident")
    config = lab.sshd.host_config(serve={"url": ours.tree.url},
                                  gpu={"nvidia_smi": str(ours.tree.nvidia_smi)})
    kept = theirs.tree_pids()
    plan = await plan_restart(lab.host, config)
    assert plan.pid == ours.pid
    result = await restart(lab.host, config, plan=plan, options=FAST)
    assert_came_up(result, ours)
    assert all(alive(p.pid) for p in kept)
    # Ours is gone now: the other one still matches `vllm serve`, but serves another port.
    assert result.new_pid
    kill_tree(result.new_pid)
    again = await plan_restart(lab.host, config)
    assert again.pid is None
    assert theirs.pid not in {pid for pid, _s, _n in again.members}
    assert any(f"pid {theirs.pid} serves port {theirs.tree.port}" in n for n in again.notes)
    assert all(alive(p.pid) for p in kept)
    # Another entry (no launch on record) is refused, saying what was found instead.
    other_entry = lab.sshd.host_config(
        name="entry-c", serve={"url": ours.tree.url, "match": "serve /tmp/vc-restart-"})
    host_c = SSHHost(other_entry)
    try:
        with pytest.raises(RestartError) as refused:
            await plan_restart(host_c, other_entry)
    finally:
        await host_c.close()
    assert "no earlier launch by the console for this host entry" in str(refused.value)
    assert f"pid {theirs.pid} serves port {theirs.tree.port}, not the configured " \
           f"{ours.tree.port}" in str(refused.value)
    assert all(alive(p.pid) for p in kept)


async def test_a_port_held_by_a_look_alike_is_never_restarted_over(lab: Lab) -> None:
    served = await lab.serve("incident")
    config = lab.sshd.host_config(serve={"url": served.tree.url},
                                  gpu={"nvidia_smi": str(served.tree.nvidia_smi)})
    kill_tree(served.pid)
    # Something that is no vLLM server now listens on the configured port.
    holder = await lab.host.start_detached(
        ["/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1",
         str(served.tree.port)], log="/dev/null", cwd="/tmp")
    lab.pids.append(holder)
    deadline = time.monotonic() + 10
    while not any(c.laddr.port == served.tree.port for c in psutil.Process(holder).net_connections()
                  if c.status == psutil.CONN_LISTEN) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    with pytest.raises(RestartError, match=f"port {served.tree.port} is held by pid {holder}"):
        await plan_restart(lab.host, config)
    assert alive(holder)


async def test_a_last_launch_is_started_again_only_for_its_own_entry(lab: Lab) -> None:
    """Entry A's record must never start for entry B, though A's command matches B's words."""
    a = await lab.serve("incident")
    b = await lab.serve("healthy")
    words = {"match": "serve /tmp/vc-restart-"}  # both servers match
    config_a = lab.sshd.host_config(serve={**words, "url": a.tree.url},
                                    gpu={"nvidia_smi": str(a.tree.nvidia_smi)})
    config_b = lab.sshd.host_config(name="entry-b", serve={**words, "url": b.tree.url},
                                    gpu={"nvidia_smi": str(b.tree.nvidia_smi)})
    host_b = SSHHost(config_b)
    try:
        kill_tree(b.pid)
        first = await restart(lab.host, config_a, options=FAST)
        assert_came_up(first, a)
        assert first.new_pid
        result = await restart(host_b, config_b, options=FAST)
    finally:
        await host_b.close()
    assert result.outcome is Outcome.ERROR, (result.reason, result.steps)
    assert "no earlier launch by the console for this host entry" in result.reason
    assert "'sshd-test'" in result.reason
    assert alive(first.new_pid)
    assert a.log_text().count(MARKER) == 1
    assert MARKER not in b.log_text()


async def test_a_server_run_by_a_shell_loop_is_left_to_the_loop(lab: Lab) -> None:
    root = lab.sshd.user_dir("loop")
    tree = materialise("healthy", root, port=free_port(), startup_s=0.5)
    chown_to(root, lab.sshd.user)
    lab.trees.append(tree)
    loop = f"while true; do {shlex.join(tree.serve_argv())}; sleep 1; done"
    shell = await lab.host.start_detached(["bash", "-c", loop], log=str(tree.log),
                                          cwd=str(tree.root))
    lab.pids.append(shell)
    assert await asyncio.to_thread(wait_ready, tree, None, 20), self_log(tree)
    server = psutil.Process(shell).children()[0].pid
    config = lab.sshd.host_config(serve={"url": tree.url})
    result = await restart(lab.host, config, options=FAST)
    assert result.outcome is Outcome.ERROR
    assert f"the server pid {server} is supervised" in result.reason
    assert "shell loop" in result.reason
    assert "restarting belongs to it" in result.reason
    assert alive(server)
    assert MARKER not in tree.log.read_text()
    os.killpg(shell, signal.SIGKILL)


async def test_a_fifo_log_never_hangs_the_restart(lab: Lab) -> None:
    """The server writes into a FIFO that `cat >> real.log` drains; the reader exits with the
    old server. The relaunch writes to a regular file instead, and says where."""
    root = lab.sshd.user_dir("fifo")
    tree = materialise("incident", root, port=free_port(), startup_s=0.5)
    fifo = root / "serve.fifo"
    os.mkfifo(fifo)
    chown_to(root, lab.sshd.user)
    lab.trees.append(tree)
    reader = await lab.host.start_detached(["sh", "-c", f"cat < {fifo} >> {tree.log}"],
                                           log="/dev/null")
    lab.pids.append(reader)
    pid = await lab.host.start_detached(tree.serve_argv(), log=str(fifo), cwd=str(tree.root),
                                        env=tree.serve_env())
    assert await asyncio.to_thread(wait_ready, tree, None, 20), self_log(tree)
    config = lab.sshd.host_config(serve={"url": tree.url, "log": str(fifo),
                                         "match": f"serve {tree.target}"},
                                  gpu={"nvidia_smi": str(tree.nvidia_smi)})
    plan = await plan_restart(lab.host, config)
    assert plan.log != str(fifo)
    assert any(f"the log {fifo} is a FIFO" in n and plan.log in n for n in plan.notes)
    result = await asyncio.wait_for(restart(lab.host, config, plan=plan, options=FAST), 60)
    assert_came_up(result, Served(tree, pid, config))
    assert result.log == plan.log


async def test_an_orphaned_engine_is_named_and_stopped_before_the_relaunch(lab: Lab) -> None:
    """The API server SIGKILLed: its EngineCore keeps running (holding GPU memory, as a real
    one does). Discovery names it; the restart stops it with the same identity checks before
    it starts the last launch again, and leaves another directory's orphan alone."""
    from vllm_console.console.hostclient.discovery import resolve_serve

    served = await lab.serve("incident")
    first = await restart(lab.host, served.config, options=FAST)
    api = assert_came_up(first, served)
    engine = next(c for c in api.children() if c.name().startswith("VLLM::EngineCor"))
    api.kill()
    api.wait(5)
    await asyncio.sleep(0.3)
    assert alive(engine.pid)
    found = await resolve_serve(lab.host, served.config.serve)
    assert found.process is None
    assert any(n.startswith(f"orphaned engine pid {engine.pid}") for n in found.notes), \
        found.notes
    plan = await plan_restart(lab.host, served.config)
    assert engine.pid in {pid for pid, _s, _n in plan.members}
    assert f"VLLM::EngineCor {engine.pid}" in plan.describe()
    result = await restart(lab.host, served.config, plan=plan, options=FAST)
    assert result.outcome is Outcome.READY, (result.reason, result.steps)
    assert not alive(engine.pid)
    assert any("orphaned engine" in n and "stopped too" in n for n in result.notes)


async def test_two_servers_and_no_url_refuse_naming_each_port(lab: Lab) -> None:
    a = await lab.serve("incident")
    b = await lab.serve("healthy")
    config = lab.sshd.host_config(serve={"match": "serve /tmp/vc-restart-"})
    with pytest.raises(RestartError) as refused:
        await plan_restart(lab.host, config)
    message = str(refused.value)
    assert f"pid {a.pid} (port {a.tree.port})" in message
    assert f"pid {b.pid} (port {b.tree.port})" in message
    assert "nothing was stopped; choose one with --port N (or serve.port" in message
    assert alive(a.pid)
    assert alive(b.pid)


async def test_a_plan_confirmed_after_another_console_restarted_is_refused(lab: Lab) -> None:
    """The dialog stayed open while another console restarted the server: the plan's tree is
    gone, and the server now on the port is not the plan's. Nothing is stopped or started."""
    served = await lab.serve("incident")
    stale = await plan_restart(lab.host, served.config)
    other = await restart(lab.host, served.config, options=FAST)  # the other console
    assert_came_up(other, served)
    assert other.new_pid
    result = await restart(lab.host, served.config, plan=stale, options=FAST)
    assert result.outcome is Outcome.ERROR, (result.reason, result.steps)
    assert result.reason.startswith(f"nothing was stopped: port {served.tree.port} is held by "
                                    f"pid {other.new_pid}")
    assert alive(other.new_pid)
    assert served.log_text().count(MARKER) == 1


IMPOSTOR = """\
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
"""


async def test_status_never_calls_a_non_server_on_the_port_healthy(lab: Lab) -> None:
    """The server is gone and something that is no vLLM server answers /health with 200 on
    the configured port: status says who holds the port and does not call it healthy."""
    from vllm_console.console.telemetry.oneshot import collect_status
    from vllm_console.console.telemetry.server import Health

    served = await lab.serve("incident")
    config = lab.sshd.host_config(serve={"url": served.tree.url,
                                         "match": f"serve {served.tree.target}"},
                                  gpu={"nvidia_smi": str(served.tree.nvidia_smi)})
    kill_tree(served.pid)
    impostor = await lab.host.start_detached(
        ["/usr/bin/python3", "-c", IMPOSTOR, str(served.tree.port)], log="/dev/null")
    lab.pids.append(impostor)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
            c.laddr.port == served.tree.port and c.status == psutil.CONN_LISTEN
            for c in psutil.Process(impostor).net_connections()):
        await asyncio.sleep(0.05)
    snapshot = await collect_status(lab.host, config)
    assert snapshot.readiness.health is not Health.HEALTHY, snapshot.readiness
    assert f"pid {impostor}" in snapshot.readiness.detail
    assert any(f"port {served.tree.port} is held by pid {impostor}" in n
               for n in snapshot.notes), snapshot.notes


async def test_a_stale_configured_log_is_warned_of_and_the_pane_sees_the_restart(
        lab: Lab) -> None:
    """hosts.toml names an old log; the server writes elsewhere. The log pane followed the
    configured file while the restart appended to the server's real one: the pane never
    showed the restart. One rule now (the configured log, warned of): `status`, `check`, the
    TUI's telemetry and the restart agree on the file, and each says it is not the one the
    server was writing to."""
    from vllm_console.checks.chain import run_chain
    from vllm_console.console.telemetry import HostTelemetry, LogLinesReceived, ServeWarning
    from vllm_console.console.telemetry.host_telemetry import TelemetryOptions
    from vllm_console.console.telemetry.oneshot import collect_status

    served = await lab.serve("incident")
    stale = served.tree.root / "old-setup.log"
    stale.write_text("INFO an old run's line\n")
    chown_to(stale, lab.sshd.user)
    config = lab.sshd.host_config(
        serve={"match": f"serve {served.tree.target}", "log": str(stale)},
        gpu={"nvidia_smi": str(served.tree.nvidia_smi)})
    warning = (f"warning: configured log {stale} is not what pid {served.pid} uses (it writes "
               f"its output to {served.tree.log})")
    snapshot = await collect_status(lab.host, config)
    assert any(n.startswith(warning) for n in snapshot.notes), snapshot.notes
    report = await run_chain(lab.host, config.serve)
    assert any(w.startswith(warning) for w in report.warnings), report.warnings

    telemetry = HostTelemetry(lab.host, config, TelemetryOptions(
        interval_s=0.5, health_interval_s=0.3, metrics_interval_s=1.0))
    events: list[object] = []
    task = asyncio.create_task(telemetry.run(events.append))
    try:
        async with asyncio.timeout(20):
            while not any(isinstance(e, ServeWarning) for e in events):
                await asyncio.sleep(0.1)
        said = [e.text for e in events if isinstance(e, ServeWarning)]
        assert any(t.startswith(warning) for t in said), said
        plan = await plan_restart(lab.host, config)
        assert plan.log == telemetry.snapshot.serve.log == str(stale)
        assert any(n.startswith(warning) for n in plan.notes), plan.notes
        result = await restart(lab.host, config, plan=plan, options=FAST)
        assert_came_up(result, served)
        # What the log pane receives: the restart's marker and the new run's start-up.
        async with asyncio.timeout(20):
            while not any(MARKER in text for e in events if isinstance(e, LogLinesReceived)
                          for text in e.batch.texts):
                await asyncio.sleep(0.1)
    finally:
        telemetry.stop()
        await task
    assert MARKER in stale.read_text()
    assert MARKER not in served.log_text()


async def test_after_the_server_exited_a_restart_relaunches_with_the_edited_env(
        lab: Lab) -> None:
    """The `upstream-mixed-swa-v1-runner` dead end: the server runs with
    VLLM_USE_V2_MODEL_RUNNER=0, vLLM is upgraded under it, the restart's relaunch is refused
    by the engine config and exits 1. Its hint: relaunch with the variable at 1. The last
    launch is planned again with that edit, shown as a diff, and the server comes up; the
    restart after that keeps the variable."""
    from vllm_console.console.restart.edit import edit_plan, parse_env

    served, failed = await refused_relaunch(lab)
    assert failed.outcome is Outcome.FAILED, (failed.reason, failed.steps)
    plan = await plan_restart(lab.host, served.config)
    assert plan.pid is None
    assert plan.original_env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    edited = edit_plan(plan, env=parse_env("VLLM_USE_V2_MODEL_RUNNER=1"),
                       match=served.config.serve.match)
    shown = edited.describe()
    assert "- env: VLLM_USE_V2_MODEL_RUNNER=0\n+ env: VLLM_USE_V2_MODEL_RUNNER=1" in shown
    result = await restart(lab.host, served.config, plan=edited, options=FAST)
    new = assert_came_up(result, served)
    assert environ(new.pid)["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    assert environ(new.pid)["PATH"] == plan.original_env["PATH"]  # the rest as it was
    again = await plan_restart(lab.host, served.config)
    assert again.pid == new.pid
    assert again.original_env["VLLM_USE_V2_MODEL_RUNNER"] == "1"

