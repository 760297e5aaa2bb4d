"""The acceptance range a server should reach, for the fleets: `checks.profile`'s rule (the
configured profile's range, else the method's), and `Acceptance.is_low`, the chain's flag."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_console.checks.profile import Acceptance


def expected_acceptance(profile: str | None = None, method: str | None = None
                        ) -> Acceptance | None:
    """The range for a server checked with `profile` whose drafter is `method` (None: not
    known, DFlash assumed: the console's incident)."""
    from vllm_console.checks.profile import expected_acceptance as expected_range

    return expected_range(method or "dflash", profile)


def far_below(mean: float | None, expected: Acceptance | None) -> bool | None:
    """True when `mean` is below the expected range; None when either is unknown."""
    return None if expected is None else expected.is_low(mean)
