"""The host-side package as a whole: the Python it needs, what it may import, how it is shipped
and started, and the parts its entry points share (the argv rule, the /proc stat parser)."""

from __future__ import annotations

import ast
import functools
import io
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.hostside.bundle import bundle_path, entry_argv
from tests.sshd import Sshd
from vllm_console.console.hostclient.agent.client import AgentClient
from vllm_console.console.hostclient.discovery import resolve_serve
from vllm_console.console.hostclient.launch_record import read_last_launch
from vllm_console.console.hostside import MIN_PYTHON
from vllm_console.console.hostside.__main__ import ENTRIES
from vllm_console.console.hostside.argv import matches
from vllm_console.console.hostside.procfs import parse_stat, read_stat
from vllm_console.console.hostside.vocabulary import HOOK_MODULE_VOCABULARY
from vllm_console.console.hostside.wire import MARKER, TOO_OLD_EXIT
from vllm_console.console.settings import HostConfig, ServeSettings
from vllm_console.console.telemetry.oneshot import collect_status
from vllm_console.console.transport import remote_scripts
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.transport.remote_scripts import (
    PACKAGE,
    RemoteScripts,
    bundle_bytes,
    parse_answer,
    python_line,
    run_json,
)
from vllm_console.console.transport.ssh_host import SSHHost

HOSTSIDE = Path(__file__).resolve().parents[2] / "console" / "hostside"
SOURCES = sorted(HOSTSIDE.rglob("*.py"))
# What tells an older Python that it is too old: parseable by any Python 3 that ast knows.
GATE = ("__init__.py", "__main__.py", "wire.py", "zipapp_main.py")
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


# -- the Python it needs --------------------------------------------------------------------

@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(HOSTSIDE)))
def test_every_module_compiles_for_the_oldest_host_python(path: Path) -> None:
    """No Python older than 3.11 can be had on this machine (no python3.8/3.9 package, no
    download): the grammar of MIN_PYTHON is what `ast` checks here, and vermin (below) checks
    the standard library calls."""
    version = (3, 4) if path.name in GATE and path.parent == HOSTSIDE else MIN_PYTHON
    ast.parse(path.read_text(), filename=str(path), feature_version=version)


@pytest.mark.programs
def test_no_standard_library_call_needs_a_newer_python() -> None:
    vermin = shutil.which("vermin", path=str(Path(sys.executable).parent))
    if vermin is None:
        pytest.fail("vermin is missing: install the dev extra (make test does)")
    target = "-t={}.{}-".format(*MIN_PYTHON)
    done = subprocess.run([vermin, "--no-tips", "--violations", target, str(HOSTSIDE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_lints_it_for_the_same_python() -> None:
    ruff = tomllib.loads((HOSTSIDE.parents[1] / "pyproject.toml").read_text())["tool"]["ruff"]
    assert ruff["per-file-target-version"]["console/hostside/**"] == "py{}{}".format(*MIN_PYTHON)


def test_it_imports_only_the_standard_library_and_itself() -> None:
    # pynvml: optional, on the host; transformers: what the fields probe looks into, under the
    # serving interpreter; the vocabulary itself, as the trace hook finds it beside it.
    allowed = set(sys.stdlib_module_names) | {"pynvml", "transformers", HOOK_MODULE_VOCABULARY}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            bad = [n for n in names if n.split(".")[0] not in allowed]
            assert not bad, f"{path.relative_to(HOSTSIDE)} imports {bad}"


# -- shipped as one bundle ----------------------------------------------------------------

@pytest.mark.programs
def test_the_bundle_holds_every_module_and_every_entry_imports_from_it(tmp_path: Path) -> None:
    names = zipfile.ZipFile(io.BytesIO(bundle_bytes())).namelist()
    assert sorted(n for n in names if n != "__main__.py") == sorted(
        f"{PACKAGE}/{p.relative_to(HOSTSIDE)}" for p in SOURCES)
    code = ("import importlib, sys\n"
            f"for name in {sorted(set(ENTRIES.values()))!r}:\n"
            f"    importlib.import_module('{PACKAGE}.' + name).main\n")
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(bundle_path())})
    assert done.returncode == 0, done.stderr


@pytest.mark.programs
def test_an_unknown_entry_is_refused_with_the_list_of_entries() -> None:
    done = subprocess.run(entry_argv(PYTHON, "nope"), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2
    assert "agent|container-log|discover|follow|follow-container|probe-code" in done.stderr


@pytest.mark.programs
async def test_installed_once_per_content_hash(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    host = LocalHost("here")
    path = Path(await RemoteScripts(host).bundle())
    assert path.parent == tmp_path / "vllm-console"
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert path.read_bytes() == bundle_bytes()
    written = path.stat().st_mtime_ns
    assert Path(await RemoteScripts(host).bundle()) == path  # a new session: not sent again
    assert path.stat().st_mtime_ns == written


@pytest.mark.programs
async def test_consoles_installing_at_once_all_get_a_whole_bundle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """First contact from several consoles at once (a watch, a fleet, two terminals): each
    gets the whole bundle, none a half-written one or "cannot install" (issue 24, break 7)."""
    import asyncio
    for attempt in range(3):
        cache = tmp_path / str(attempt)
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
        host = LocalHost("here")
        paths = await asyncio.gather(*(RemoteScripts(host).bundle() for _ in range(8)),
                                     return_exceptions=True)
        assert all(isinstance(p, str) for p in paths), paths
        assert {Path(p).read_bytes() == bundle_bytes() for p in paths} == {True}
        assert [p.name for p in (cache / "vllm-console").iterdir()] == [Path(paths[0]).name]


def _installed(tmp_path: Path) -> Path:
    """The bundle as the console installs it: in a private directory, named by its hash."""
    cache = tmp_path / "vllm-console"
    cache.mkdir(mode=0o700)
    bundle = cache / "hostside-0123456789abcdef.pyz"
    bundle.write_bytes(bundle_bytes())
    return bundle


@functools.cache
def _cache_tag() -> str:
    """PYTHON's tag for its bytecode (`cpython-311`)."""
    return subprocess.run([PYTHON, "-c", "import sys; print(sys.implementation.cache_tag)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _imports_from(python: str, bundle: Path, entry: str = "discover") -> tuple[str, str]:
    """Where a run of `entry` took the package's modules from (python -v), and its answer."""
    done = subprocess.run([python, "-S", "-v", str(bundle), entry], input="{}",
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "VLLM_CONSOLE_ARGS": "[]"})
    assert MARKER in done.stdout, done.stderr[-2000:]
    loaded = [line for line in done.stderr.splitlines()
              if f"{PACKAGE}.discover'" in line or f"{PACKAGE}/__pycache__/discover" in line]
    return "\n".join(loaded), done.stdout


@pytest.mark.programs
def test_a_host_compiles_the_bundle_once_and_later_runs_import_the_bytecode(
        tmp_path: Path) -> None:
    """A zipapp holds no bytecode the host's Python can use: every helper run compiled each
    module it imported (a third of a discovery's CPU). The first run on a host, for each
    Python version, leaves a compiled copy beside the bundle, private like it; the later runs
    import from it, and answer the same."""
    bundle = _installed(tmp_path)
    cache = bundle.parent
    _, first = _imports_from(PYTHON, bundle)
    tag = _cache_tag()
    copy = cache / f"hostside-0123456789abcdef.{tag}"
    assert copy.is_dir()
    assert sorted(p.name for p in cache.iterdir()) == sorted([bundle.name, copy.name])
    compiled = copy / PACKAGE / "__pycache__" / f"discover.{tag}.pyc"
    assert compiled.is_file()
    assert {oct(p.stat().st_mode & 0o077) for p in copy.rglob("*")} == {"0o0"}  # private
    then_from, then = _imports_from(PYTHON, bundle)
    assert str(compiled) in then_from, then_from  # "code object from '...discover...pyc'"
    assert str(bundle) not in then_from
    # The same answer, but for what the machine's processes did in between (the suite's
    # other workers start and stop simulated servers: they are in one answer, not the other).
    steady = ("uid", "user")
    assert [(parse_answer(a) or {}).get(k) for a in (first, then) for k in steady] == [
        os.getuid(), pwd.getpwuid(os.getuid()).pw_name] * 2
    assert (parse_answer(first) or {}).keys() == (parse_answer(then) or {}).keys()


@pytest.mark.programs
def test_a_bundle_beside_which_no_copy_can_be_made_still_runs(tmp_path: Path) -> None:
    """A full disk, a read-only cache directory, something in the copy's place: the run
    imports from the bundle itself, as before, and leaves nothing half-written."""
    bundle = _installed(tmp_path)
    cache = bundle.parent
    tag = _cache_tag()
    (cache / f"hostside-0123456789abcdef.{tag}").write_text("not a directory")
    for _ in range(2):
        where, answer = _imports_from(PYTHON, bundle)
        assert str(bundle) in where
        assert (parse_answer(answer) or {}).get("uid") == os.getuid()
        assert sorted(p.name for p in cache.iterdir()) == sorted(
            [bundle.name, f"hostside-0123456789abcdef.{tag}"])


@pytest.mark.programs
@pytest.mark.skipif(os.geteuid() != 0, reason="runs the bundle as another user")
def test_a_copy_another_user_made_is_passed_over() -> None:
    """A copy this user cannot read (made by root running the same bundle: private to root)
    leaves the run to the bundle itself. It was taken for this user's, and every helper run
    ended in `No module named 'vllm_console_host'`. (Not in tmp_path: `nobody` cannot reach
    it.)"""
    shared = Path(tempfile.mkdtemp(prefix="vc-shared-bundle-"))
    try:
        shared.chmod(0o755)
        bundle = shared / "hostside-0123456789abcdef.pyz"
        bundle.write_bytes(bundle_bytes())
        bundle.chmod(0o644)
        _imports_from(PYTHON, bundle)  # root's run makes root's copy
        assert (shared / f"hostside-0123456789abcdef.{_cache_tag()}").is_dir()
        done = subprocess.run([PYTHON, "-S", str(bundle), "discover"], input="{}",
                              capture_output=True, text=True, timeout=60, user="nobody",
                              group="nogroup", extra_groups=[], cwd="/",
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                   "VLLM_CONSOLE_ARGS": "[]"})
        assert done.returncode == 0, done.stderr[-2000:]
        assert (parse_answer(done.stdout) or {}).get("uid") == pwd.getpwnam("nobody").pw_uid
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.programs
def test_first_runs_at_once_leave_one_compiled_copy(tmp_path: Path) -> None:
    bundle = _installed(tmp_path)
    cache = bundle.parent
    runs = [subprocess.Popen([PYTHON, "-S", str(bundle), "discover"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, "VLLM_CONSOLE_ARGS": "[]"}) for _ in range(6)]
    answers = [run.communicate(b"{}", timeout=60) for run in runs]
    assert [MARKER.encode() in out for out, _ in answers] == [True] * 6, answers
    assert [run.returncode for run in runs] == [0] * 6
    assert len(list(cache.iterdir())) == 2  # the bundle and one copy, no temporary left


# -- one run_json, one line per failure ----------------------------------------------------

@pytest.mark.programs
async def test_run_json_reads_the_answer_after_the_marker(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    host = LocalHost("here")
    run = await run_json(host, "discover", PYTHON,
                         {"match": ["no-such-server-here"], "port": None})
    assert run.error is None, run.stderr
    assert run.data is not None
    assert run.data["serves"] == []
    assert run.command.endswith(" discover")


def _shimmed_python3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A version manager's `python3` first on PATH (it notes each run in the file returned),
    and a private cache for the bundle."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    shims = tmp_path / "shims"
    shims.mkdir()
    calls = tmp_path / "calls"
    shim = shims / "python3"
    shim.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {PYTHON} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    return calls


@pytest.mark.programs
async def test_a_shimmed_python3_is_looked_up_once_per_host(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """A `python3` on PATH that is a version manager's shim (pyenv, asdf: a shell script that
    starts ~30 processes to pick the interpreter) is run once; the interpreter it picked runs
    the later entries."""
    calls = _shimmed_python3(tmp_path, monkeypatch)
    host = LocalHost("here")
    params = {"match": ["no-such-server-here"], "port": None}
    runs = [await run_json(host, "discover", "python3", params) for _ in range(3)]
    assert [run.error for run in runs] == [None] * 3
    assert [run.data["serves"] for run in runs if run.data] == [[]] * 3
    assert len(calls.read_text().splitlines()) == 1
    assert all("| python3 " in run.command for run in runs)  # as a person re-runs it
    agent = AgentClient(host, match="no-such-server-here")  # a stream too, the host's own
    await agent.once()
    assert len(calls.read_text().splitlines()) == 1
    elsewhere = LocalHost("elsewhere")  # what one host's PATH says is its own
    run = await run_json(elsewhere, "discover", "python3", params)
    assert run.error is None
    assert len(calls.read_text().splitlines()) == 2


@pytest.mark.programs
async def test_status_a_check_and_a_restart_on_one_host_learn_it_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundle's path and what the host's `python3` is are the host's (`Host.scripts`):
    once `status` has run on a host (its agent and its discovery at once: both may meet the
    version manager's shim), a check's discovery and a restart's look for the last launch
    there run the interpreter `status` learnt, not the shim again."""
    calls = _shimmed_python3(tmp_path, monkeypatch)
    host = LocalHost("here")
    config = HostConfig(name="here", local=True,
                        serve=ServeSettings(match="no-such-server-here"))
    snap = await collect_status(host, config)
    assert not snap.serve.running
    shimmed = len(calls.read_text().splitlines())
    assert (await resolve_serve(host, config.serve)).process is None
    assert await read_last_launch(host, config.serve) == {}
    assert len(calls.read_text().splitlines()) == shimmed


@pytest.mark.programs
async def test_the_helpers_start_without_the_interpreters_site_packages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `.pth` file in the interpreter's site-packages runs at every start of that Python (a
    sandbox's certificate hook here cost 35 ms a start; a broken one prints on stderr). The
    helpers use the standard library alone and start without it; the probes that import the
    serving vLLM keep it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    venv = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "noisy.pth").write_text("import sys; sys.stderr.write('the .pth ran\\n')\n")
    python = str(venv / "bin" / "python3")
    assert "the .pth ran" in subprocess.run([python, "-c", "pass"], capture_output=True,
                                            text=True).stderr
    host = LocalHost("here")
    run = await run_json(host, "discover", python,
                         {"match": ["no-such-server-here"], "port": None})
    assert run.error is None, run.stderr
    assert "the .pth ran" not in run.stderr
    assert f"{python} -S " in run.command  # what ran, as a person re-runs it
    probe = await run_json(host, "probe-code", python, {})
    assert "the .pth ran" in probe.stderr  # its vLLM lives in site-packages


@pytest.mark.programs
async def test_an_interpreter_whose_path_holds_a_newline_still_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker line names the interpreter that ran; a path with a newline, quotes or `$()`
    in it (a serving venv under a hostile directory) must not split the answer."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    venv = tmp_path / "venv \"x'\n$(touch y)\n{\"t\" 1}"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    odd = venv / "bin"  # a venv's python names itself by the venv's path
    for name in ("python3", str(odd / "python3")):  # looked up on PATH, and named in full
        monkeypatch.setenv("PATH", f"{odd}:{os.environ['PATH']}")
        host = LocalHost("here")
        params = {"match": ["no-such-server-here"], "port": None}
        for _ in range(2):  # the second runs the interpreter the first one named
            run = await run_json(host, "discover", name, params)
            assert run.error is None, run.stderr
            assert run.data is not None
            assert run.data["serves"] == []
        if name == "python3":
            assert host.scripts.interpreter("python3") == str(odd / "python3")


@pytest.mark.ssh
@pytest.mark.parametrize(("interpreter", "says"), [
    ("/no/such/python3", "/no/such/python3: not found on gpu1"),
    ("/bin/echo", "discover failed (exit 0): its output is not JSON: "),
])
async def test_run_json_says_in_one_line_why_there_is_no_answer(
        sshd: Sshd, interpreter: str, says: str) -> None:
    host = SSHHost(sshd.host_config(name="gpu1"))
    try:
        run = await run_json(host, "discover", interpreter, {})
    finally:
        await host.close()
    assert run.data is None
    assert run.error is not None
    assert run.error.startswith(says)
    assert "\n" not in run.error
    assert not run.link_failed


def _bundle_needing(version: tuple[int, int]) -> bytes:
    """The real bundle, but declaring a minimum above the Python running the tests (no older
    Python can be had here, so the gate is crossed the other way)."""
    source = zipfile.ZipFile(io.BytesIO(bundle_bytes()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == f"{PACKAGE}/__init__.py":
                data = data.replace(f"MIN_PYTHON = {MIN_PYTHON!r}".encode(),
                                    f"MIN_PYTHON = {version!r}".encode())
                assert f"{version!r}".encode() in data
            zf.writestr(info, data)
    return out.getvalue()


@pytest.mark.programs
async def test_a_python_older_than_the_minimum_says_so(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(remote_scripts, "bundle_bytes", lambda: _bundle_needing((3, 99)))
    host = LocalHost("here")
    run = await run_json(host, "discover", PYTHON, {})
    assert run.exit == TOO_OLD_EXIT
    assert run.error is not None
    assert run.error.startswith("here: Python 3.")
    assert "is too old for the console's host side (it needs 3.99+)" in run.error


@pytest.mark.programs
async def test_a_stream_skips_a_python_that_is_too_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_scripts, "MIN_PYTHON", (3, 99))
    line = python_line(str(bundle_path()), "agent", ["--once"], python=PYTHON)
    done = await LocalHost("here").run(line, timeout=30)
    assert done.exit_status == 127
    tried = " ".join(dict.fromkeys(["python3", "/usr/bin/python3", PYTHON]))  # each once
    assert json.loads(done.text) == {
        "t": "error", "msg": f"no Python 3.99+ on the host (tried {tried})"}


def test_one_marker_for_every_one_shot_entry() -> None:
    """The marker string is written once, in wire.py; the entries and the laptop import it."""
    holders = [p for p in SOURCES if MARKER in p.read_text()]
    assert holders == [HOSTSIDE / "wire.py"]


# -- the shared parts ----------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "words", "expected"), [
    (["/v/bin/python", "/v/bin/vllm", "serve", "/m"], ["vllm", "serve"], True),
    (["python", "-m", "vllm.entrypoints.cli.main", "serve", "x"], ["vllm", "serve"], True),
    (["python", "-m", "vllm serve"], ["vllm", "serve"], False),  # one element, two words
    (["serve", "vllm"], ["vllm", "serve"], False),  # wrong order
    (["vllm"], ["vllm", "serve"], False),
    # No words match nothing: a blank `match` must never make every process the server.
    (["vllm", "serve"], [], False),
    ([], [], False),
])
def test_the_one_argv_rule(argv: list[str], words: list[str], expected: bool) -> None:
    assert matches(argv, words) is expected


def test_stat_with_spaces_and_parens_in_comm() -> None:
    raw = b"123 (VLLM::Engine (x) y) S 77 123 123 0 -1 4194304 1 0 0 0 5 6 0 0 20 0 3 0 4242 0 9"
    stat = parse_stat(raw)
    assert stat is not None
    assert (stat.comm, stat.state, stat.ppid, stat.cpu_ticks, stat.threads, stat.start,
            stat.rss_pages) == ("VLLM::Engine (x) y", "S", 77, 11, 3, 4242, 9)
    assert parse_stat(b"garbage") is None
    assert parse_stat(b"1 (x) S") is None


def test_stat_of_a_live_process() -> None:
    stat = read_stat(os.getpid())
    assert stat is not None
    assert stat.ppid == os.getppid()
    assert stat.state in ("R", "S")
    assert read_stat(2 ** 22 + 1) is None  # above pid_max: never a process


@pytest.mark.programs
def test_a_process_start_time_is_right_to_a_few_hundredths_of_a_second() -> None:
    """The chain tells "the config was written after this run started" from the start time; a
    boot time truncated to the second (`btime`) put it up to 1 s early (issue 24: a flaky
    restart-to-apply)."""
    import subprocess
    import sys
    import time

    from vllm_console.console.hostside.procfs import start_epoch
    errors = []
    for _ in range(5):
        before = time.time()
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
        try:
            stat = read_stat(child.pid)
            assert stat is not None
            errors.append(start_epoch(stat.start) - before)
        finally:
            child.kill()
            child.wait()
    assert all(-0.03 <= e <= 0.1 for e in errors), errors
