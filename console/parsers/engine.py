"""The engine's configuration as vLLM logs it at start-up.

Three lines carry it:

- EngineCore: `Initializing a V1 LLM engine (v0.1.dev16016+g3cfc8f8b7) with config: model=...,
  speculative_config=SpeculativeConfig(method='dflash', model=..., num_spec_tokens=15), ...`
  (several KB; it marks the start of a run);
- APIServer: `non-default args: {'model': ..., 'speculative_config': {...}, ...}`;
- APIServer: the version banner (`vLLM server version X, serving model M`, the ASCII logo, or the
  older `vLLM API server version X`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from vllm_console.console.hostside.vocabulary import ARGS_LINE, BANNER, engine_start
from vllm_console.console.parsers.pyrepr import parse_kwargs, parse_repr, to_jsonable
from vllm_console.console.parsers.redact import redact

__all__ = [
    "EngineConfig",
    "NonDefaultArgs",
    "SpeculativeSettings",
    "VersionBanner",
    "config_dict",
    "parse_engine_start",
    "parse_non_default_args",
    "parse_version_banner",
    "redact",
]

_WITH_CONFIG = " with config:"
# Matched against the right-stripped message, so `$` needs no `\s*` before it (which made
# lazy groups quadratic on long runs of trailing spaces).
_BANNER_SERVER = re.compile(
    r"vLLM (?:API )?server version (?P<version>\S{1,200}?),? serving model (?P<model>\S.*)$"
)
_BANNER_OLD = re.compile(r"vLLM API server version (?P<version>\S{1,200})$")
# The ASCII logo is drawn with block elements (U+2580..U+259F); its rows end in `version X`
# and `model M` with nothing but logo before them (a tqdm bar has `|`, digits and `%`).
_LOGO_CHARS = re.compile(r"[\u2580-\u259f]")
_BANNER_LOGO_VERSION = re.compile(
    r"[\s\u2580-\u259f]{1,200}version\s+(?P<version>v?\d[\w.+\-]{0,200})$"
)
_BANNER_LOGO_MODEL = re.compile(r"[\s\u2580-\u259f]{1,200}model\s+(?P<model>\S.{0,1000})$")


@dataclass(frozen=True, slots=True)
class SpeculativeSettings:
    """Which speculative decoding the engine was asked for."""

    method: str | None = None
    model: str | None = None
    num_spec_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The `speculative_config` object of `status --json`."""
        return {"method": self.method, "model": self.model, "num_spec_tokens": self.num_spec_tokens}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """What the engine start line says; `fields` holds every `key=value` of it, parsed."""

    version: str | None
    model: str | None
    speculative: SpeculativeSettings | None
    fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    engine_kind: str | None = None  # "V1" for the V1 engine, None for the old wording

    def to_json(self) -> dict[str, Any]:
        """The `engine` object of `status --json`."""
        spec = self.speculative.to_json() if self.speculative is not None else None
        return {"version": self.version, "model": self.model, "speculative_config": spec}


@dataclass(frozen=True, slots=True)
class NonDefaultArgs:
    """The API server's `non-default args` dict, secrets redacted."""

    args: Mapping[str, Any]
    model: str | None
    speculative: SpeculativeSettings | None


@dataclass(frozen=True, slots=True)
class VersionBanner:
    """A version banner line; the ASCII logo spreads version and model over two lines."""

    version: str | None
    model: str | None = None


def parse_engine_start(message: str) -> EngineConfig | None:
    """Parse `Initializing a V1 LLM engine (vX) with config: ...`; None for any other line."""
    start = engine_start(message)
    if start is None or not message.startswith(_WITH_CONFIG, start[2]):
        return None
    kind, version, end = start
    end += len(_WITH_CONFIG)
    end += message[end:end + 1].isspace()
    fields = redact(parse_kwargs(message[end:]))
    model = fields.get("model")
    return EngineConfig(
        version=version or None,
        model=model if isinstance(model, str) else None,
        speculative=_speculative(fields.get("speculative_config")),
        fields=MappingProxyType(fields),
        engine_kind=kind,
    )


def parse_non_default_args(message: str) -> NonDefaultArgs | None:
    """Parse `non-default args: {...}`; None for any other line or a value that is not a dict."""
    idx = message.find(ARGS_LINE)
    if idx < 0:
        return None
    text = message[idx + len(ARGS_LINE) :].strip()
    args: Any
    try:
        args = ast.literal_eval(text) if len(text) < 200_000 else None
    except Exception:  # literal_eval raises many types on hostile text; all mean "not a literal"
        args = None
    if not isinstance(args, dict):
        args = parse_repr(text)  # reprs that are not literals: enums, `Name(...)`
    if not isinstance(args, dict):
        return None
    args = redact(to_jsonable(args))
    model = args.get("model") or args.get("model_tag")
    return NonDefaultArgs(
        args=MappingProxyType(args),
        model=model if isinstance(model, str) else None,
        speculative=_from_args(args),
    )


def parse_version_banner(message: str) -> VersionBanner | None:
    """Parse a version banner line (any of its three forms); None for any other line."""
    if "version" not in message and "model" not in message:
        return None
    message = message.rstrip()
    if BANNER in message:
        m = _BANNER_SERVER.search(message) or _BANNER_OLD.search(message)
        if m is not None:
            groups = m.groupdict()
            return VersionBanner(m["version"].rstrip(","), groups.get("model"))
    if _LOGO_CHARS.search(message) is None:
        return None
    m = _BANNER_LOGO_VERSION.match(message)
    if m is not None:
        return VersionBanner(m["version"])
    m = _BANNER_LOGO_MODEL.match(message)
    if m is not None:
        return VersionBanner(None, m["model"])
    return None


# `vllm serve --spec-method M --spec-model D --spec-tokens N` (0.30+) logs these instead of, or
# beside, `speculative_config`; the engine gets the config with them filled in.
_SPEC_FLAGS = (("spec_method", "method"), ("spec_model", "model"),
               ("spec_tokens", "num_speculative_tokens"))


def config_dict(value: Any) -> dict[str, Any]:
    """A config given as a mapping or as JSON text of one, as a dict ({} when it is neither)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return dict(value) if isinstance(value, Mapping) else {}


def _from_args(args: Mapping[str, Any]) -> SpeculativeSettings | None:
    """The speculative config that `non-default args` asks for: `speculative_config` (a dict or
    JSON text), its gaps filled from the `--spec-*` flags."""
    merged = config_dict(args.get("speculative_config"))
    if merged.get("num_spec_tokens") is not None:
        merged.setdefault("num_speculative_tokens", merged["num_spec_tokens"])
    for flag, key in _SPEC_FLAGS:
        if args.get(flag) is not None and merged.get(key) is None:
            merged[key] = args[flag]
    return _speculative(merged) if merged else None


def _speculative(value: Any) -> SpeculativeSettings | None:
    """Read a speculative config from a `SpeculativeConfig(...)`, a dict, or a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping):
        return None
    n = value.get("num_spec_tokens", value.get("num_speculative_tokens"))
    method, model = value.get("method"), value.get("model")
    return SpeculativeSettings(
        method=method if isinstance(method, str) else None,
        model=model if isinstance(model, str) else None,
        num_spec_tokens=n if isinstance(n, int) and not isinstance(n, bool) else None,
    )
