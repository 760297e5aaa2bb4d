"""`s` on a stalled engine (the simulated host's `stalled` scenario, whose py-spy stand-in prints
real py-spy's format for the simulated processes): the header offers the key, the stacks screen
shows one section per process with the innermost vLLM frame marked, and the second dump marks
the EngineCore's main thread as not moved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app_support import screen_text, wait_until
from tests.tui.test_serving_strip import Served
from vllm_console.console.hostclient.stacks_text import unmoved
from vllm_console.console.sim import stop
from vllm_console.console.tui.screens.stacks import StacksScreen


@pytest.fixture
def stalled(tmp_path: Path, state_home: Path) -> Iterator[Served]:
    served = Served(tmp_path / "host", "stalled", stall_after_s=2.5)
    yield served
    stop(served.tree, timeout=5)


@pytest.mark.programs
async def test_the_stalled_header_offers_the_stacks_and_they_show_a_still_engine(
        stalled: Served) -> None:
    async with stalled.app.run_test(size=(160, 60)) as pilot:
        await wait_until(pilot, lambda: "engine stalled" in screen_text(stalled.app)
                         .splitlines()[0], 40, "the stall in the header")
        assert "[s stacks]" in screen_text(stalled.app).splitlines()[0]
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(stalled.app.screen, StacksScreen)
                         and stalled.app.screen.dumps >= 2, 40, "two dumps")
        screen = stalled.app.screen
        assert isinstance(screen, StacksScreen)
        report = screen.report
        assert report is not None
        assert report.exit_status == 0, report
        assert report.tool is not None
        assert report.tool["path"] == str(stalled.tree.python.parent / "py-spy")
        roles = {p.role: p for p in report.processes}
        assert set(roles) == {"api-server", "engine-core"}
        core = roles["engine-core"]
        main = core.threads[0]
        assert main.name == "MainThread"
        assert main.frames[main.innermost_vllm or 0].file == "vllm/distributed/utils.py"
        assert any(f.function == "EngineCore.step" for f in main.frames)
        assert (core.pid, main.id) in unmoved(screen.previous, report)
        text = screen_text(stalled.app)
        assert f"engine-core pid {core.pid}: VLLM::EngineCore" in text
        assert "> sched_yield (vllm/distributed/utils.py:46)" in text
        assert "NOT MOVED since the last dump" in text
        await pilot.press("escape")
        assert not isinstance(stalled.app.screen, StacksScreen)


@pytest.mark.programs
async def test_the_bundle_of_a_stalled_engine_carries_stacks_and_collect_env(
        stalled: Served, tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    async with stalled.app.run_test(size=(160, 60)) as pilot:
        stalled.screen().export_dir = exports
        await wait_until(pilot, lambda: stalled.session.snapshot.engine_state()[0].value
                         == "stalled", 40, "the stall")
        await pilot.press("x")
        await wait_until(pilot, lambda: list(exports.glob("*.json")), 60, "the bundle")
    (bundle,) = exports.glob("*.json")
    data = json.loads(bundle.read_text())
    stacks = data["diagnostics"]["stacks"]
    roles = {p["role"]: p for p in stacks["processes"]}
    assert set(roles) == {"api-server", "engine-core"}
    files = [f["file"] for f in roles["engine-core"]["threads"][0]["frames"]]
    assert "vllm/v1/engine/core.py" in files
    assert stacks["watchdog_dumps"] == []
    env = data["diagnostics"]["collect_env"]
    assert env["exit"] == 0, env
    assert env["command"].endswith("-m vllm.collect_env")
    assert "vLLM Version" in env["output"]
    assert "NVIDIA H200" in env["output"]
