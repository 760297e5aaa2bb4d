"""The host side as a host runs it: the console's bundle on disk, `PYTHON BUNDLE ENTRY ...`."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from console.transport.remote_scripts import bundle_bytes


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
