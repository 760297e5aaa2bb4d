"""`stacks` and the debug restart on a real engine.

With requests in flight and its EngineCore SIGSTOPped, `stacks --json` (over the real sshd, as
the login user, py-spy installed into the serving environment from the registry and found
beside the serving interpreter) returns the API server and the EngineCore within a bounded
time, the EngineCore's main thread in `vllm/v1/engine/core.py`. A login user who may not trace
the process it names gets one line saying what to grant, exit 2. The TUI's stalled header
offers the stacks; `D` relaunches with vLLM's debug switches (its log then carries DEBUG lines)
and `D` again without them; `restart --debug` and a plain `restart` do the same from the CLI.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app_support import screen_text, wait_until
from tests.real_vllm.fixture import RealServer, RealVllm, ensure_py_spy, ngram_spec
from tests.real_vllm.support import cli, cli_json, console_app, hosts_file, served
from tests.real_vllm.test_real_vllm_serving import Traffic, stop_mid_generation
from tests.sshd import Sshd
from vllm_console.console.hostclient.stacks_text import unmoved
from vllm_console.console.hostside.vocabulary import RESTART_MARKER
from vllm_console.console.tui.screens.restart import RestartScreen
from vllm_console.console.tui.screens.stacks import StacksScreen

pytestmark = [pytest.mark.ssh, pytest.mark.real_vllm, pytest.mark.timeout(600)]

LOADED_CLI_TIMEOUT = 300
STALL_S = 5.0


@pytest.fixture(scope="module")
def stacked(real_vllm: RealVllm, sshd: Sshd, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[RealServer, Path]]:
    ensure_py_spy(real_vllm)
    folder = tmp_path_factory.mktemp("real-stacks")
    with served(real_vllm, sshd, folder, "engine", ngram_spec(4)) as pair:
        hosts_file(folder / "tui.toml", sshd, {"engine": pair[0]}, stall_s=STALL_S)
        yield pair


async def test_the_stalled_headers_key_opens_the_stacks_of_the_real_engine(
        stacked: tuple[RealServer, Path]) -> None:
    srv, hosts = stacked
    app = console_app(hosts.with_name("tui.toml"), "engine")
    async with app.run_test(size=(160, 60)) as pilot:
        screen = app.screen_for("engine")
        assert screen is not None
        traffic = Traffic(srv, until=threading.Event()).start(4, max_tokens=480)
        await wait_until(pilot, lambda: screen.serving.view.engine == "ok", 90,
                         "the screen seeing the engine serve")
        assert traffic.until is not None
        traffic.until.set()
        engine, _ = await asyncio.to_thread(stop_mid_generation, srv, 4, traffic)
        try:
            await wait_until(pilot, lambda: "engine stalled" in screen_text(app)
                             .splitlines()[0], STALL_S + 30, "the stall in the header")
            assert "[s stacks]" in screen_text(app).splitlines()[0]
            await pilot.press("s")
            await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen)
                             and app.screen.dumps >= 2, 120, "two dumps")
            stacks = app.screen
            assert isinstance(stacks, StacksScreen)
            report = stacks.report
            assert report is not None
            core = next(p for p in report.processes if p.pid == engine)
            assert core.role == "engine-core"
            assert core.stopped
            main = next(t for t in core.threads if t.name == "MainThread")
            assert any(f.file == "vllm/v1/engine/core.py" for f in main.frames)
            # stopped: the second dump finds it where the first did
            assert (engine, main.id) in unmoved(stacks.previous, report)
            assert f"engine-core pid {engine} (stopped): VLLM::EngineCore" in screen_text(app)
        finally:
            os.kill(engine, signal.SIGCONT)
        await asyncio.to_thread(traffic.wait)


def test_a_stopped_engine_core_is_dumped_in_bounded_time(
        stacked: tuple[RealServer, Path]) -> None:
    srv, hosts = stacked
    traffic = Traffic(srv, until=threading.Event()).start(4, max_tokens=480)
    assert traffic.until is not None
    traffic.until.set()
    engine, held = stop_mid_generation(srv, 4, traffic)
    try:
        started = time.monotonic()
        code, data = cli_json("stacks", "engine", "--config", str(hosts),
                              timeout=LOADED_CLI_TIMEOUT)
        took = time.monotonic() - started
    finally:
        os.kill(engine, signal.SIGCONT)
    traffic.wait()
    assert code == 0, data
    assert held >= 1
    # The command's own start and SSH connection on a loaded machine, plus the dumps' one
    # 10 s deadline: a stopped process never makes it hang.
    assert took < 90, took
    assert data["tool"]["name"] == "py-spy"
    assert data["tool"]["version"] == "0.4.3"
    assert data["tool"]["path"] == str(srv.fixture.venv / "bin" / "py-spy")
    by_pid = {p["pid"]: p for p in data["processes"]}
    assert by_pid[srv.pid]["role"] == "api-server"
    core = by_pid[engine]
    assert core["role"] == "engine-core"
    assert core["name"] == "VLLM::EngineCore"
    assert core["error"] is None
    main = next(t for t in core["threads"] if t["name"] == "MainThread")
    files = [f["file"] for f in main["frames"]]
    assert "vllm/v1/engine/core.py" in files, files
    assert any(f["function"].endswith("run_busy_loop") for f in main["frames"])
    roles = sorted(p["role"] for p in data["processes"])
    assert roles.count("worker") == 1, roles
    assert any("stopped" in note and str(engine) in note for note in data["notes"])


def test_a_process_the_login_user_may_not_trace_is_one_line_naming_what_to_grant(
        stacked: tuple[RealServer, Path]) -> None:
    """The login user (not root) names a process of root's (this test's own): py-spy is
    refused; the command says so in one line, with what to grant, exit 2, no traceback."""
    _, hosts = stacked
    done = cli("stacks", "engine", "--config", str(hosts), "--pid", str(os.getpid()),
               timeout=LOADED_CLI_TIMEOUT)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"not allowed to trace pid {os.getpid()}" in lines[0]
    assert "they run as uid 0, not the login user" in lines[0]
    assert "CAP_SYS_PTRACE" in lines[0]
    assert "Traceback" not in done.stderr + done.stdout


def _run_after_last_restart(srv: RealServer) -> str:
    """The log of the run the console's last restart started."""
    return srv.log.read_text(errors="replace").rsplit(RESTART_MARKER, 1)[-1]


async def _restart_with_d(pilot, app, expected: str) -> str:  # type: ignore[no-untyped-def]
    """`D`, the dialog's diff checked, confirmed; once the new server is ready and found, the
    dialog's text."""
    screen = app.screen_for("engine")
    old = screen.session.snapshot.serve.pid
    await pilot.press("D")
    await wait_until(pilot, lambda: isinstance(app.screen, RestartScreen)
                     and app.screen.focused is not None, 120, "the restart dialog")
    shown = str(app.screen.query_one("#confirm-body").render())
    assert expected in shown, shown
    await pilot.click("#confirm")
    await wait_until(pilot, lambda: not screen.restarting
                     and screen.session.snapshot.readiness.ready
                     and screen.session.snapshot.serve.pid not in (None, old), 300,
                     "the relaunched server ready and found")
    return shown


async def test_a_debug_restart_logs_debug_and_the_plain_one_after_it_does_not(
        stacked: tuple[RealServer, Path]) -> None:
    """Last in the module: the server is relaunched by the console (twice)."""
    srv, hosts = stacked
    app = console_app(hosts, "engine")
    async with app.run_test(size=(160, 60)) as pilot:
        screen = app.screen_for("engine")
        assert screen is not None
        await wait_until(pilot, lambda: screen.session.snapshot.readiness.ready, 90,
                         "the server seen ready")
        shown = await _restart_with_d(pilot, app, "+ env: VLLM_LOGGING_LEVEL=DEBUG")
        assert "- env: VLLM_LOGGING_LEVEL unset" in shown
        assert "+ env: NCCL_DEBUG=INFO" in shown
        assert "CUDA_LAUNCH_BLOCKING" not in shown  # no GPU here
        assert "--watchdog-config" not in shown  # vLLM 0.32: no watchdog
        debug_run = _run_after_last_restart(srv)
        assert [ln for ln in debug_run.splitlines() if " DEBUG " in ln], debug_run[-3000:]
        shown = await _restart_with_d(pilot, app, "- env: VLLM_LOGGING_LEVEL=DEBUG")
        assert "+ env: VLLM_LOGGING_LEVEL unset" in shown
        assert "- env: NCCL_DEBUG=INFO" in shown
        plain_run = _run_after_last_restart(srv)
        assert "Application startup complete" in plain_run
        assert not [ln for ln in plain_run.splitlines() if " DEBUG " in ln]


def test_restart_debug_on_the_command_line_logs_debug_and_a_plain_restart_not(
        stacked: tuple[RealServer, Path]) -> None:
    """`restart --debug` (the CLI's `D`) over the sshd: its diff printed, the relaunched
    server's log carries DEBUG lines; a plain `restart` after it takes the switches out."""
    srv, hosts = stacked
    done = cli("restart", "engine", "--config", str(hosts), "--debug", "--yes",
               timeout=LOADED_CLI_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restarting on engine with the debug switches:" in done.stdout
    assert "+ env: VLLM_LOGGING_LEVEL=DEBUG" in done.stdout
    assert "--watchdog-config" not in done.stdout  # vLLM 0.32: no watchdog
    debug_run = _run_after_last_restart(srv)
    assert [ln for ln in debug_run.splitlines() if " DEBUG " in ln], debug_run[-3000:]
    done = cli("restart", "engine", "--config", str(hosts), "--yes",
               timeout=LOADED_CLI_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restarting on engine without the debug switches:" in done.stdout
    assert "- env: VLLM_LOGGING_LEVEL=DEBUG" in done.stdout
    plain_run = _run_after_last_restart(srv)
    assert "Application startup complete" in plain_run
    assert not [ln for ln in plain_run.splitlines() if " DEBUG " in ln]


def test_native_on_a_stopped_process_falls_back_to_its_python_stack(real_vllm: RealVllm
                                                                    ) -> None:
    """`--native` needs the blocking dump, which a stopped process refuses ("Failed to suspend
    process", measured): the host side dumps it again without native frames, and says so."""
    import subprocess
    import sys

    from vllm_console.console.hostclient.stacks import report_from_facts
    from vllm_console.console.hostside.stacks import probe

    py_spy = ensure_py_spy(real_vllm)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time\ndef napping():\n"
                                " time.sleep(120)\nnapping()"])
    try:
        time.sleep(0.5)
        os.kill(sleeper.pid, signal.SIGSTOP)
        time.sleep(0.2)  # the stop is delivered asynchronously
        started = time.monotonic()
        facts = probe({"root": sleeper.pid, "native": True, "timeout": 10,
                       "python": str(py_spy.with_name("python"))})
        took = time.monotonic() - started
    finally:
        sleeper.kill()
        sleeper.wait()
    assert took < 15, took
    report = report_from_facts("local", facts)
    assert report.exit_status == 0, report
    (process,) = report.processes
    assert process.stopped
    functions = [f.function for f in process.threads[0].frames]
    assert "napping" in functions
    assert any("no native frames" in note for note in report.notes)
