"""The bundle's own `__main__` (the zipapp's root one, copied there by
`console.transport.remote_scripts`): runs the package's `__main__` from a compiled copy of the
bundle when this Python has one beside it, making it on first use.

A zipapp holds no bytecode a host's Python can use (it caches none for zip imports), so every
helper run compiled each module it imported from source: about a third of a discovery's CPU.
The first run on a host, for each Python (`sys.implementation.cache_tag`), extracts the bundle
next to itself (`hostside-HASH.cpython-311/`, in the same private directory, private like it)
and compiles it there; later runs import from that copy, whatever PYTHONDONTWRITEBYTECODE says.
The copy appears whole or not at all (made under a temporary name, then renamed); anything going
wrong on the way (a read-only or full disk, something in its place, a copy another user made
and this one cannot read) leaves the run to the zipapp, as before.

Written in the oldest Python 3 syntax (no f-strings, no annotations), like `__main__`: the
version gate comes after it.
"""

import os
import sys

PACKAGE = "vllm_console_host"
"""The package's name inside the bundle: one no serving interpreter has on its path (the probes
run under it and import vLLM beside it)."""


def compiled_copy(bundle):
    """The directory holding this Python's compiled copy of `bundle` (made now if missing), or
    None when there is none to be had."""
    tag = getattr(sys.implementation, "cache_tag", None)
    if not tag or not bundle.endswith(".pyz"):
        return None
    where = bundle[:-len(".pyz")] + "." + tag
    if os.path.lexists(where):
        return where if _readable(where) else None  # another user's copy is private to them
    temporary = "{}.{}.tmp".format(where, os.getpid())
    mask = os.umask(0o077)
    try:
        import compileall
        import zipfile

        with zipfile.ZipFile(bundle) as archive:
            archive.extractall(temporary)
        compileall.compile_dir(temporary, quiet=2, ddir=where)
        os.rename(temporary, where)
    except Exception:
        pass  # another run made it first, or it cannot be made: the zipapp runs
    finally:
        os.umask(mask)
        if os.path.isdir(temporary):
            import shutil

            shutil.rmtree(temporary, ignore_errors=True)
    return where if _readable(where) else None


def _readable(where):
    """True when this user can import the package from the copy `where`."""
    return os.access(os.path.join(where, PACKAGE, "__main__.py"), os.R_OK)


def run():
    where = compiled_copy(os.path.abspath(sys.path[0]))
    if where is not None:
        sys.path[0] = where
    from importlib import import_module

    return import_module(PACKAGE + ".__main__").main()


if __name__ == "__main__":
    sys.exit(run())
