"""Leaving the console ends its work before the event loop does. A worker still starting a
process when the loop's own teardown cancels every task waits forever: asyncio cancels its
pipe-connecting task too, and the half-made process transport never finishes (seen: a restart
worker's `tail` at the end of a test, 15 s into the loop's teardown). `q` must always give the
shell back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.app_support import SimApp
from vllm_console.console.transport.local_host import LocalHost

pytestmark = pytest.mark.programs  # each test starts a simulated server

SIZE = (120, 40)


async def test_no_worker_is_left_starting_a_process_when_the_app_has_exited(
        tmp_path: Path) -> None:
    sim = SimApp(tmp_path / "host")
    host = LocalHost("here")

    async def draining() -> None:
        """Like the restart worker: cancelled, it still reads what the log holds (`tail`)."""
        try:
            await asyncio.sleep(3600)
        finally:
            for _ in range(40):
                await host.run(["true"], timeout=30)

    try:
        for attempt in range(5):
            async with sim.app.run_test(size=SIZE) as pilot:
                for _ in range(3):
                    sim.app.run_worker(draining(), group="draining", exit_on_error=False)
                await pilot.pause(0.3)
            # What asyncio.run does as the loop closes: cancel every task left, wait for them.
            left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in left:
                task.cancel()
            if left:
                _, pending = await asyncio.wait(left, timeout=10)
                assert not pending, f"attempt {attempt}: still waiting: {pending}"
            sim.app = type(sim.app)([sim.session])
    finally:
        sim.close()
