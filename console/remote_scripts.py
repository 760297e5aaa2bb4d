"""Helper scripts the console runs on the host (agent, discovery, probes).

They are plain stdlib Python, installed once per content hash into a private per-user directory
on the host (`${XDG_CACHE_HOME:-~/.cache}/vllm-console`, mode 700), so that nothing the console
puts there is readable by other users and nothing is re-uploaded per call.
"""

from __future__ import annotations

import hashlib
import shlex
from importlib import resources

from console.host import Host, HostError

REMOTE_DIR = '"${XDG_CACHE_HOME:-$HOME/.cache}/vllm-console"'


def script_source(package: str, name: str) -> bytes:
    """The bytes of a script shipped as package data (e.g. `console.agent`, `agent_main.py`)."""
    return resources.files(package).joinpath(name).read_bytes()


class RemoteScripts:
    """Installs scripts on one host and remembers where they landed."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._installed: dict[str, str] = {}

    async def path(self, name: str, source: bytes) -> str:
        """The remote path of `source` installed as `name` (uploaded once per content)."""
        digest = hashlib.sha256(source).hexdigest()[:16]
        key = f"{name}:{digest}"
        if key in self._installed:
            return self._installed[key]
        stem, dot, ext = name.rpartition(".")
        remote_name = f"{stem}-{digest}{dot}{ext}" if dot else f"{name}-{digest}"
        quoted = shlex.quote(remote_name)
        # One round trip: make the private dir, write the file only when it is not there yet,
        # print the absolute path.
        line = (f"umask 077; d={REMOTE_DIR}; mkdir -p \"$d\" && chmod 700 \"$d\" && "
                f"{{ test -s \"$d\"/{quoted} || {{ cat > \"$d\"/{quoted}.tmp && "
                f"mv -f \"$d\"/{quoted}.tmp \"$d\"/{quoted}; }}; }} && "
                f"printf '%s\\n' \"$d\"/{quoted}")
        result = await self._host.run(line, input=source, timeout=30)
        if not result.ok or not result.text.strip():
            raise HostError(f"{self._host.name}: cannot install helper {name}: "
                            f"{result.error_text.strip() or 'exit ' + str(result.exit_status)}")
        path = result.text.strip().splitlines()[-1]
        self._installed[key] = path
        return path
