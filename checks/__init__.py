"""The verification chain: code present -> fields extracted -> runtime activation -> config
correct, with evidence and a root cause. Headless: never imports textual.

    from vllm_console.checks import load_profile, run_chain
    report = await run_chain(host, host_config.serve)   # the profile for the engine's method
    report = await run_chain(host, host_config.serve, profile=load_profile("eagle3"))
    report.to_json()      # the `check --json` object; `profile` names the one that judged
    report.exit_code      # 0 OK, 1 WARNING, 2 CRITICAL (the monitoring-plugin convention)

Profiles are TOML data (`checks/profiles/`, one per speculative method; `checks.select` picks
one), trace lines are defined in `checks.trace`. `expected_acceptance(method)` is the range a
method's profile expects, for the panes and the fleet table.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_console.checks.chain import run_chain
    from vllm_console.checks.models import LINK_IDS, ChainReport, Evidence, LinkResult, Status
    from vllm_console.checks.profile import (
        Acceptance,
        Profile,
        ProfileError,
        expected_acceptance,
        load_profile,
        shipped_profiles,
    )
    from vllm_console.checks.references import Reference, ReferenceError, load_reference_file

# Each name is imported from its module on first use (PEP 562): the console's checklist widget
# needs `checks.models` for its first frame, not the profiles and references (pydantic models
# read from TOML) nor `run_chain` (discovery, the probes, the host scripts).
_WHERE = {
    **dict.fromkeys(("LINK_IDS", "ChainReport", "Evidence", "LinkResult", "Status"),
                    "vllm_console.checks.models"),
    **dict.fromkeys(("Acceptance", "Profile", "ProfileError", "expected_acceptance",
                     "load_profile", "shipped_profiles"), "vllm_console.checks.profile"),
    **dict.fromkeys(("Reference", "ReferenceError", "load_reference_file"),
                    "vllm_console.checks.references"),
    "run_chain": "vllm_console.checks.chain",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
