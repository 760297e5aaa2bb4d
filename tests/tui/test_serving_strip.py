"""The serving picture on the host screen, on a real simulated host: the serving strip's
figures with their source and age, and a hung engine said as loudly as a crash (the header red,
with how long and why) while /health keeps answering 200."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app_support import colour_of, screen_text, theme_colour, wait_until
from tests.sim.test_sim_serve import free_port
from vllm_console.console.cli.commands.demo import demo_config
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.sim import materialise, start_background, stop
from vllm_console.console.telemetry import TelemetryOptions
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.host import HostScreen


class Served:
    def __init__(self, root: Path, scenario: str, stall_after_s: float | None = None) -> None:
        self.tree = materialise(scenario, root, port=free_port(), gpus=1, startup_s=0.5,
                                metrics_interval_s=0.3, stall_after_s=stall_after_s)
        start_background(self.tree)
        config = demo_config(self.tree)
        config = config.model_copy(update={"serve": config.serve.model_copy(
            update={"stall_s": 2.0})})
        self.session = HostSession(config, LocalHost("demo"), scenario=scenario)
        self.session.telemetry.options = TelemetryOptions(metrics_interval_s=0.5,
                                                          health_interval_s=0.3)
        self.app = ConsoleApp([self.session], autostart_checks=False)

    def screen(self) -> HostScreen:
        screen = self.app.screen_for("demo")
        assert screen is not None
        return screen


@pytest.fixture
def healthy(tmp_path: Path, state_home: Path) -> Iterator[Served]:
    served = Served(tmp_path / "host", "healthy")
    yield served
    stop(served.tree, timeout=5)


@pytest.fixture
def stalled(tmp_path: Path, state_home: Path) -> Iterator[Served]:
    served = Served(tmp_path / "host", "stalled", stall_after_s=2.5)
    yield served
    stop(served.tree, timeout=5)


def strip_lines(app: ConsoleApp, rows: int = 3) -> list[str]:
    lines = screen_text(app).splitlines()
    start = next(i for i, line in enumerate(lines) if "Serving" in line)
    return lines[start + 1:start + 1 + rows]


@pytest.mark.programs
async def test_a_serving_host_shows_its_figures_with_source_and_age(healthy: Served) -> None:
    async with healthy.app.run_test(size=(160, 50)) as pilot:
        # The engine's state needs two scrapes (1 s apart), the rates and the prefix hit rate
        # the log's first stat line (every 2 s): either may come first.
        await wait_until(pilot, lambda: healthy.screen().serving.view.latency is not None
                         and healthy.screen().serving.view.latency.get("ttft_s") is not None
                         and healthy.screen().serving.view.engine == "ok"
                         and healthy.screen().serving.view.prefix_cache_hit_pct is not None,
                         30, "the serving figures")
        load, latency, requests = strip_lines(healthy.app)
        assert "engine ok" in load
        assert "running " in load
        assert "waiting " in load
        assert "KV " in load
        assert "prompt " in load
        assert "generation " in load
        assert "tok/s" in load
        assert "prefix hit" in load  # the sim's stat line has it
        assert "[log · " in load or "[metrics · " in load
        assert "latency p50/p99 TTFT " in latency
        assert "ITL " in latency
        assert "e2e " in latency
        assert "queue " in latency
        assert "TTFT ?" not in latency
        assert "[metrics · last " in latency
        assert " ago]" in latency
        assert "preemptions 0" in requests
        assert "finished stop " in requests
        header = screen_text(healthy.app).splitlines()[0]
        assert "engine " not in header  # a serving engine is no news
        # From 50 rows, a line of trends: each figure's recent values as a sparkline.
        await wait_until(pilot, lambda: len(dict(healthy.screen().serving.view.trends)
                                            .get("generation tok/s", ())) >= 3, 20, "points")
        trend = strip_lines(healthy.app, 4)[3]
        assert "trend generation tok/s " in trend
        assert "running " in trend
        assert "TTFT p99 s " in trend
        assert sum(trend.count(c) for c in "▁▂▃▄▅▆▇█") >= 3


@pytest.mark.programs
async def test_a_short_terminal_keeps_the_strip_to_one_line(healthy: Served) -> None:
    async with healthy.app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: healthy.screen().serving.view.engine == "ok", 30,
                         "the engine serving")
        [line, border] = strip_lines(healthy.app, 2)
        assert "engine ok · " in line
        assert "run/wait" in line
        assert border.startswith("╰")
        assert "Serve log" in screen_text(healthy.app)


@pytest.mark.programs
async def test_a_hung_engine_turns_the_header_red_with_how_long_and_why(
        stalled: Served) -> None:
    async with stalled.app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: stalled.screen().serving.view.engine == "ok", 30,
                         "the engine serving")
        await wait_until(pilot, lambda: "engine stalled" in screen_text(stalled.app)
                         .splitlines()[0], 30, "the stall in the header")
        screen = stalled.screen()
        assert screen.header.engine_alert.startswith("engine stalled ")
        assert "no token generated for" in screen.header.engine_alert
        rendered = screen.header.render()
        assert colour_of(rendered, "engine stalled") == theme_colour("status-fail")
        assert stalled.session.snapshot.readiness.http_status == 200  # /health says nothing
        before = screen.header.engine_alert.split(":")[0]
        await pilot.pause(2.1)
        assert screen.header.engine_alert.split(":")[0] != before  # how long moves on
        load, _latency, requests = strip_lines(stalled.app)
        assert "engine stalled" in load
        assert "engine: " in requests
        assert "no token generated for" in requests
        # No key pressed (issue 40: the header was red, the checklist `unknown` until `c`):
        # the chain ran again with the telemetry's verdict, and runtime activation fails.
        await wait_until(pilot, lambda: (r := screen.checklist.state.report) is not None and
                         r.link("runtime-activation").status.value == "fail", 30,
                         "runtime activation failed by the stall")
        link = screen.checklist.state.report.link("runtime-activation")
        assert link.summary.startswith("the engine is stalled: ")
        assert any(e.probe == "serving" and "live telemetry" in e.command
                   for e in link.evidence)


@pytest.mark.programs
async def test_at_80x24_the_strip_is_one_line(stalled: Served) -> None:
    async with stalled.app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: "engine stalled" in screen_text(stalled.app), 40,
                         "the stall")
        lines = screen_text(stalled.app).splitlines()
        [strip] = [line for line in lines if line.startswith(" engine ")]
        assert "run/wait" in strip
        assert "p99 TTFT " in strip
        assert " e2e " in strip
        assert "engine stalled" in lines[0]  # the header too, without the reason


def test_ages_move_in_steps_so_an_idle_screen_is_not_redrawn_each_second() -> None:
    from vllm_console.widgets.serving_strip import age_step, describe_age

    assert [age_step(s) for s in (0, 4.9, 5, 12, 59, 61, 185)] == [0, 0, 5, 10, 55, 60, 180]
    assert [describe_age(age_step(s)) for s in (3, 12, 185)] == ["<5 s ago", "10 s ago",
                                                                 "3 min ago"]
    assert describe_age(None) == "none yet"


def test_the_screen_wakes_when_an_age_steps_not_every_second(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`next_change_s`: the host view's next tick. Ages move in steps (5 s, then minutes), so a
    screen left alone wakes once per step; a stall's length moves every second."""
    from vllm_console.console.telemetry.server import ServerLoad
    from vllm_console.console.telemetry.serving import EngineState, ServingStatus
    from vllm_console.console.telemetry.snapshot import HostSnapshot
    from vllm_console.console.tui import serving_figures
    from vllm_console.console.tui.serving_figures import ServingFigures

    clock = [1000.0]
    monkeypatch.setattr(serving_figures.time, "monotonic", lambda: clock[0])
    figures = ServingFigures()
    assert figures.next_change_s() is None  # nothing shown yet
    load = ServerLoad(running=2, waiting=0, at=500.0, source="log")
    figures.take(HostSnapshot("h", load=load))
    assert figures.next_change_s() == pytest.approx(5.0)
    clock[0] += 3.5
    assert figures.next_change_s() == pytest.approx(1.5)
    assert figures.view().load_age_s == 0
    clock[0] += 1.5
    assert figures.view().load_age_s == 5
    assert figures.next_change_s() == pytest.approx(5.0)
    clock[0] += 70  # 75 s old: the next step is the minute's
    assert figures.next_change_s() == pytest.approx(45.0)
    stalled = ServingStatus(progress=EngineState.STALLED, reason="no token for 30 s",
                            stalled_since=470.0, latency={"ttft_s": None}, at=500.0)
    monkeypatch.setattr(HostSnapshot, "engine_state",  # the verdict is tested on its own
                        lambda self: (EngineState.STALLED, "no token for 30 s"))
    figures.take(HostSnapshot("h", load=load, serving=stalled))
    assert figures.view().engine == "stalled"
    assert figures.next_change_s() == pytest.approx(1.0)


@pytest.mark.programs
async def test_a_restart_in_progress_is_restarting_never_dead_or_stalled(
        stalled: Served) -> None:
    """Issue 40: during a restart the header said `engine dead 0 s` (the old engine stopped
    on purpose, the API server not yet). From the confirmation to the new server, the engine
    is `restarting`: no red alarm, whatever the old engine was."""
    from vllm_console.console.tui.screens.confirm import ConfirmScreen

    async with stalled.app.run_test(size=(160, 50)) as pilot:
        screen = stalled.screen()
        await wait_until(pilot, lambda: screen.header.engine_alert.startswith(
            "engine stalled"), 40, "the stall in the header")
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(stalled.app.screen, ConfirmScreen)
                         and stalled.app.screen.focused is not None, 20, "the restart dialog")
        await pilot.press("y")
        await wait_until(pilot, lambda: screen.restarting, 10, "the restart to begin")
        seen: list[tuple[str, str]] = []

        def over() -> bool:
            if screen.restarting:
                seen.append((screen.serving.view.engine, screen.header.engine_alert))
            return not screen.restarting

        await wait_until(pilot, over, 60, "the restart to end")
        assert seen, "the restart was watched"
        assert seen[0] == ("restarting", ""), seen[0]
        assert not [s for s in seen if s[1] or s[0] in ("dead", "stalled")], seen
