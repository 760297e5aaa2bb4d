"""The verification chain: code present -> fields extracted -> runtime activation -> config
correct, with evidence and a root cause. Headless: never imports textual.

    from checks import load_profile, run_chain
    report = await run_chain(host, host_config.serve)   # the profile for the engine's method
    report = await run_chain(host, host_config.serve, profile=load_profile("eagle3"))
    report.to_json()      # the `check --json` object; `profile` names the one that judged
    report.exit_code      # 0 OK, 1 WARNING, 2 CRITICAL (the monitoring-plugin convention)

Profiles are TOML data (`checks/profiles/`, one per speculative method; `checks.select` picks
one), trace lines are defined in `checks.trace`. `expected_acceptance(method)` is the range a
method's profile expects, for the panes and the fleet table.
"""

from typing import TYPE_CHECKING, Any

from checks.models import LINK_IDS, ChainReport, Evidence, LinkResult, Status
from checks.profile import (
    Acceptance,
    Profile,
    ProfileError,
    expected_acceptance,
    load_profile,
    shipped_profiles,
)
from checks.references import Reference, ReferenceError, load_reference_file

if TYPE_CHECKING:
    from checks.chain import run_chain


def __getattr__(name: str) -> Any:
    # `run_chain` pulls in discovery, the probes and the host scripts: loaded on first use, so
    # that the console's first frame does not wait for it.
    if name == "run_chain":
        from checks.chain import run_chain

        return run_chain
    raise AttributeError(f"module 'checks' has no attribute {name!r}")


__all__ = [
    "LINK_IDS",
    "Acceptance",
    "ChainReport",
    "Evidence",
    "LinkResult",
    "Profile",
    "ProfileError",
    "Reference",
    "ReferenceError",
    "Status",
    "expected_acceptance",
    "load_profile",
    "load_reference_file",
    "run_chain",
    "shipped_profiles",
]
