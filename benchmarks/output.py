"""How a benchmark hands over its result: stdlib only and importing no other benchmark, so
that every benchmark (also those `common.py` imports) can use it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def emit(result: object) -> None:
    """A benchmark process's result: one JSON line, last on stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def report_each(results: dict[str, dict[str, Any]], as_json: bool, title: str,
                line: Callable[[str, dict[str, Any]], str]) -> None:
    """Results by workload for the caller (`--json`: one JSON line) or for a person: `title`,
    then `line(name, result)` for each workload."""
    if as_json:
        emit(results)
        return
    print(title)
    for name, result in results.items():
        print(line(name, result))
