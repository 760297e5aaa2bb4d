"""A test that starts a real part (a Prometheus, a terminal in tmux, an sshd, a Docker daemon)
carries that part's tier marker, so the developer's loop (`make check`, which deselects those
tiers) never runs it on a machine that has not installed the part. Tests that ask for the
session's fixtures get their marker from tests/conftest.py; this catches a module that starts
the part itself and forgot its `pytestmark` (seen: the backfilled-Prometheus fleet tests erred
in `make check` on a machine without promtool). And the loop runs in the test's process: a
test that starts any program is `programs` (tests/conftest.py watches for it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# What a test module calls to start the part, and the tier that part belongs to.
STARTERS = {"running_prometheus": "prometheus", "start_prometheus": "prometheus",
            "Terminal": "tmux", "start_sshd": "ssh", "start_dockerd": "docker"}


def test_a_test_that_starts_a_real_part_carries_its_tier(request: pytest.FixtureRequest) -> None:
    unmarked = sorted({
        f"{item.nodeid.split('::')[0]} (uses {name}, not marked {tier})"
        for item in request.session.items
        for name, tier in STARTERS.items()
        if name in getattr(getattr(item, "module", None), "__dict__", {})
        and item.get_closest_marker(tier) is None})
    assert not unmarked, unmarked


@pytest.mark.programs
def test_a_fast_test_that_starts_a_program_fails_naming_the_marker() -> None:
    """The loop stays in the test's process: a test of it that starts a program (the host's
    helpers, a simulated server, the CLI, a shell) fails and says which marker it lacks."""
    probes = Path(__file__).with_name("tier_probes.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         str(probes)], capture_output=True, text=True, timeout=120, cwd=probes.parent.parent)
    assert done.returncode == 1, done.stdout[-2000:]
    # The first fails; the second, whose module's fixture then starts a program in its
    # teardown, passes; so does the third, the first to import asyncssh (which runs ldconfig,
    # gcc and ld at import: a file of the suite run alone had its first SSH test blamed).
    assert "1 failed, 2 passed" in done.stdout, done.stdout[-2000:]
    assert "FAILED tests/tier_probes.py::test_a_fast_test_that_starts_a_program\n" in \
        done.stdout
    assert "started 1 program(s), the first: subprocess.Popen" in done.stdout
    assert "mark it `programs`" in done.stdout
