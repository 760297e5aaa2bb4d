"""The simulated serving host: a directory tree with a fake vLLM install, models, nvidia-smi and
a fake `vllm serve` that behaves like the real one for probes that know nothing about it.

Used by `vllm-console demo`, `vllm-console sim` and as the test bed of every other test.
"""

from console.sim.runner import (
    health,
    run_foreground,
    start_background,
    stop,
    tree_processes,
    wait_ready,
)
from console.sim.scenarios import DEFAULT_SCENARIO, SCENARIOS, Scenario, get_scenario
from console.sim.tree import SimTree, materialise

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
