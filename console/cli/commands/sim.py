"""`vllm-console sim --scenario NAME --root DIR`: materialise a simulated host and run its fake
`vllm serve` in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_console.console.cli.commands.common import CommandError, emit, reason


def list_scenarios() -> int:
    from vllm_console.console.sim import SCENARIOS

    for name, scenario in SCENARIOS.items():
        emit(f"{name:<30} {scenario.description}")
    return 0


def check_scenario(name: str) -> None:
    from vllm_console.console.sim import SCENARIOS

    if name not in SCENARIOS:
        raise CommandError(f"unknown scenario {name!r}; one of: {', '.join(SCENARIOS)}")


def run(args: argparse.Namespace) -> int:
    from vllm_console.console.sim import materialise, run_foreground

    if args.list:
        return list_scenarios()
    if not args.root:
        raise CommandError("sim needs --root DIR (where to write the simulated host)")
    check_scenario(args.scenario)
    try:
        tree = materialise(args.scenario, Path(args.root), port=args.port)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot write the simulated host into {args.root}: "
                           f"{reason(exc)}") from None
    return run_foreground(tree)
