"""Hiding secrets in parsed configuration before it reaches the screen or an export.

Older vLLM builds print `'api_key': ['sk-...']` in their `non-default args` line.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

# A key is secret when its last word names a secret: `api_key`, `hf_token`, `apiKey`,
# `db_password`. The last word only, so `tokenizer`, `max_num_batched_tokens`,
# `allowed_token_ids` and `num_speculative_tokens` stay visible.
_SECRET_WORDS = frozenset(
    {"key", "keys", "apikey", "token", "secret", "secrets", "password", "passwords", "passwd",
     "pwd", "credential", "credentials", "auth", "authorization", "cookie"}
)  # fmt: skip
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_FLAG = re.compile(r"--?([A-Za-z][\w\-]*)(=.*)?", re.DOTALL)


def is_secret_key(key: object) -> bool:
    """True when a mapping key or command-line flag name looks like it holds a secret."""
    if not isinstance(key, str):
        return False
    words = _WORD.findall(key[-200:])
    return bool(words) and words[-1].lower() in _SECRET_WORDS


def redact(obj: Any) -> Any:
    """Return a copy of `obj` with secret values replaced by `"<redacted>"`, at any depth.

    Mapping values under a secret-looking key are replaced (None stays None: "no secret" is
    worth seeing). In lists of strings, `--api-key VALUE` and `--api-key=VALUE` are redacted too.
    """
    return _redact(obj, 0)


def _redact(obj: Any, depth: int) -> Any:
    if depth > 100:
        return REDACTED  # too deep to inspect: hide it rather than risk showing a secret
    if isinstance(obj, dict):
        return {
            k: (REDACTED if v is not None and is_secret_key(k) else _redact(v, depth + 1))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        items = _redact_argv(list(obj)) if all(isinstance(v, str) for v in obj) else obj
        out = [_redact(v, depth + 1) for v in items]
        return tuple(out) if isinstance(obj, tuple) else out
    return obj


def _redact_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        m = _FLAG.fullmatch(arg)
        if m is not None and is_secret_key(m[1]):
            if m[2] is None:
                hide_next = True
                out.append(arg)
            else:
                out.append(f"{arg[: m.start(2)]}={REDACTED}")
            continue
        out.append(arg)
    return out
