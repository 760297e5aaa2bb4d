"""The host-side restart step as one file: a zipapp of `console.hostside.restart`.

Built in memory with fixed timestamps so that the same sources give the same bytes (and so the
same content hash: `RemoteScripts` uploads it once per version, not once per restart).
"""

from __future__ import annotations

import functools
import io
import zipfile
from importlib import resources

PACKAGE = "vcrestart"
MODULES = ("__init__.py", "procfs.py", "gpu.py", "status.py", "stop.py", "launch.py",
           "step.py", "main.py", "trace_hook.py")
_MAIN = (f"import sys\nfrom {PACKAGE}.main import main\nsys.exit(main())\n").encode()


def _entry(name: str, data: bytes) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info, data


@functools.cache
def bundle_bytes() -> bytes:
    """The zipapp: `python3 BUNDLE COMMAND ...` runs `console.hostside.restart.main`."""
    source = resources.files("console.hostside.restart")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(*_entry("__main__.py", _MAIN))
        for name in MODULES:
            zf.writestr(*_entry(f"{PACKAGE}/{name}", source.joinpath(name).read_bytes()))
    return buf.getvalue()


def trace_hook_source() -> bytes:
    """The trace hook's source (what a traced run finds as `sitecustomize.py`)."""
    return resources.files("console.hostside.restart").joinpath("trace_hook.py").read_bytes()
