"""The console on a host with three simulated servers (through the test sshd), driven by
Pilot: the header says which of how many; the switcher (`p`, and the command palette) lists
them; choosing one moves every pane to it; `r` restarts that one alone; when it exits, the
screen says so rather than follow another. The host: `tests/several_support.py`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList

from tests.app_support import screen_text, wait_until
from tests.real_vllm.support import cli
from tests.several_support import Three, host_config, launch, pid_on, three_servers
from tests.sshd import Sshd, chown_to, free_port
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.settings import ServeSettings
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.tree import SimTree, materialise
from vllm_console.console.telemetry import host_telemetry
from vllm_console.console.transport.ssh_host import SSHHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.host import HostScreen
from vllm_console.console.tui.screens.restart import RestartScreen
from vllm_console.console.tui.screens.servers import ServerSwitcher

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(300)]

SIZE = (160, 50)


@pytest.fixture(scope="module")
def three(sshd: Sshd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Three]:
    yield from three_servers(sshd, tmp_path_factory)


def screen(app: ConsoleApp) -> HostScreen:
    found = app.screen_for("sshd-test")
    assert found is not None
    return found


@pytest.mark.usefixtures("state_home")
async def test_the_palette_offers_the_switcher(three: Three, tmp_path: Path) -> None:
    config = host_config(three)
    session = HostSession(config, SSHHost(config))
    app = ConsoleApp([session], export_dir=tmp_path / "exports")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "server 1 of 3" in screen_text(app), 60, "the header")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Host screen: Servers" in titles
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"Host screen: Servers")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ServerSwitcher), 10,
                         "the switcher")


@pytest.mark.usefixtures("state_home")
async def test_status_and_the_tui_count_the_servers_match_admits(
        three: Three, tmp_path: Path) -> None:
    """A fourth server outside the entry's `match`: `status` (its JSON list and its line)
    and the TUI (header and switcher) count the same three, and `status` says what it left
    out."""
    outside = materialise("healthy", three.sshd.user_dir("outside") / "healthy",
                          port=free_port(), startup_s=0.3, metrics_interval_s=0.3)
    chown_to(outside.root.parent, three.sshd.user)
    launch(outside, three.sshd.user)
    try:
        assert wait_ready(outside, None, timeout=30), outside.log.read_text()
        ports = [tree.port for tree in three.trees]
        done = cli("status", "multi", "--config", str(three.hosts), "--json")
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert [s["port"] for s in data["servers"]] == ports
        text = cli("status", "multi", "--config", str(three.hosts))
        assert f"servers 3 vLLM servers on this host: this is :{ports[0]}" in text.stdout
        assert any(line.startswith("note") and f":{outside.port}" in line and "match" in line
                   for line in text.stdout.splitlines()), text.stdout

        config = host_config(three)
        session = HostSession(config, SSHHost(config))
        app = ConsoleApp([session], export_dir=tmp_path / "exports")
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: f"server 1 of 3 · :{ports[0]}" in screen_text(app),
                             60, "the header's server 1 of 3")
            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, ServerSwitcher), 10,
                             "the switcher")
            assert app.screen.query_one(OptionList).option_count == len(data["servers"])
            assert f":{outside.port}" not in screen_text(app)
    finally:
        stop(outside, timeout=3)


@pytest.mark.usefixtures("state_home")
async def test_the_switcher_moves_every_pane_and_r_restarts_that_server_alone(
        three: Three, tmp_path: Path) -> None:
    """Last in the module: it restarts the second server, then stops it."""
    first, second, third = three.trees
    config = host_config(three)
    session = HostSession(config, SSHHost(config))
    app = ConsoleApp([session], export_dir=tmp_path / "exports")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: f"server 1 of 3 · :{first.port}" in screen_text(app),
                         60, "the header's server 1 of 3")
        assert session.snapshot.serve.pid == three.pid(first)
        await wait_until(pilot, lambda: screen(app).checklist.state.report is not None
                         and not screen(app).checklist.state.running, 60, "the first checks")
        verdicts = {link.id: link.status.value
                    for link in screen(app).checklist.state.report.links}  # type: ignore[union-attr]
        assert verdicts["config-correct"] == "pass"  # healthy

        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(app.screen, ServerSwitcher), 10,
                         "the switcher")
        listed = screen_text(app)
        for tree in three.trees:
            assert f":{tree.port}" in listed
            assert tree.target.name in listed
        assert "ready" in listed
        assert "bare process" in listed
        options = app.screen.query_one(OptionList)
        assert options.option_count == 3
        await pilot.press("down", "enter")

        await wait_until(pilot, lambda: f"server 2 of 3 · :{second.port}" in screen_text(app),
                         60, "the header's server 2 of 3")
        await wait_until(pilot, lambda: session.snapshot.serve.pid == three.pid(second), 30,
                         "the second server")
        assert session.snapshot.serve.log == str(second.log)
        await wait_until(pilot, lambda: screen(app).engine.view.current is not None, 30,
                         "the engine config of the second server")
        model = screen(app).engine.view.current.model or ""  # type: ignore[union-attr]
        assert str(second.root) in model
        lines = "\n".join(screen(app).log_pane.visible_lines())
        assert str(second.root) in lines
        assert str(first.root) not in lines  # nothing of the first server's log is left
        await wait_until(pilot, lambda: screen(app).checklist.state.report is not None
                         and not screen(app).checklist.state.running, 60, "its checks")
        verdicts = {link.id: link.status.value
                    for link in screen(app).checklist.state.report.links}  # type: ignore[union-attr]
        assert verdicts["config-correct"] == "fail"  # the incident's draft config

        before = {tree.port: three.identity(tree) for tree in three.trees}
        for _ in range(4):  # the plan is a discovery on the host: slow on a loaded machine
            await pilot.press("r")
            with contextlib.suppress(AssertionError):
                await wait_until(pilot, lambda: isinstance(app.screen, RestartScreen)
                                 and app.screen.focused is not None, 30)
            if isinstance(app.screen, RestartScreen):
                break
        assert isinstance(app.screen, RestartScreen)
        assert app.screen.plan.pid == before[second.port][0]
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: three.identity(second)[0] not in
                         (0, before[second.port][0]) and not screen(app).restarting, 90,
                         "the restart")
        assert three.identity(first) == before[first.port]
        assert three.identity(third) == before[third.port]

        stop(second, timeout=5)
        await wait_until(pilot, lambda: f"server :{second.port} exited" in screen_text(app)
                         or f"server :{second.port} is not running" in screen_text(app),
                         60, "the screen saying the server exited")
        assert session.snapshot.serve.pid != three.pid(first)
        assert session.snapshot.serve.pid != three.pid(third)


@pytest.fixture
def appearing(sshd: Sshd) -> Iterator[tuple[Path, list[SimTree]]]:
    """Three simulated servers of their own directory, none started: the test starts and
    stops them while the console watches. Ports rise: the first is the lowest."""
    if sshd.proc is None:
        sshd.start()
    base = sshd.user_dir("appear")
    ports = sorted(free_port() for _ in range(3))
    trees = [materialise("healthy", base / f"s{n}", port=port, startup_s=0.3,
                         metrics_interval_s=0.3) for n, port in enumerate(ports)]
    chown_to(base, sshd.user)
    try:
        yield base, trees
    finally:
        for tree in trees:
            stop(tree, timeout=3)


@pytest.mark.usefixtures("state_home")
async def test_servers_that_appear_and_exit_while_the_console_watches(
        sshd: Sshd, appearing: tuple[Path, list[SimTree]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The list follows the host (header and switcher); the server the view shows stays
    shown while it lives, though a new one on a lower port appears; when it exits, the screen
    says so and follows no other."""
    monkeypatch.setattr(host_telemetry, "SERVERS_LOOK_S", 2.0)  # the test's patience, not the rule
    base, (low, middle, high) = appearing
    launch(middle, sshd.user)
    assert wait_ready(middle, None, timeout=30), middle.log.read_text()
    serve = ServeSettings(match=f"{base}/ serve")
    config = sshd.host_config(serve=serve.model_dump(),
                              gpu={"nvidia_smi": str(middle.nvidia_smi)})
    session = HostSession(config, SSHHost(config))
    app = ConsoleApp([session], export_dir=tmp_path / "exports")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: session.snapshot.serve.pid == pid_on(base, middle.port),
                         60, "the one server")
        chosen = session.snapshot.serve.pid
        assert "server 1 of" not in screen_text(app)  # one server: nothing to count

        # A server appears on a lower port: counted, listed, and the view stays put.
        launch(low, sshd.user)
        assert wait_ready(low, None, timeout=30), low.log.read_text()
        await wait_until(pilot, lambda: f"server 2 of 2 · :{middle.port}" in screen_text(app),
                         60, "the header counting the new server")
        assert session.snapshot.serve.pid == chosen
        # A third, above: counted too.
        launch(high, sshd.user)
        assert wait_ready(high, None, timeout=30), high.log.read_text()
        await wait_until(pilot, lambda: f"server 2 of 3 · :{middle.port}" in screen_text(app),
                         60, "the header counting three")
        assert session.snapshot.serve.pid == chosen
        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(app.screen, ServerSwitcher), 10,
                         "the switcher")
        listed = screen_text(app)
        assert all(f":{tree.port}" in listed for tree in (low, middle, high))
        assert app.screen.query_one(OptionList).option_count == 3
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen), 10, "back")

        # Another one exits: the count drops, the view stays.
        stop(low, timeout=5)
        await wait_until(pilot, lambda: f"server 1 of 2 · :{middle.port}" in screen_text(app),
                         60, "the header after one exited")
        assert session.snapshot.serve.pid == chosen

        # The chosen one exits: the screen says so, and shows no other in its place.
        stop(middle, timeout=5)
        await wait_until(pilot, lambda: f"server :{middle.port} exited" in screen_text(app),
                         60, "the screen saying the server exited")
        await pilot.pause(3)
        assert f"server :{middle.port} exited" in screen_text(app)
        assert session.snapshot.serve.pid != pid_on(base, high.port)


@pytest.mark.usefixtures("state_home")
async def test_a_restart_that_moves_the_port_keeps_the_view_on_that_server(
        sshd: Sshd, appearing: tuple[Path, list[SimTree]], tmp_path: Path) -> None:
    """The view keeps to its server's port (above); a restart whose edited command line asks
    for another port moves the view with it, never "exited"."""
    base, (_low, tree, _high) = appearing
    launch(tree, sshd.user)
    assert wait_ready(tree, None, timeout=30), tree.log.read_text()
    serve = ServeSettings(match=f"{base}/ serve")
    config = sshd.host_config(serve=serve.model_dump(), gpu={"nvidia_smi": str(tree.nvidia_smi)})
    session = HostSession(config, SSHHost(config))
    app = ConsoleApp([session], export_dir=tmp_path / "exports")
    moved = free_port()
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: session.snapshot.serve.pid == pid_on(base, tree.port)
                         and session.snapshot.watched_port == tree.port, 60, "the server")
        for _ in range(4):  # the plan is a discovery on the host: slow on a loaded machine
            await pilot.press("r")
            with contextlib.suppress(AssertionError):
                await wait_until(pilot, lambda: isinstance(app.screen, RestartScreen)
                                 and app.screen.focused is not None, 30)
            if isinstance(app.screen, RestartScreen):
                break
        dialog = app.screen
        assert isinstance(dialog, RestartScreen)
        await pilot.press("e")
        field = dialog.query_one("#restart-argv", Input)
        field.focus()
        await pilot.press("end", *f" --port {moved}")
        await wait_until(pilot, lambda: str(moved) in dialog.plan.argv, 10, "the edit")
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: session.snapshot.serve.running
                         and session.snapshot.serve.pid == _pid_or_0(base, moved), 90,
                         "the view on the server's new port")
        assert session.snapshot.watched_port == moved
        # (while the old one was gone and the new not yet up, the header may have said so)
        await wait_until(pilot, lambda: "exited" not in screen_text(app), 15,
                         "the header no longer saying the server exited")


def _pid_or_0(base: Path, port: int) -> int:
    try:
        return pid_on(base, port)
    except AssertionError:
        return 0
