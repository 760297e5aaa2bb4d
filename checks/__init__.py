"""The verification chain: code present -> fields extracted -> runtime activation -> config
correct, with evidence and a root cause. Headless: never imports textual.

    from checks import load_profile, run_chain
    report = await run_chain(host, host_config.serve, profile=load_profile("dflash-swa"))
    report.to_json()      # the `check --json` object
    report.exit_code      # 0 all passed, 1 otherwise

Profiles are TOML data (`checks/profiles/`), trace lines are defined in `checks.trace`.
"""

from checks.chain import run_chain
from checks.models import LINK_IDS, ChainReport, Evidence, LinkResult, Status
from checks.profile import Profile, ProfileError, load_profile, shipped_profiles
from checks.references import Reference, ReferenceError, load_reference_file

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
