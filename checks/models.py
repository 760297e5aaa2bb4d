"""The chain's results: evidence, one result per link, the report.

All frozen. `ChainReport.to_json()` is the `check --json` object of docs/design.md, key for key;
anything richer (per-field diffs for the console's panes) travels in `details`, which the JSON
leaves out so the external contract stays exactly as documented.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Theirs, named here too for the chain's users.
from vllm_console.checks.verdicts import EXIT_CRITICAL as EXIT_CRITICAL
from vllm_console.checks.verdicts import EXIT_OK as EXIT_OK
from vllm_console.checks.verdicts import EXIT_UNKNOWN as EXIT_UNKNOWN
from vllm_console.checks.verdicts import EXIT_WARNING as EXIT_WARNING
from vllm_console.checks.verdicts import LINK_IDS as LINK_IDS
from vllm_console.checks.verdicts import Status as Status

EXCERPT_MAX = 4000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Evidence(_Frozen):
    """What one probe did, so that a person can trust it or run it again."""

    probe: str
    """Which probe (e.g. `record-verify`, `log-scan`)."""
    command: str = ""
    """The command as run on the host (or the file read); empty for local reasoning."""
    exit: int | None = None
    """Its exit status; None when nothing ran on the host."""
    excerpt: str = ""
    """The part of its output that matters, cut to a few KB."""

    @classmethod
    def make(cls, probe: str, command: str = "", exit: int | None = None,
             excerpt: str = "") -> Evidence:
        """Build one, cutting an over-long excerpt (it is for reading, not an archive)."""
        if len(excerpt) > EXCERPT_MAX:
            excerpt = excerpt[:EXCERPT_MAX] + f"\n… [{len(excerpt) - EXCERPT_MAX} more chars]"
        return cls(probe=probe, command=command, exit=exit, excerpt=excerpt)


class LinkResult(_Frozen):
    """One link's verdict, one-line summary, what to do next, and the evidence."""

    id: str
    title: str
    status: Status
    summary: str
    hint: str = ""
    evidence: tuple[Evidence, ...] = ()
    details: Mapping[str, Any] = Field(default_factory=dict, exclude=True)
    """Structured facts for richer views (not part of `--json`)."""

    def to_json(self) -> dict[str, Any]:
        """The link object of `check --json`."""
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status.value,
            "summary": self.summary,
            "hint": self.hint,
            "evidence": [e.model_dump() for e in self.evidence],
        }


class ChainReport(_Frozen):
    """The whole chain on one host."""

    host: str
    profile: str
    links: tuple[LinkResult, ...]
    broken_link: str | None
    """The first link that did not pass, or None."""
    root_cause: str | None
    """The failing link whose own prerequisites hold, or None."""
    seconds: float = Field(default=0.0, exclude=True)
    """Wall time of the chain (not part of `--json`)."""
    warnings: tuple[str, ...] = Field(default=(), exclude=True)
    """Where the configuration disagrees with the running server (a stale `log`), from
    `console.hostclient.discovery.effective_serve`; printed by `check` (not part of `--json`)."""

    @property
    def exit_code(self) -> int:
        """The monitoring-plugin status (docs/design.md): 0 OK, every link passed; 1 WARNING, none
        failed but one is `unknown` or `error`; 2 CRITICAL, a link failed. (3 UNKNOWN, could
        not run, is the caller's: there is no report then.)"""
        statuses = {link.status for link in self.links}
        if Status.FAIL in statuses:
            return EXIT_CRITICAL
        return EXIT_OK if statuses <= {Status.PASS} else EXIT_WARNING

    def link(self, link_id: str) -> LinkResult:
        """The result of one link by id."""
        for link in self.links:
            if link.id == link_id:
                return link
        raise KeyError(link_id)

    def to_json(self) -> dict[str, Any]:
        """The `check --json` object."""
        return {
            "host": self.host,
            "profile": self.profile,
            "links": [link.to_json() for link in self.links],
            "broken_link": self.broken_link,
            "root_cause": self.root_cause,
        }
