"""vllm-console activation trace: installed as `sitecustomize.py` for one traced restart.

vLLM logs nothing when it builds the DFlash drafter's sliding-window layers. This hook is on the
interpreter's path (PYTHONPATH) for that run only; it wraps the watched functions when their
module is imported and writes one line per event to the process's stderr, which is the serve
log, in the format `checks/trace.py` defines (version 1):

    [vllm-console-trace] {"v": 1, "event": "call", "fn": "MODULE:QUALNAME", "pid": 123,
                          "args": {...}, "result": ...}      ("raised" instead of "result")

`installed` and `missing` events say which watched functions this build has. `args` is a JSON
summary: a config argument gives its `num_hidden_layers`, `layer_types`, `sliding_window`,
`use_sliding_window`; plain arguments (`layer_idx`) appear by name.

The watched functions come from VLLM_CONSOLE_TRACE_WATCH (a JSON list of `module:qualname`).
Its words (the tag, the environment names) are the vocabulary's, installed beside it
(`hook_files`).
The hook must never break the server: any error of its own is swallowed and reported on a
`[vllm-console-trace] hook error: ...` line (not a trace event), and the server goes on as if
the hook were not there. A `sitecustomize` this one shadows (a distribution's or a
virtualenv's) still runs, after it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import sys

if __name__ == "sitecustomize":  # a traced run: the vocabulary is installed beside the hook
    from vllm_console_vocabulary import (  # type: ignore[import-not-found]
        TRACE_ENV_HOOK,
        TRACE_ENV_WATCH,
        TRACE_TAG,
    )
else:  # in the bundle
    from ..vocabulary import TRACE_ENV_HOOK, TRACE_ENV_WATCH, TRACE_TAG

VERSION = 1
CONFIG_FIELDS = ("num_hidden_layers", "layer_types", "sliding_window", "use_sliding_window")
_MARK = "__vllm_console_traced__"


def _write(line: str) -> None:
    # One write on fd 2: lines from several processes never interleave mid-line.
    with contextlib.suppress(Exception):
        os.write(2, (line + "\n").encode("utf-8", "replace"))


def _emit(event: str, fn: str, **fields) -> None:
    try:
        obj = {"v": VERSION, "event": event, "fn": fn, "pid": os.getpid()}
        obj.update(fields)
        _write(f"{TRACE_TAG} {json.dumps(obj, default=repr, separators=(', ', ': '))}")
    except Exception as exc:
        _hook_error(fn, exc)


def _hook_error(where: str, exc: BaseException) -> None:
    with contextlib.suppress(Exception):
        _write(f"{TRACE_TAG} hook error: {where}: {type(exc).__name__}: {exc}"[:1000])


def _jsonable(value, depth: int = 0):
    """The value as JSON data (tuples as lists); a short repr for anything else."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth < 4 and isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value[:1024]]
    if depth < 4 and isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in list(value.items())[:256]}
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 300 else text[:297] + "..."


def _is_config(value) -> bool:
    if isinstance(value, (dict, list, tuple, str, bytes, int, float)) or value is None:
        return False
    return any(hasattr(value, name) for name in ("num_hidden_layers", "layer_types"))


def _summarise(signature, args: tuple, kwargs: dict) -> dict:
    out: dict = {}
    try:
        bound = signature.bind_partial(*args, **kwargs).arguments if signature else {}
    except TypeError:
        bound = {f"arg{i}": a for i, a in enumerate(args)}
        bound.update(kwargs)
    for name, value in bound.items():
        if name == "self":
            continue
        if _is_config(value):
            for field in CONFIG_FIELDS:
                out.setdefault(field, _jsonable(getattr(value, field, None)))
        else:
            out[name] = _jsonable(value)
    return out


def _wrap(fn, label: str):
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            try:
                _emit("call", label, args=_summarise(signature, args, kwargs),
                      raised=f"{type(exc).__name__}: {exc}"[:2000])
            except Exception as own:
                _hook_error(label, own)
            raise
        try:
            _emit("call", label, args=_summarise(signature, args, kwargs),
                  result=_jsonable(result))
        except Exception as own:
            _hook_error(label, own)
        return result

    setattr(traced, _MARK, True)
    return traced


def _patch(module, qualname: str) -> None:
    label = f"{module.__name__}:{qualname}"
    try:
        *path, name = qualname.split(".")
        owner = module
        for part in path:
            owner = getattr(owner, part)
        raw = owner.__dict__.get(name) if hasattr(owner, "__dict__") else None
        if raw is None:
            _emit("missing", label)
            return
        if isinstance(raw, (staticmethod, classmethod)):
            if not getattr(raw.__func__, _MARK, False):
                setattr(owner, name, type(raw)(_wrap(raw.__func__, label)))
        elif callable(raw) and not getattr(raw, _MARK, False):
            setattr(owner, name, _wrap(raw, label))
        _emit("installed", label)
    except AttributeError:
        _emit("missing", label)
    except Exception as exc:
        _hook_error(label, exc)


class _Loader:
    """Delegates to the real loader; patches the module right after it has executed."""

    def __init__(self, loader, qualnames: list) -> None:
        self._loader = loader
        self._qualnames = qualnames

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        for qualname in self._qualnames:
            _patch(module, qualname)

    def __getattr__(self, name: str):
        return getattr(self._loader, name)


class _Finder:
    """Finds nothing itself: asks the other finders, then wraps a watched module's loader."""

    def __init__(self, watch: dict) -> None:
        self._watch = watch

    def find_spec(self, fullname, path=None, target=None):
        qualnames = self._watch.get(fullname)
        if not qualnames:
            return None
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Loader(spec.loader, list(qualnames))
            return spec
        except Exception as exc:
            _hook_error(fullname, exc)
            return None

    def invalidate_caches(self) -> None:
        return None


def parse_watch(text: str) -> dict:
    """`["mod:fn", "mod:Cls.meth"]` (JSON) as {module: [qualname, ...]}."""
    watch: dict = {}
    items = json.loads(text or "[]")
    for item in items if isinstance(items, list) else []:
        module, sep, qualname = str(item).partition(":")
        if sep and module and qualname:
            watch.setdefault(module, []).append(qualname)
    return watch


def _chain_next_sitecustomize() -> None:
    """Run the `sitecustomize` this file shadows, as Python would have without it."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def install() -> None:
    try:
        watch = parse_watch(os.environ.get(TRACE_ENV_WATCH, ""))
        if watch:
            sys.meta_path.insert(0, _Finder(watch))
            for name, qualnames in watch.items():  # imported already: not at start-up, but safe
                if name in sys.modules:
                    for qualname in qualnames:
                        _patch(sys.modules[name], qualname)
    except Exception as exc:
        _hook_error("install", exc)
    try:
        _chain_next_sitecustomize()
    except Exception as exc:
        _hook_error("chained sitecustomize", exc)


if os.environ.get(TRACE_ENV_HOOK) and __name__ == "sitecustomize":
    install()
