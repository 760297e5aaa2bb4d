"""Serve-process discovery: command-line parsing, the /proc matching rules, and real process
trees on this machine (LocalHost) and through a real sshd (never another user's processes)."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sshd import Sshd, chown_to
from vllm_console.console.hostclient.discovery import (
    DiscoveryError,
    discover_serve,
    effective_serve,
    parse_serve_argv,
    serve_from_facts,
)
from vllm_console.console.hostside.argv import matches
from vllm_console.console.hostside.discover import interpreter
from vllm_console.console.settings import ServeSettings
from vllm_console.console.transport.local_host import LocalHost

HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
SPEC = {"method": "dflash", "model": "/m/Qwen3.6-27B-DFlash", "num_speculative_tokens": 15}


# -- the command line ----------------------------------------------------------------------------

def test_positional_target_speculative_json_and_default_address() -> None:
    args = parse_serve_argv(["/v/bin/python", "/v/bin/vllm", "serve", "/m/Qwen3.6-27B",
                             "--speculative-config", json.dumps(SPEC),
                             "--max-num-batched-tokens", "32768"])
    assert args.target == "/m/Qwen3.6-27B"
    assert args.draft == "/m/Qwen3.6-27B-DFlash"
    assert args.num_speculative_tokens == 15
    assert args.speculative_method == "dflash"
    assert args.url == "http://127.0.0.1:8000"


@pytest.mark.parametrize("argv", [
    ["python", "-m", "vllm.entrypoints.cli.main", "serve", "--model", "/m/T",
     "--speculative_config", json.dumps(SPEC)],
    ["vllm", "serve", "--model=/m/T", f"--speculative-config={json.dumps(SPEC)}"],
    ["vllm", "serve", "/m/T", "--speculative-config", str(SPEC)],  # a Python dict literal
    ["vllm", "serve", "/m/T", "--speculative-config.model", "/m/Qwen3.6-27B-DFlash",
     "--speculative-config.num_speculative_tokens=15", "--speculative-config.method", "dflash"],
])
def test_every_spelling_of_model_and_speculative_config(argv: list[str]) -> None:
    args = parse_serve_argv(argv)
    assert args.target == "/m/T"
    assert args.draft == "/m/Qwen3.6-27B-DFlash"
    assert args.num_speculative_tokens == 15


@pytest.mark.parametrize(("words", "url"), [
    (["--host", "0.0.0.0", "--port", "8123"], "http://127.0.0.1:8123"),
    (["--host", "::"], "http://127.0.0.1:8000"),
    (["--host", "10.1.2.3"], "http://10.1.2.3:8000"),
    (["--host=::1", "--port=9000"], "http://[::1]:9000"),
    (["--host", "localhost", "--port", "nope"], "http://127.0.0.1:8000"),
])
def test_url_from_host_and_port(words: list[str], url: str) -> None:
    assert parse_serve_argv(["vllm", "serve", "/m/T", *words]).url == url


def test_a_broken_speculative_config_is_no_draft_not_a_crash() -> None:
    args = parse_serve_argv(["vllm", "serve", "/m/T", "--speculative-config", "{not json"])
    assert args.draft is None
    assert args.num_speculative_tokens is None
    assert parse_serve_argv([]).target is None


# -- matching rules --------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "hit"), [
    (["/v/bin/python", "/v/bin/vllm", "serve", "/m/T"], True),
    (["/v/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "/m/T"], True),
    (["bash", "-c", "vllm serve /m/T"], False),  # one element holds both words
    (["tail", "-F", "/root/vllm-serve.log"], False),
    (["serve", "vllm"], False),  # out of order
    (["vllm"], False),
])
def test_match_words_in_order_in_distinct_elements(argv: list[str], hit: bool) -> None:
    assert matches(argv, ["vllm", "serve"]) is hit


def test_interpreter_keeps_the_venv_name(tmp_path: Path) -> None:
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(HOST_PYTHON)
    env = {"PATH": f"{venv_python.parent}:/usr/bin"}
    found, how = interpreter([str(venv_python), "-m", "vllm"], env, None, "/usr/bin/python3.11")
    assert (found, how) == (str(venv_python), "argv[0]")
    assert interpreter(["python", "x"], env, None, "/exe") == (str(venv_python), "argv[0]")
    script = tmp_path / "venv" / "bin" / "vllm"
    script.write_text(f"#!{venv_python}\nprint()\n")
    script.chmod(0o755)
    assert interpreter(["vllm", "serve"], env, None, "/exe") == (
        str(venv_python), f"shebang of {script}")
    env_script = tmp_path / "vllm2"
    env_script.write_text("#!/usr/bin/env -S python\n")
    env_script.chmod(0o755)
    assert interpreter([str(env_script)], env, None, "/exe")[0] == str(venv_python)
    assert interpreter(["./nope"], env, "/", "/exe") == ("/exe", "/proc/PID/exe")


# -- real processes ------------------------------------------------------------------------------

FAKE = r'''import ctypes, os, sys, time
print("started", flush=True)
if os.fork() == 0:  # a forked worker shares the command line: not the serve process
    time.sleep(120); os._exit(0)
if os.fork() == 0:  # the engine renames itself, as vLLM's EngineCore does
    ctypes.CDLL(None).prctl(15, b"VLLM::EngineCore", 0, 0, 0)
    time.sleep(120); os._exit(0)
time.sleep(120)
'''


def _launch(root: Path, token: str, user: str | None = None,
            python: str = HOST_PYTHON) -> subprocess.Popen[bytes]:
    script = root / "bin" / "vllm"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(FAKE)
    log = root / "serve.log"
    kwargs: dict[str, object] = {}
    if user is not None and os.geteuid() == 0:
        kwargs = {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}
        chown_to(root, user)
    argv = [python, str(script), "serve", f"{root}/models/T", "--served-model-name", token,
            "--speculative-config", json.dumps(SPEC), "--port", "8765"]
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=root,
                                env={"PATH": "/usr/bin:/bin", "HF_TOKEN": "secret-token"},
                                start_new_session=True, **kwargs)  # type: ignore[call-overload]
    deadline = time.monotonic() + 10
    while b"started" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # let the children fork and rename
    return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)
    proc.wait()


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vc-disc-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.programs
async def test_discovers_the_top_most_match_its_tree_log_and_arguments(root: Path) -> None:
    token = f"disc-{os.getpid()}-a"
    venv_python = root / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(HOST_PYTHON)
    proc = _launch(root, token, python=str(venv_python))
    try:
        found = await discover_serve(LocalHost(), ServeSettings(match=f"vllm serve {token}"))
    finally:
        _kill(proc)
    assert found is not None
    assert found.pid == proc.pid
    assert found.python == str(venv_python)  # the venv's name, not the resolved binary
    assert found.exe is not None
    assert found.exe != found.python
    assert found.cwd == str(root)
    assert found.log == str(root / "serve.log")
    assert found.target == f"{root}/models/T"
    assert found.draft == "/m/Qwen3.6-27B-DFlash"
    assert found.args.num_speculative_tokens == 15
    assert found.url == "http://127.0.0.1:8765"
    comms = sorted(c.comm for c in found.children)
    assert "VLLM::EngineCor" in comms  # the kernel keeps 15 characters
    assert len(found.children) == 2
    assert found.start_time is not None
    assert abs(found.start_time - time.time()) < 120
    assert found.environ["HF_TOKEN"] == "secret-token"
    assert "secret-token" not in repr(found)


@pytest.mark.programs
async def test_nothing_running_is_none_and_settings_fall_back(root: Path) -> None:
    settings = ServeSettings(match=f"vllm serve nothing-{os.getpid()}", log="/var/log/x.log")
    assert await discover_serve(LocalHost(), settings) is None
    effective = effective_serve(settings, None)
    assert effective.log.value == "/var/log/x.log"
    assert effective.log.source == "configured"
    assert effective.python.value == ""
    assert "using the configured settings" in effective.notes[0]


@pytest.mark.programs
async def test_configured_settings_win_and_differences_are_noted(root: Path) -> None:
    token = f"disc-{os.getpid()}-b"
    proc = _launch(root, token)
    try:
        found = await discover_serve(LocalHost(), ServeSettings(match=f"vllm serve {token}"))
    finally:
        _kill(proc)
    settings = ServeSettings(draft="/other/draft", match=f"vllm serve {token}")
    effective = effective_serve(settings, found)
    assert effective.draft.value == "/other/draft"
    assert effective.draft.source == "configured"
    assert effective.target.source == f"discovered (pid {proc.pid})"
    warning = ("warning: configured draft /other/draft is not what pid "
               f"{proc.pid} uses (it drafts with /m/Qwen3.6-27B-DFlash)")
    assert any(w.startswith(warning) for w in effective.warnings), effective.warnings
    assert set(effective.warnings) <= set(effective.notes)


@pytest.mark.programs
async def test_discovery_that_cannot_run_says_why() -> None:
    with pytest.raises(DiscoveryError, match="cannot look for the serve process"):
        await discover_serve(LocalHost(), ServeSettings(), python="/nonexistent/python3")


def test_several_servers_pick_the_oldest_and_say_so() -> None:
    facts = {"uid": 5, "user": "u", "serves": [
        {"pid": 10, "argv": ["vllm", "serve", "/m/A"], "start_time": 1.0,
         "stdout": {"target": "/l/a.log (deleted)", "regular": True, "deleted": True},
         "log": {"target": "/l/a.log (deleted)", "regular": True, "deleted": True}},
        {"pid": 20, "argv": ["vllm", "serve", "/m/B"], "start_time": 2.0}],
        "servers": [{"pid": 10, "port": 8000, "argv": ["vllm", "serve", "/m/A"],
                     "state": "ready", "chosen": True},
                    {"pid": 20, "port": 8001, "argv": ["vllm", "serve", "/m/B"],
                     "state": "starting", "chosen": False}]}
    found = serve_from_facts(facts)
    assert found is not None
    assert found.pid == 10
    assert found.others == (20,)
    assert found.log == "/l/a.log"
    assert found.log_deleted
    notes = effective_serve(ServeSettings(), found).notes
    assert ("2 vLLM servers on this host: this is :8000 (pid 10); the others: :8001; chosen "
            "by the lowest port, then the oldest start: pin one with --port N (or serve.port "
            "in the hosts file)") in notes
    assert any("rotated or deleted" in n for n in notes)
    assert serve_from_facts({"serves": []}) is None


@pytest.mark.ssh
async def test_over_ssh_only_the_login_users_processes(sshd: Sshd, root: Path) -> None:
    from vllm_console.console.transport.ssh_host import SSHHost

    if os.geteuid() != 0:
        pytest.skip("needs root to run a process as another user")
    token = f"disc-{os.getpid()}-c"
    theirs = root / "theirs"
    ours = root / "ours"
    theirs.mkdir()
    ours.mkdir()
    foreign = _launch(theirs, token)  # root's: must never be reported to the login user
    own = _launch(ours, token, user=sshd.user)
    if sshd.proc is None:
        sshd.start()
    host = SSHHost(sshd.host_config())
    try:
        found = await discover_serve(host, ServeSettings(match=f"vllm serve {token}"))
        assert found is not None
        assert found.pid == own.pid
        assert found.user == sshd.user
        assert found.others == ()
        assert found.log == str(ours / "serve.log")
        assert any(c.comm == "VLLM::EngineCor" for c in found.children)
    finally:
        await host.close()
        _kill(foreign)
        _kill(own)
    local = await discover_serve(LocalHost(), ServeSettings(match=f"vllm serve {token}"))
    assert local is None  # both are gone now


# -- the one resolver: look-alikes, orphans ----------------------------------------------------

ORPHANER = r'''import ctypes, os, subprocess, sys, time
cwd = os.getcwd()
if os.fork() == 0:  # the engine, renamed as vLLM's is
    ctypes.CDLL(None).prctl(15, b"VLLM::EngineCore", 0, 0, 0)
    time.sleep(120); os._exit(0)
TRACKER = "import time; time.sleep(120) # from multiprocessing.resource_tracker import main"
subprocess.Popen([sys.executable, "-c", TRACKER, "multiprocessing.resource_tracker"])
time.sleep(0.3)
print("started", flush=True)
time.sleep(120)
'''


def _start_orphaner(root: Path, token: str) -> subprocess.Popen[bytes]:
    script = root / "bin" / "vllm"
    script.parent.mkdir(parents=True)
    script.write_text(ORPHANER)
    log = root / "serve.log"
    with open(log, "ab") as out:
        api = subprocess.Popen([HOST_PYTHON, str(script), "serve", token], stdout=out,
                               stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
    deadline = time.monotonic() + 10
    while b"started" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.02)
    return api


@pytest.mark.programs
async def test_an_orphaned_engine_and_its_resource_tracker_are_named(root: Path) -> None:
    """The API server SIGKILLed: its engine and resource tracker keep running. No server is
    reported; the orphan is, with the tracker that shares its directory and parent."""
    from vllm_console.console.hostclient.discovery import resolve_serve

    token = f"orphan-{os.getpid()}"
    api = _start_orphaner(root, token)
    try:
        settings = ServeSettings(match=f"vllm serve {token}")
        running = await resolve_serve(LocalHost(), settings)
        assert running.process is not None
        assert running.process.pid == api.pid
        assert not [o for o in running.orphans if o["cwd"] == str(root)]
        api.kill()  # SIGKILL: the children are orphaned, as vLLM's are
        api.wait()
        time.sleep(0.2)
        found = await resolve_serve(LocalHost(), settings)
        assert found.process is None
        assert not found.lookalikes
        mine = [o for o in found.orphans if o["cwd"] == str(root)]
        assert len(mine) == 1
        orphan = mine[0]
        assert orphan["comm"] == "VLLM::EngineCor"
        assert orphan["cwd"] == str(root)
        assert [m["cmdline"].split()[-1] for m in orphan["tree"]] == [
            "multiprocessing.resource_tracker"]
        assert any(n.startswith(f"orphaned engine pid {orphan['pid']}") for n in found.notes)
    finally:
        _kill(api)


@pytest.mark.programs
async def test_check_names_an_orphaned_engine_when_no_server_runs(root: Path) -> None:
    """`check` with the API server gone: its discovery evidence names the orphaned engine
    instead of only 'no process matching'."""
    import psutil

    from vllm_console.checks.chain import run_chain

    token = f"orphan-chk-{os.getpid()}"
    api = _start_orphaner(root, token)
    try:
        engine = next(c.pid for c in psutil.Process(api.pid).children()
                      if c.name().startswith("VLLM::"))
        api.kill()
        api.wait()
        time.sleep(0.2)
        report = await run_chain(LocalHost(), ServeSettings(match=f"vllm serve {token}"))
    finally:
        _kill(api)
    evidence = "\n".join(e.excerpt for link in report.links for e in link.evidence
                         if e.probe == "discovery")
    assert f"orphaned engine pid {engine} (VLLM::EngineCor" in evidence, evidence


def test_a_configured_value_spelt_otherwise_is_no_disagreement() -> None:
    """`localhost:8000` for a server on 127.0.0.1:8000, a directory with a trailing slash: the
    same thing, no warning. Another port or another file is one."""
    facts = {"uid": 5, "user": "u", "serves": [
        {"pid": 10, "argv": ["vllm", "serve", "/m/A", "--port", "8000"], "start_time": 1.0,
         "stdout": {"target": "/l/a.log", "regular": True},
         "log": {"target": "/l/a.log", "regular": True}}]}
    found = serve_from_facts(facts)
    same = ServeSettings(url="localhost:8000", target="/m/A/", log="/l/a.log")
    assert effective_serve(same, found).warnings == ()
    other = ServeSettings(url="http://127.0.0.1:9000", log="/l/old.log")
    warnings = effective_serve(other, found).warnings
    assert [w.split(" is not", 1)[0] for w in warnings] == [
        "warning: configured log /l/old.log", "warning: configured url http://127.0.0.1:9000"]
