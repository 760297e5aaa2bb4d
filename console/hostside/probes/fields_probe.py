"""Fields-extracted probe: run on the host with the serving interpreter (stdlib only itself).

Reads the draft config.json and builds the config vLLM would build from it, with the host's
own code:

- speculators format (the config has `format_key`): the extractor named by the profile
  (`SpeculatorsConfig.extract_transformers_pre_trained_config`), called on a copy of the dict;
- native (z-lab) format: HF reads it as-is; when `transformers` imports, the config is rebuilt
  with `AutoConfig.from_pretrained` (as vLLM does) to see what HF keeps.

Then it reports, per field, the value in config.json and the value in the built config. As a
labelled fallback it also reads the updater source statically (which fields it names).

Importing vLLM may print to stdout (its logger does), so while working, fd 1 points at stderr;
the JSON goes to the real stdout after a marker line.

stdin: {"config_path", "fields": [...], "format_key", "extractor": "module:qualname",
        "package", "static_source"}
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
import sys
from typing import Any

from ..wire import answer, read_params


def read_config(path: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The parsed config and a state record (`ok`, `missing`, `denied`, `invalid`, ...)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(16 * 1024 * 1024)
    except FileNotFoundError:
        return None, {"state": "missing", "path": path}
    except PermissionError:
        return None, {"state": "denied", "path": path}
    except IsADirectoryError:
        return None, {"state": "is-a-directory", "path": path}
    except OSError as exc:
        return None, {"state": "unreadable", "path": path, "error": str(exc)}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return None, {"state": "invalid", "path": path, "error": str(exc)}
    except RecursionError:  # no config nests this deep; one that does must not crash the probe
        return None, {"state": "invalid", "path": path,
                      "error": f"nested deeper than {sys.getrecursionlimit()} levels"}
    if not isinstance(data, dict):
        return None, {"state": "not-an-object", "path": path}
    return data, {"state": "ok", "path": path}


def _resolve(dotted: str) -> Any:
    module_name, _, qualname = dotted.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _error(kind: str, exc: BaseException, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "type": type(exc).__name__, "message": str(exc)[:2000], **extra}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, (tuple, list)):
            return [_jsonable(v) for v in value]
        return repr(value)


def extract_speculators(config: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Run the host's speculators extraction on a copy of the config."""
    try:
        fn = _resolve(params["extractor"])
    except Exception as exc:  # an import can raise anything (missing torch, a CUDA probe)
        return {"how": params["extractor"], "error": _error("import", exc)}
    try:
        built = fn(copy.deepcopy(config))
    except Exception as exc:
        return {"how": params["extractor"], "error": _error("call", exc)}
    if not isinstance(built, dict):
        built = dict(getattr(built, "__dict__", {}))
    return {"how": params["extractor"], "values": built}


def rebuild_native(config_path: str) -> dict[str, Any]:
    """Build the config with transformers' AutoConfig, as vLLM does for HF-format drafts.
    A transformers that cannot be imported or has no AutoConfig is an `import` error."""
    try:
        import transformers

        auto_config = transformers.AutoConfig
    except Exception as exc:
        return {"how": "transformers.AutoConfig", "error": _error("import", exc)}
    version = getattr(transformers, "__version__", None)
    try:
        built = auto_config.from_pretrained(os.path.dirname(config_path))
        values = built.to_dict()
    except Exception as exc:
        return {"how": "transformers.AutoConfig", "error": _error("call", exc),
                "transformers": version}
    return {"how": "transformers.AutoConfig", "values": values, "transformers": version,
            "config_class": type(built).__name__}


def static_mentions(params: dict[str, Any]) -> dict[str, Any]:
    """Which fields the updater source names, read as text (a fallback, labelled as such)."""
    rel = params.get("static_source")
    if not rel:
        return {}
    try:
        spec = importlib.util.find_spec(params.get("package", "vllm"))
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return {"error": "package not found"}
    path = os.path.join(list(spec.submodule_search_locations)[0], rel)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            source = fh.read()
    except OSError as exc:
        return {"file": path, "error": exc.strerror or str(exc)}
    return {"file": path,
            "mentions": {f: (f'"{f}"' in source or f"'{f}'" in source)
                         for f in params["fields"]}}


def probe(params: dict[str, Any]) -> dict[str, Any]:
    """All the facts fields-extracted needs."""
    out: dict[str, Any] = {"python": sys.executable}
    config, state = read_config(params["config_path"])
    out["config"] = state
    if config is None:
        return out
    fields = params["fields"]
    layer = config.get("transformer_layer_config")
    layer = layer if isinstance(layer, dict) else {}
    source: dict[str, Any] = {}
    where: dict[str, str] = {}
    for f in fields:
        if f in config:
            source[f], where[f] = config[f], "top level"
        elif f in layer:
            source[f], where[f] = layer[f], "transformer_layer_config"
    out["source"] = source
    out["source_where"] = where
    algorithm = config.get(params["format_key"])
    if algorithm is not None:
        out["format"] = "speculators"
        out["algorithm"] = _jsonable(algorithm)
        result = extract_speculators(config, params)
    else:
        out["format"] = "native"
        result = rebuild_native(params["config_path"])
    values = result.pop("values", None)
    if values is not None:
        result["values"] = {f: _jsonable(values[f]) for f in fields if f in values}
        result["absent"] = [f for f in fields if f not in values]
    out["extraction"] = result
    out["static"] = static_mentions(params)
    return out


def main(argv: list[str]) -> int:
    """The `probe-fields` entry point: parameters on stdin, the answer after the marker."""
    params = read_params()
    if params.get("path_first"):  # the serve process ran `python -m`: its cwd comes first
        sys.path.insert(0, params["path_first"])
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)  # whatever the imports print goes to stderr, not into our JSON
    try:
        facts = probe(params)
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
    return answer(facts, default=repr)
