"""Several hosts: the fleet table, switching hosts, and one host's failure never disturbing
another (Pilot, two real simulated hosts plus one that cannot be reached)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.app_support import make_tree, wait_until
from tests.sshd import free_port
from vllm_console.console.cli.commands.demo import demo_config
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.settings import HostConfig
from vllm_console.console.sim import start_background, stop
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.transport.ssh_host import SSHHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.fleet import COLUMNS, FleetScreen
from vllm_console.console.tui.screens.host import HostScreen

pytestmark = pytest.mark.programs  # each test starts a simulated server


@pytest.fixture
def two_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    trees = [make_tree(tmp_path / name, scenario)
             for name, scenario in (("a", "incident"), ("b", "healthy"))]
    for tree in trees:
        start_background(tree)
    sessions = []
    for name, tree in zip(("gpu-a", "gpu-b"), trees, strict=True):
        config = demo_config(tree).model_copy(update={"name": name})
        session = HostSession(config, LocalHost(name), scenario=tree.scenario)
        # A scrape a second: the serving columns need a request finished between two.
        session.telemetry.options = replace(session.telemetry.options, metrics_interval_s=1.0)
        sessions.append(session)
    # A third host nobody answers for: its link must fail alone.
    dead = HostConfig(name="gpu-dead", hostname="127.0.0.1", port=free_port(),
                      known_hosts=str(tmp_path / "known_hosts"))
    sessions.append(HostSession(dead, SSHHost(dead, connect_timeout=2)))
    yield sessions
    for tree in trees:
        stop(tree, timeout=5)


async def test_fleet_table_switching_and_isolation(two_hosts: list[HostSession]) -> None:
    app = ConsoleApp(two_hosts)
    async with app.run_test(size=(160, 50)) as pilot:
        assert isinstance(app.screen, FleetScreen)
        table = app.screen.query_one("DataTable")
        assert table.row_count == 3

        def row(name: str) -> dict[str, str]:
            return dict(zip(COLUMNS, [str(c) for c in table.get_row(name)], strict=True))

        await wait_until(pilot, lambda: row("gpu-a")["link"] == "connected"
                         and row("gpu-b")["link"] == "connected", what="two live hosts")
        accept = "acceptance length"
        await wait_until(pilot, lambda: row("gpu-a")[accept] != "—"
                         and row("gpu-b")[accept] != "—", 30, "acceptance on both")
        assert float(row("gpu-a")[accept]) < 2.0
        assert float(row("gpu-b")[accept]) > 5.0
        # The serving columns: the engine's state, TTFT p99 over the window, running/waiting.
        await wait_until(pilot, lambda: row("gpu-b")["engine"] == "ok"
                         and row("gpu-b")["TTFT p99"] != "—", 30, "gpu-b serving")
        assert row("gpu-b")["TTFT p99"].endswith(("ms", " s"))
        assert "/" in row("gpu-b")["run/wait"]
        assert row("gpu-dead")["engine"] == "unknown"
        assert row("gpu-dead")["link"] != "connected"
        await wait_until(pilot, lambda: row("gpu-a")["broken link"] == "runtime-activation",
                         30, "the broken link of gpu-a")
        assert row("gpu-a")["root cause"] == "config-correct"
        assert row("gpu-a")["serve"] == "ready"
        assert row("gpu-a")["last check"].endswith("s ago")
        table.move_cursor(row=1)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and app.screen.host_name == "gpu-b", what="gpu-b's screen")
        screen = app.screen
        assert isinstance(screen, HostScreen)
        await wait_until(pilot, lambda: screen.gpus.view.sample is not None, what="a sample")
        await wait_until(pilot, lambda: screen.log_pane.entry_count > 10, what="its log")
        assert app.current == "gpu-b"
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen), what="fleet")
        table.move_cursor(row=0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen)
                         and app.screen.host_name == "gpu-a", what="gpu-a's screen")
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen), what="fleet")
        assert len(app.screen_stack) == 2, "switching hosts must not pile up screens"
        before = two_hosts[0].snapshot.sample
        await pilot.pause(2.5)
        assert two_hosts[0].snapshot.sample is not before, "gpu-a's telemetry stalled"
