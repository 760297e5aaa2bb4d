"""Which link broke, and which one is to blame.

`broken_link` is the first link, in chain order, that did not pass. `root_cause` is the first
link that *failed* while every one of its prerequisites passed: a runtime link that fails because
the config names no sliding layers is a symptom, the config is the cause. `unknown` and `error`
links are never a root cause (there is no evidence against them), and a prerequisite that is
unknown or in error does not "hold".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vllm_console.checks.models import LinkResult, Status


def broken_link(links: Sequence[LinkResult]) -> str | None:
    """The first link that did not pass."""
    for link in links:
        if link.status is not Status.PASS:
            return link.id
    return None


def root_cause(links: Sequence[LinkResult],
               requires: Mapping[str, Sequence[str]]) -> str | None:
    """The first failing link whose prerequisites (per the profile) all passed."""
    status = {link.id: link.status for link in links}
    for link in links:
        if link.status is not Status.FAIL:
            continue
        if all(status.get(dep) is Status.PASS for dep in requires.get(link.id, ())):
            return link.id
    return None
