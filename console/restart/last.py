"""This host entry's last launch by the console, read back for when no serve process runs.

A relaunch that failed (or a server that died) leaves nothing to discover: no process, so no
log, interpreter or model paths. The restart records every launch it makes per host entry
(`last-launch-<key>.json` on the host, see `host/step.py`); the checks read it back so that
`check` after a failed restart judges the run that failed, from the log it wrote, instead of
asking for `--log`.
"""

from __future__ import annotations

import posixpath
from typing import Any

from console.discovery import configured_port
from console.host import Host, HostError
from console.hostside.argv import matches
from console.remote_scripts import RemoteScripts
from console.restart.plan import RestartError, last_key, run_bundle
from console.settings import ServeSettings


async def read_last_launch(host: Host, settings: ServeSettings,
                           scripts: RemoteScripts | None = None) -> dict[str, Any]:
    """The record of this host entry's last launch ({} when there is none, it cannot be read,
    or it belongs to another entry or port, or its command line does not match `match`: a
    record is never borrowed)."""
    scripts = scripts or RemoteScripts(host)
    try:
        bundle = await scripts.bundle()
        record = await run_bundle(host, scripts, settings.python or "python3", "last",
                                  "--dir", posixpath.dirname(bundle),
                                  "--key", last_key(host.name))
    except (HostError, RestartError):
        return {}
    port = configured_port(settings.url)
    argv = [str(a) for a in record.get("argv") or []]
    if record.get("entry") not in (None, host.name) or \
            (port and record.get("port") not in (None, port)) or \
            not matches(argv, (settings.match or "vllm serve").split()):
        return {}
    return record
