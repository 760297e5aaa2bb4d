"""Speculative decoding in three states, from log lines and `/metrics` counters.

1. not configured: the engine runs without a speculative config;
2. configured, no evidence yet: a speculative config is there but no interval with drafts has
   been seen (idle server, still starting, metrics not reachable);
3. active: acceptance length, draft acceptance rate, per-position rates, with history.

An interval without drafts is no evidence: it never turns into a 0 (or a 1.00 acceptance length)
on screen. Log lines (every ~10 s while traffic flows) and `/metrics` deltas (each scrape) both
feed it; every point says where it came from.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from vllm_console.console.parsers.engine import SpeculativeSettings
from vllm_console.console.parsers.spec_decode import SpecDecodeSample

HISTORY = 360


class SpecDecodeStatus(StrEnum):
    NOT_CONFIGURED = "not-configured"
    NO_EVIDENCE = "no-evidence"
    ACTIVE = "active"


class SpecSource(StrEnum):
    LOG = "log"
    METRICS = "metrics"


@dataclass(frozen=True, slots=True)
class SpecDecodePoint:
    """One interval with drafts, for the history sparkline (`at`: host clock, epoch s)."""

    at: float
    mean_acceptance_length: float | None
    draft_acceptance_rate_pct: float | None
    source: SpecSource


@dataclass(frozen=True, slots=True)
class SpecDecodeState:
    """What the spec-decode pane shows. `latest` is the most recent interval with drafts;
    `totals` the figures since the server started (from the `/metrics` counters), when known."""

    status: SpecDecodeStatus
    configured: SpeculativeSettings | None = None
    latest: SpecDecodeSample | None = None
    latest_at: float | None = None
    latest_source: SpecSource | None = None
    totals: SpecDecodeSample | None = None
    history: tuple[SpecDecodePoint, ...] = ()

    @property
    def shown(self) -> tuple[SpecDecodeSample, str] | None:
        """The figures to show and where they come from: the latest interval with drafts
        ("log", "metrics"), else, until the first interval, the counters since the server
        started ("metrics · since start-up": a first `/metrics` read has them at once)."""
        if self.status is not SpecDecodeStatus.ACTIVE:
            return None
        if self.latest is not None:
            return self.latest, str(self.latest_source or "?")
        if self.totals is not None:
            return self.totals, f"{SpecSource.METRICS} · since start-up"
        return None

    @property
    def summary(self) -> str:
        """One line: "acceptance length 1.17 · draft acceptance 1.5% (log)" and the like."""
        if self.status is SpecDecodeStatus.NOT_CONFIGURED:
            return "speculative decoding not configured"
        shown = self.shown
        if shown is None:
            method = self.configured.method if self.configured else None
            return f"{method or 'speculative decoding'} configured; no drafts seen yet"
        sample, source = shown
        parts = []
        if sample.mean_acceptance_length is not None:
            parts.append(f"acceptance length {sample.mean_acceptance_length:.2f}")
        if sample.draft_acceptance_rate_pct is not None:
            parts.append(f"draft acceptance {sample.draft_acceptance_rate_pct:.1f}%")
        return " · ".join(parts) + f" ({source})"

    def to_json(self) -> dict[str, Any] | None:
        """The `spec_decode` object of `status --json`: the latest interval with drafts, else
        the totals since start; None when there is no evidence."""
        sample = self.latest or self.totals
        if self.status is not SpecDecodeStatus.ACTIVE or sample is None:
            return None
        return sample.to_json()


def has_drafts(sample: SpecDecodeSample) -> bool:
    """True when the interval holds evidence: drafts happened (when the line says), and it
    carries an acceptance figure."""
    if sample.drafted_tokens is not None and sample.drafted_tokens <= 0:
        return False
    return (sample.mean_acceptance_length is not None
            or sample.draft_acceptance_rate_pct is not None)


class SpecDecodeTracker:
    """Keeps the spec-decode state of the current run; `state()` is its immutable view."""

    def __init__(self, history: int = HISTORY) -> None:
        self._history: deque[SpecDecodePoint] = deque(maxlen=history)
        self.reset()

    def reset(self) -> None:
        """A new run of the server: nothing of the old one applies."""
        self._history.clear()
        self._configured: SpeculativeSettings | None = None
        self._explicit_none = False
        self._latest: SpecDecodeSample | None = None
        self._latest_at: float | None = None
        self._latest_source: SpecSource | None = None
        self._totals: SpecDecodeSample | None = None
        self._state: SpecDecodeState | None = None

    def configure(self, settings: SpeculativeSettings | None, *, authoritative: bool) -> bool:
        """What the run was asked for. `authoritative` (the engine start line): None means
        "not configured"; otherwise None only means "this source does not say"."""
        if settings is None and not authoritative:
            return False
        if settings is None:
            new: tuple[SpeculativeSettings | None, bool] = (None, True)
        elif authoritative or (self._configured is None and not self._explicit_none):
            new = (settings, False)
        else:
            return False
        if new == (self._configured, self._explicit_none):
            return False
        self._configured, self._explicit_none = new
        return self._changed()

    def feed(self, sample: SpecDecodeSample, at: float, source: SpecSource) -> bool:
        """An interval's figures; ignored (False) when it holds no drafts."""
        if not has_drafts(sample):
            return False
        self._latest, self._latest_at, self._latest_source = sample, at, source
        self._history.append(SpecDecodePoint(at, sample.mean_acceptance_length,
                                             sample.draft_acceptance_rate_pct, source))
        return self._changed()

    def set_totals(self, totals: SpecDecodeSample | None) -> bool:
        """Figures since the server started (cumulative `/metrics` counters)."""
        if totals is not None and not has_drafts(totals):
            totals = None
        if totals == self._totals:
            return False
        self._totals = totals
        return self._changed()

    def _changed(self) -> bool:
        self._state = None
        return True

    def state(self) -> SpecDecodeState:
        if self._state is None:
            evidence = self._latest is not None or self._totals is not None
            if evidence:
                status = SpecDecodeStatus.ACTIVE
            elif self._configured is not None:
                status = SpecDecodeStatus.NO_EVIDENCE
            else:
                status = SpecDecodeStatus.NOT_CONFIGURED
            self._state = SpecDecodeState(status, self._configured, self._latest,
                                          self._latest_at, self._latest_source, self._totals,
                                          tuple(self._history))
        return self._state
