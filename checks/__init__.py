"""The verification chain: code present -> fields extracted -> runtime activation -> config
correct, with evidence and a root cause. Headless: never imports textual.

    from checks import load_profile, run_chain
    report = await run_chain(host, host_config.serve, profile=load_profile("dflash-swa"))
    report.to_json()      # the `check --json` object
    report.exit_code      # 0 all passed, 1 otherwise

Profiles are TOML data (`checks/profiles/`), trace lines are defined in `checks.trace`.
"""

from typing import TYPE_CHECKING, Any

from checks.models import LINK_IDS, ChainReport, Evidence, LinkResult, Status
from checks.profile import Profile, ProfileError, load_profile, shipped_profiles
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
    "ChainReport",
    "Evidence",
    "LinkResult",
    "Profile",
    "ProfileError",
    "Reference",
    "ReferenceError",
    "Status",
    "load_profile",
    "load_reference_file",
    "run_chain",
    "shipped_profiles",
]
