"""The simulated serving host: a directory tree with a fake vLLM install, models, nvidia-smi and
a fake `vllm serve` that behaves like the real one for probes that know nothing about it.

Used by `vllm-console demo`, `vllm-console sim` and as the test bed of every other test.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_console.console.sim.runner import (
        health,
        run_foreground,
        start_background,
        stop,
        tree_processes,
        wait_ready,
    )
    from vllm_console.console.sim.scenarios import (
        DEFAULT_SCENARIO,
        SCENARIOS,
        Scenario,
        get_scenario,
    )
    from vllm_console.console.sim.tree import SimTree, materialise

# Imported on first use (PEP 562): `demo` checks its scenario's name before the console's first
# frame, and writes and starts the host after it (the runner brings urllib's HTTP client).
_WHERE = {
    **dict.fromkeys(("health", "run_foreground", "start_background", "stop", "tree_processes",
                     "wait_ready"), "vllm_console.console.sim.runner"),
    **dict.fromkeys(("DEFAULT_SCENARIO", "SCENARIOS", "Scenario", "get_scenario"),
                    "vllm_console.console.sim.scenarios"),
    **dict.fromkeys(("SimTree", "materialise"), "vllm_console.console.sim.tree"),
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'vllm_console.console.sim' has no attribute {name!r}")


__all__ = [
    "DEFAULT_SCENARIO",
    "SCENARIOS",
    "Scenario",
    "SimTree",
    "get_scenario",
    "health",
    "materialise",
    "run_foreground",
    "start_background",
    "stop",
    "tree_processes",
    "wait_ready",
]
