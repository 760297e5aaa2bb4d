"""The acceptance length a server should reach, in one place, so the fleet's "far below" flag
and the spec pane agree.

Today the console knows one figure (DFlash drafters: ~6.4, `console.session`); per-profile
figures are coming to `checks/profile.py`, and this lookup is where they will be read.
"""

from __future__ import annotations

LOW_FRACTION = 0.5
"""Acceptance below this share of the expected value is flagged: 1.17 against 6.4 is a broken
drafter, 5.9 against 6.4 is a workload."""


def expected_acceptance(profile: str | None = None, method: str | None = None) -> float | None:
    """The mean acceptance length expected for a server checked with `profile` whose drafter
    is `method` (None: not known)."""
    from console.session import EXPECTED_ACCEPTANCE  # the session pulls in the restart code

    del profile  # one figure per drafter method until profiles carry their own
    return EXPECTED_ACCEPTANCE.get(method or "dflash")


def far_below(mean: float | None, expected: float | None) -> bool | None:
    """True when `mean` is far below `expected`; None when either is unknown."""
    if mean is None or expected is None:
        return None
    return mean < LOW_FRACTION * expected
