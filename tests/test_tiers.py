"""A test that starts a real part (a Prometheus, a terminal in tmux, an sshd, a Docker daemon)
carries that part's tier marker, so the developer's loop (`make check`, which deselects those
tiers) never runs it on a machine that has not installed the part. Tests that ask for the
session's fixtures get their marker from tests/conftest.py; this catches a module that starts
the part itself and forgot its `pytestmark` (seen: the backfilled-Prometheus fleet tests erred
in `make check` on a machine without promtool)."""

from __future__ import annotations

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
