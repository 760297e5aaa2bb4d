"""Running the real app on a real simulated host (LocalHost) for Pilot tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from console.app import ConsoleApp
from console.commands.demo import demo_config, free_port
from console.local_host import LocalHost
from console.session import HostSession
from console.sim import SimTree, materialise, start_background, stop


def make_tree(root: Path, scenario: str = "incident") -> SimTree:
    return materialise(scenario, root, port=free_port(), gpus=2, startup_s=0.5,
                       metrics_interval_s=0.3, color=True)


class SimApp:
    """A started simulated host and a console app on it; `close()` stops the host."""

    def __init__(self, root: Path, scenario: str = "incident", *, readonly: bool = False,
                 export_dir: Path | None = None) -> None:
        self.tree = make_tree(root, scenario)
        start_background(self.tree)
        self.session = HostSession(demo_config(self.tree, readonly=readonly),
                                   LocalHost("demo"), scenario=scenario)
        self.app = ConsoleApp([self.session], export_dir=export_dir)

    def close(self) -> None:
        stop(self.tree, timeout=5)


def screen_text(app: ConsoleApp) -> str:
    """What the terminal shows now, as text (one line per row)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def wait_until(pilot, predicate: Callable[[], object], timeout: float = 20.0,  # type: ignore[no-untyped-def]
                     what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")


async def settle(seconds: float) -> None:
    await asyncio.sleep(seconds)
