"""The acceptance length a server should reach, in one place, so the fleet's "far below" flag
and the spec pane agree.

Today the console knows one figure (DFlash drafters: ~6.4, `console.session.host_session`);
per-profile figures are coming to `checks/profile.py`, and this lookup is where they will be read.
"""

from __future__ import annotations

LOW_FRACTION = 0.5
"""Acceptance below this share of the expected value is flagged: 1.17 against 6.4 is a broken
drafter, 5.9 against 6.4 is a workload."""


def expected_acceptance(profile: str | None = None, method: str | None = None) -> float | None:
    """The mean acceptance length expected for a server checked with `profile` whose drafter
    is `method` (None: not known): the top of that profile's range (`checks.profile`)."""
    from checks.profile import AUTO, ProfileError, load_profile, shipped_profiles
    from checks.profile import expected_acceptance as expected_range

    acceptance = None
    if profile and profile != AUTO and profile in shipped_profiles():
        try:
            acceptance = load_profile(profile).acceptance
        except ProfileError:
            acceptance = None
    acceptance = acceptance or expected_range(method or "dflash")
    return acceptance.high if acceptance is not None else None


def far_below(mean: float | None, expected: float | None) -> bool | None:
    """True when `mean` is far below `expected`; None when either is unknown."""
    if mean is None or expected is None:
        return None
    return mean < LOW_FRACTION * expected
