"""Start-up: the host screen is on the terminal before the host's session is made, and the
first frame needs none of what the session brings (its telemetry, checks' profiles, restart).
A session that cannot be made ends the console with one line and exit 2."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app_support import make_tree, screen_text, wait_until
from vllm_console.console.cli.commands.demo import demo_config
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.session.pending import PendingSession
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.tui.app import ConsoleApp

SIZE = (160, 50)


@pytest.mark.programs
async def test_the_host_screen_is_painted_before_the_session_is_made(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "host")  # not started: the screen says what it finds
    painted: list[str] = []

    async def open_session() -> HostSession:
        painted.append(screen_text(app))
        return HostSession(demo_config(tree), LocalHost("demo"), scenario="incident")

    app = ConsoleApp([PendingSession("demo", open_session, scenario="incident")],
                     autostart_checks=False)
    async with app.run_test(size=SIZE) as pilot:
        assert app.screen.check_action("restart", ()) is None  # shown, disabled until the session
        await wait_until(pilot, lambda: "demo" in app.sessions, what="the session")
        assert app.screen.check_action("restart", ()) is True
        await wait_until(pilot, lambda: app.sessions["demo"].snapshot.link.state.value
                         != "connecting", what="the telemetry started")
    assert len(painted) == 1
    first = painted[0]
    for text in ("vllm-console", "demo", "incident", "GPUs", "Speculative decoding",
                 "serve log"):
        assert text in first, text


async def test_a_session_that_cannot_be_made_ends_the_console_with_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    async def open_session() -> HostSession:
        raise OSError(28, "No space left on device")

    app = ConsoleApp([PendingSession("demo", open_session)], autostart_checks=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.return_code is not None, what="the exit")
    assert app.return_code == 2
    # Said as the command line says a failure (`output.messages.failure_line`): in a person's
    # words, not Python's `[Errno 28] ...` (the app had its own rule for it).
    assert capsys.readouterr().err.splitlines() == [
        "vllm-console: demo: No space left on device"]


@pytest.mark.programs
def test_the_first_frame_imports_nothing_of_the_session() -> None:
    """What `vllm-console HOST` and `demo` import before the app paints: the app, its screens
    and widgets, the settings; not the telemetry's driver, the restart, the chain, the URL
    source, the simulated host's writer and runner (each loads with the session, after the
    first frame)."""
    code = ("import sys\n"
            "import vllm_console.console.cli.parser, vllm_console.console.cli.commands.tui\n"
            "import vllm_console.console.cli.commands.demo\n"
            "import vllm_console.console.tui.app\n"
            "vllm_console.console.cli.commands.demo.check_scenario('incident')\n"
            "print(' '.join(sorted(sys.modules)))\n")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True, timeout=60).stdout.split())
    assert {"textual.app", "vllm_console.console.tui.screens.host"} <= loaded
    for module in ("vllm_console.console.session.host_session",
                   "vllm_console.console.telemetry.host_telemetry",
                   "vllm_console.console.restart",
                   "vllm_console.checks.chain", "vllm_console.checks.references",
                   "vllm_console.console.sources.url",
                   "vllm_console.console.hostclient.agent.client", "asyncssh",
                   "vllm_console.console.sim.tree", "vllm_console.console.sim.runner"):
        assert module not in loaded, module


@pytest.mark.programs
async def test_the_console_turns_the_collector_on_once_its_sessions_are_open(
        tmp_path: Path) -> None:
    """`vllm-console` starts with the cyclic collector off (`console.cli.parser.main`); left off, a
    long session's reference cycles would never be freed."""
    tree = make_tree(tmp_path / "host")

    async def open_session() -> HostSession:
        return HostSession(demo_config(tree), LocalHost("demo"))

    app = ConsoleApp([PendingSession("demo", open_session)], autostart_checks=False)
    gc.disable()
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert not gc.isenabled()
            await wait_until(pilot, lambda: "demo" in app.sessions, what="the session")
            assert gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.programs
def test_every_other_command_runs_with_the_collector_on(tmp_path: Path) -> None:
    code = ("import gc, sys\n"
            "import vllm_console.console.cli.commands.init as init\n"
            "from vllm_console.console.cli.parser import main\n"
            "init.run = lambda args: print('RUN', gc.isenabled()) or 0\n"
            f"code = main(['init', '--config', {str(tmp_path / 'h.toml')!r}])\n"
            "print('AFTER', gc.isenabled(), code)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split("\n")
    assert out[:2] == ["RUN True", "AFTER True 0"]
