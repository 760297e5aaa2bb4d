"""`PendingSession`: a host the console shows at once and connects to after its first frame.

Making a `HostSession` imports the telemetry, the checks, the parsers and the restart (~0.25 s of
CPU, seconds on a busy machine) before anything is on the screen. The console's first frame needs
only what the host screen shows before any data (the host's name, read-only, the scenario), so
the command line hands the app this, and the app calls `open()` once that frame is painted
(docs/design.md, "Start-up"). Whatever can fail for a person's reason (the hosts file, the
destination, the identity file) is checked before. What `open()` raises ends the console with
its message on one line (`vllm-console: NAME: MESSAGE`, exit 2): it says why, for a person.
Headless.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_console.console.session.host_session import HostSession


@dataclass(frozen=True)
class PendingSession:
    """A host's session, made on `open()`."""

    name: str
    open: Callable[[], Awaitable[HostSession]]
    """Makes the session (importing what it needs) and whatever it needs done on the host
    before its telemetry starts; `session.name` is `name`."""
    readonly: bool = False
    scenario: str = ""
    url_only: bool = False
    """A session on the server's URL alone: its screen is laid out for that from the first
    frame (what it can show gets the room; what needs SSH is one line)."""
