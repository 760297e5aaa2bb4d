"""The host side as a host runs it: the console's bundle on disk, `PYTHON BUNDLE ENTRY ...`."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from vllm_console.console.transport.remote_scripts import bundle_bytes


@functools.cache
def bundle_path() -> Path:
    """The bundle written once per test run, where any login user may read it."""
    directory = Path(tempfile.mkdtemp(prefix="vc-bundle-", dir="/tmp"))
    directory.chmod(0o755)
    atexit.register(shutil.rmtree, directory, True)
    path = directory / "hostside.pyz"
    path.write_bytes(bundle_bytes())
    path.chmod(0o644)
    return path


def entry_argv(python: str | Path, entry: str, *args: str) -> list[str]:
    """The command line that runs `entry` of the bundle with `python`."""
    return [str(python), str(bundle_path()), entry, *args]


def helpers_of(marker: str, entry: str | None = None) -> list[int]:
    """The Python processes (agent, follower, the simulated nvidia-smi) whose command line or
    environment names `marker`: this test's own, whoever else shares the login user or the
    machine. The helpers get their arguments in the environment; their shell wrappers are not
    Python. `entry`: only those running that entry of the bundle (`follow-container`)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"python" not in argv[0] or (entry is not None and entry.encode() not in argv):
                continue
            if marker.encode() in b"\0".join(argv) + (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found
