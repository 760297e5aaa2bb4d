"""Small helpers the links share: wording lists and values, building results."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from vllm_console.checks.models import Evidence, LinkResult, Status
from vllm_console.console.transport.remote_scripts import ScriptRun

LINK_HINT = "the link to {host} failed during the check: check the connection, then run it again"


def short_list(items: Iterable[Any], limit: int = 3) -> str:
    """`a, b, c (+2 more)`."""
    items = [str(i) for i in items]
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" (+{len(items) - limit} more)"


def show(value: Any, limit: int = 120) -> str:
    """A config value as compact JSON, cut when long."""
    text = json.dumps(value, separators=(", ", ": "), default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_evidence(probe: str, run: ScriptRun, excerpt: str) -> Evidence:
    """Evidence for one host script run."""
    return Evidence.make(probe, run.command, run.exit, excerpt)


def result(link_id: str, title: str, status: Status, summary: str, hint: str = "",
           evidence: Iterable[Evidence] = (), details: Mapping[str, Any] | None = None
           ) -> LinkResult:
    """A LinkResult with the summary kept to one line."""
    return LinkResult(id=link_id, title=title, status=status,
                      summary=" ".join(summary.split()), hint=hint,
                      evidence=tuple(evidence), details=dict(details or {}))
