"""`vllm-console sim --scenario NAME --root DIR`: materialise a simulated host and run its fake
`vllm serve` in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from console.commands.common import fail


def list_scenarios() -> int:
    from console.sim import SCENARIOS

    for name, scenario in SCENARIOS.items():
        print(f"{name:<30} {scenario.description}")
    return 0


def run(args: argparse.Namespace) -> int:
    from console.sim import SCENARIOS, materialise, run_foreground

    if args.list:
        return list_scenarios()
    if not args.root:
        return fail("sim needs --root DIR (where to write the simulated host)")
    if args.scenario not in SCENARIOS:
        return fail(f"unknown scenario {args.scenario!r}; one of: {', '.join(SCENARIOS)}")
    try:
        tree = materialise(args.scenario, Path(args.root), port=args.port)
    except (OSError, ValueError) as exc:
        return fail(f"cannot write the simulated host into {args.root}: {exc}")
    return run_foreground(tree)
