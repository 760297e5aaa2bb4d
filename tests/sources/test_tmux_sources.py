"""The SSH-free modes in a real terminal (tmux, 200x50): `vllm-console --url URL` and
`vllm-console fleet --prometheus URL`, with Enter on a row opening that server and `q` coming
back to the table."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from tests.fleet_support import FleetWorld
from tests.tmux import Terminal, app_env

pytestmark = pytest.mark.tmux

CONSOLE = [sys.executable, "-m", "vllm_console"]
ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture
def world(prometheus_world: FleetWorld) -> FleetWorld:
    return prometheus_world


def terminal(tmp_path: Path, *args: str) -> Terminal:
    env = {**app_env(), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": ROOT}
    return Terminal([*CONSOLE, *args], width=200, height=50, env=env).start()


def test_url_only_console(world: FleetWorld, tmp_path: Path) -> None:
    term = terminal(tmp_path, "--url", f"http://{world.incident}")
    try:
        screen = term.wait_for(f"URL only: http://{world.incident}", timeout=20)
        # What needs the host is one line; what the URL gives gets the room.
        assert "needs SSH: GPUs, serve log, engine config, checks" in screen
        screen = term.wait_for(lambda s: re.search(r"acceptance length 1\.[0-5]\d", s)
                               is not None, timeout=30)
        # The latency table (issue 40), since start-up or over the window, and says which.
        screen = term.wait_for(lambda s: "engine ok" in s and re.search(
            r"TTFT +[\d.]+ m?s +[\d.]+ m?s", s) is not None and re.search(
            r"metrics · (last \d+ s|since start-up)", s) is not None, timeout=30)
        assert "[metrics · " in screen
        assert re.search(r"decode +\d", screen)
        term.keys("q")
        term.wait_for(lambda s: not term.alive(), timeout=10)
    finally:
        term.stop()


def test_fleet_table_enter_and_back(world: FleetWorld, tmp_path: Path) -> None:
    term = terminal(tmp_path, "fleet", "--prometheus", world.prom.url)
    try:
        screen = term.wait_for(lambda s: "3/3 servers" in s and "LOW (expect ~6.4)" in s,
                               timeout=20)
        assert "LOW (expect ~6.4)" in screen
        assert "DOWN" in screen
        assert "no dcgm" in screen
        # At 200 columns no header is cut.
        for title in ("accept len", "draft acc", "gen tok/s", "GPU util", "GPU mem", "flag"):
            assert title in screen, title
        # The first key can come before the app reads its terminal: press until it shows.
        deadline = time.monotonic() + 10
        while "filter: words in any cell" not in term.screen():
            assert time.monotonic() < deadline, "the filter box never opened"
            term.keys("/")
            time.sleep(0.3)
        # The words go in once the box shows them (under load the box can open before it
        # has the focus, and keys typed then go to the table: a CI run lost them so).
        for _ in range(5):
            term.keys("C-u")  # a "/" of a press that raced the box's first paint, if any
            term.keys("-l", "low")
            try:
                term.wait_for(lambda s: "low" in s.replace("LOW", "")
                              and "filter: words in any cell" not in s, timeout=3)
                break
            except AssertionError:
                continue
        term.keys("Enter")
        screen = term.wait_for("1/3 servers", timeout=10)
        assert world.incident in screen
        assert world.healthy not in screen
        term.keys("Enter")  # the URL-only console of that server
        term.wait_for(lambda s: f"URL only: http://{world.incident}" in s
                      and "acceptance length" in s, timeout=30)
        term.keys("q")  # back to the table, filter kept
        screen = term.wait_for("1/3 servers", timeout=20)
        assert "filter: low" in screen
        term.keys("q")
        term.wait_for(lambda s: not term.alive(), timeout=10)
    finally:
        term.stop()


def test_hosts_file_url_entries_in_the_fleet_table(world: FleetWorld, tmp_path: Path) -> None:
    """`vllm-console` alone with two URL-only entries: the SSH fleet table, both ready."""
    config = tmp_path / "config" / "vllm-console" / "hosts.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[hosts.gpu-a]\nurl = "http://{world.incident}"\n'
                      f'[hosts.gpu-b]\nurl = "http://{world.healthy}"\n')
    term = terminal(tmp_path)
    try:
        screen = term.wait_for(lambda s: s.count(" ready ") >= 2, timeout=20)
        assert "gpu-a" in screen
        assert "gpu-b" in screen
        for title in ("serve", "root cause", "last check"):
            assert title in screen, title
    finally:
        term.stop()
