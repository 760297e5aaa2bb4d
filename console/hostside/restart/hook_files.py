"""The trace hook's directory, file by file: the hook as `sitecustomize.py` and, beside it, the
vocabulary it takes its words from (its tag, its environment names). One list for the host
side that writes the directory and the laptop that names it by the digest of its files.
"""

from __future__ import annotations

import hashlib
import pkgutil

from ..vocabulary import HOOK_MODULE_VOCABULARY

HOOK_MODULE = "sitecustomize.py"


def hook_files() -> dict[str, bytes]:
    """{file name: bytes} of a trace hook's directory (read from the package or the bundle)."""
    restart = __package__ or ""
    hook = pkgutil.get_data(restart, "trace_hook.py")
    words = pkgutil.get_data(restart.rpartition(".")[0], "vocabulary.py")
    if hook is None or words is None:
        raise OSError("the trace hook is missing from the host-side bundle")
    return {HOOK_MODULE: hook, f"{HOOK_MODULE_VOCABULARY}.py": words}


def hook_digest() -> str:
    """What names a hook's directory (`trace-hook-<digest>`): new files, a new directory."""
    sha = hashlib.sha256()
    for name, data in sorted(hook_files().items()):
        sha.update(name.encode() + b"\0" + data + b"\0")
    return sha.hexdigest()[:12]
