"""Restart `vllm serve` on a host, verified end to end, optionally with the activation trace.

    plan = await plan_restart(host, config, trace=False)    # what the confirm dialog shows
    result = await restart(host, config, plan=plan, on_progress=callback)

The restart itself runs on the host as one detached step (`console.hostside.restart`), so a lost
SSH link never leaves the server down; the client follows it and verifies the new server.
"""

from vllm_console.console.restart.client import ProgressCallback, restart, who
from vllm_console.console.restart.model import (
    Outcome,
    PhaseTiming,
    RestartOptions,
    RestartPlan,
    RestartResult,
    RestartStep,
    Stage,
)
from vllm_console.console.restart.plan import RestartError, plan_restart

__all__ = [
    "Outcome",
    "PhaseTiming",
    "ProgressCallback",
    "RestartError",
    "RestartOptions",
    "RestartPlan",
    "RestartResult",
    "RestartStep",
    "Stage",
    "plan_restart",
    "restart",
    "who",
]
