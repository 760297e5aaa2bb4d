"""Prometheus's HTTP API (`/api/v1/query`): instant vectors, and errors kept apart from data.

What can go wrong is told apart, because the fleet table must never show a failure as a zero:
Prometheus unreachable (`PromUnreachable`), the query refused (`PromQueryError`: bad PromQL, a
timeout, too many samples), and a query that ran but matched no series (an empty result, which
the caller reports as "absent").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from vllm_console.console.sources import web


class PromError(Exception):
    """Prometheus could not answer a query; the message says why, in one line."""


class PromUnreachable(PromError):
    """No HTTP answer from Prometheus at all (refused, timed out, not HTTP)."""


class PromQueryError(PromError):
    """Prometheus answered with an error for this query (bad PromQL, timeout, limits)."""


@dataclass(frozen=True, slots=True)
class Series:
    """One element of an instant vector: its labels and value (NaN kept: 0/0 is not 0)."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class Prometheus:
    """A Prometheus server's base URL (may carry a path prefix, e.g. behind a proxy)."""

    url: str
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        web.check_url(self.url, PromError, "Prometheus URL")

    async def query(self, expr: str) -> list[Series]:
        """Run an instant query; its vector (empty: nothing matched)."""
        path = "/api/v1/query?" + urlencode({"query": expr})
        result = await web.get(self.url, path, timeout=self.timeout_s)
        if result.status is None:
            raise PromUnreachable(f"Prometheus at {self.url}: {result.error}")
        try:
            body: Any = json.loads(result.body)
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") not in ("success", "error"):
            raise PromUnreachable(f"Prometheus at {self.url}: answered {result.status} "
                                  "with no Prometheus API JSON (is this Prometheus?)")
        if body.get("status") != "success":
            kind = body.get("errorType") or f"HTTP {result.status}"
            raise PromQueryError(f"{kind}: {body.get('error') or 'no message'}")
        return parse_vector(body.get("data"))


def parse_vector(data: Any) -> list[Series]:
    """The series of a `{"resultType": "vector", "result": [...]}` answer; a scalar becomes one
    series with no labels. Values Prometheus writes as strings ("NaN", "+Inf") are kept as such
    floats; an entry that is not [time, value] is skipped."""
    if not isinstance(data, dict):
        raise PromQueryError("answer without data")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list):
        return [Series({}, _float(result))]
    if kind != "vector" or not isinstance(result, list):
        raise PromQueryError(f"expected an instant vector, got {kind!r}")
    out = []
    for item in result:  # 1,000 servers make ~15,000 of these a refresh: keep this loop lean
        try:
            labels, value = item["metric"], float(item["value"][1])
        except (KeyError, TypeError, ValueError, IndexError):
            continue
        if isinstance(labels, dict) and not math.isinf(value):
            out.append(Series(labels, value))  # the API's label values are JSON strings
    return out


def _float(pair: Any) -> float:
    try:
        return float(pair[1])
    except (KeyError, TypeError, ValueError, IndexError):
        return math.nan


def with_selector(metric: str, selector: str) -> str:
    """`metric{sel}`: the fleet's selector applied to one metric name."""
    return f"{metric}{selector}" if selector else metric


def check_selector(selector: str) -> str:
    """A label selector as the user wrote it: `{job="vllm"}` (braces required), or empty."""
    selector = selector.strip()
    if selector and not (selector.startswith("{") and selector.endswith("}")):
        raise PromError(f"selector {selector!r}: write it in braces, e.g. '{{job=\"vllm\"}}'")
    return selector
