"""A link's verdict, the links' order and `check`'s exit statuses: what the console's checklist
needs to draw a report, without the report's models (`checks.models`: pydantic, a tenth of a
second to import before the console's first frame)."""

from __future__ import annotations

from enum import StrEnum

LINK_IDS = ("code-present", "fields-extracted", "runtime-activation", "config-correct")
"""The links, in the contract's fixed order."""

# `check`'s exit statuses, the monitoring-plugin convention (Nagios, Icinga, Sensu, Zabbix).
EXIT_OK = 0
EXIT_WARNING = 1
EXIT_CRITICAL = 2
EXIT_UNKNOWN = 3


class Status(StrEnum):
    """A link's verdict. `unknown` is "no evidence either way" and never counts as a pass."""

    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"
    ERROR = "error"
