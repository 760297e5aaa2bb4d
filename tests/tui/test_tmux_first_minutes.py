"""A new user's first ten minutes, in a real terminal of the sizes they have (80x24, 120x36):
the venv's `vllm-console demo`, the story keys (`a` apply the reference, `r` restart, `R`
traced restart), `?`, `/`, `q`. No error, no dead key, nothing left running, and nothing
written outside the demo's own directory: HOME and the XDG directories point into the test's,
and stay empty (the user asked for no setting)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.tmux import Terminal, app_env, demo_processes

pytestmark = pytest.mark.tmux

VLLM_CONSOLE = str(Path(sys.executable).parent / "vllm-console")
"""The venv's command, as the README's `make demo` runs it."""
FAILURES = ("Traceback", "restart error", "restart failed", "could not run", "Error:")


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def no_failure(screen: str) -> str:
    for failure in FAILURES:
        assert failure not in screen, f"{failure!r} on screen:\n{screen}"
    return screen


def header(screen: str) -> str:
    return screen.splitlines()[0]


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
def test_a_new_users_first_ten_minutes(tmp_path: Path, size: tuple[int, int]) -> None:
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    env = app_env()
    env.update(HOME=str(home), TMPDIR=str(temp), XDG_CONFIG_HOME="", XDG_STATE_HOME="")
    width, height = size
    term = Terminal([VLLM_CONSOLE, "demo"], width=width, height=height, env=env).start()
    try:
        # The story on screen: acceptance far below the expected, the root cause named.
        screen = term.wait_for(lambda s: "acceptance length 1." in s and "ROOT CAUSE" in s
                               and "serve: ready" in header(s), timeout=60)
        no_failure(screen)
        assert "mask_token_id" in screen  # the root cause row says what to fix
        footer = screen.splitlines()[-1]
        assert "q Quit" in footer, footer
        assert "? Help" in footer, footer
        assert max(len(line) for line in screen.splitlines()) <= width

        term.keys("?")  # every key
        term.wait_for("Keys", timeout=10)
        term.keys("Escape")
        term.wait_for(lambda s: "Keys" not in s and "ROOT CAUSE" in s, timeout=10)

        term.keys("3")  # the checklist maximised: each link's summary, then back
        term.wait_for("3 field(s) differ", timeout=10)
        term.keys("/", "SpecDecoding", "Enter")  # search from there: typed, never run
        screen = term.wait_for("search /SpecDecoding/", timeout=10)
        assert "theme:" not in screen
        term.keys("Escape")  # the search cleared (waited for: ESC then `a` reads as alt+a)
        term.wait_for(lambda s: "search /" not in s, timeout=10)

        term.keys("a")  # apply the reference, confirmed
        term.wait_for("Apply the reference draft config?", timeout=15)
        term.keys("y")
        term.wait_for("draft config written", timeout=15)

        term.keys("r")  # restart: the fixed config is loaded, acceptance climbs
        term.wait_for("Restart vllm serve?", timeout=30)
        term.keys("y")
        screen = term.wait_for(lambda s: "vllm serve is back" in s
                               or "acceptance length 6." in s, timeout=90)
        no_failure(screen)
        screen = term.wait_for(lambda s: "acceptance length 6." in s
                               and "serve: ready" in header(s), timeout=90)
        no_failure(screen)

        term.keys("R")  # traced restart: runtime activation gets its verdict
        term.wait_for("with the activation trace?", timeout=30)
        term.keys("y")
        screen = term.wait_for(lambda s: "runtime activation pass" in " ".join(s.split())
                               and "serve: ready" in header(s), timeout=120)
        no_failure(screen)
        assert "ROOT CAUSE" not in screen

        assert term.quit(timeout=20), "q did not quit"
    finally:
        term.stop()
    deadline = time.monotonic() + 15
    while demo_processes(temp) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert demo_processes(temp) == [], "the demo left something running"
    assert files_under(home) == [], "the demo wrote outside its own directory"
    assert list(temp.iterdir()) == [], "the demo left its directory behind"
