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


def redact(obj: Any, keep: frozenset[str] = frozenset(), *, texts: bool = False) -> Any:
    """Return a copy of `obj` with secret values replaced by `"<redacted>"`, at any depth.

    Mapping values under a secret-looking key are replaced (None stays None: "no secret" is
    worth seeing), but for the names in `keep` (a document's own fields that only look like
    secrets, e.g. `fleet --json`'s row `key`). In lists of strings, `--api-key VALUE` and
    `--api-key=VALUE` are redacted too; with `texts`, every string as free text
    (`redact_text`: a command line, a log line held in a field).
    """
    return _redact(obj, 0, keep, texts)


def _redact(obj: Any, depth: int, keep: frozenset[str] = frozenset(),
            texts: bool = False) -> Any:
    if depth > 100:
        return REDACTED  # too deep to inspect: hide it rather than risk showing a secret
    if isinstance(obj, dict):
        return {
            k: (REDACTED if v is not None and k not in keep and is_secret_key(k)
                else _redact(v, depth + 1, keep, texts))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        items = _redact_argv(list(obj)) if all(isinstance(v, str) for v in obj) else obj
        out = [_redact(v, depth + 1, keep, texts) for v in items]
        return tuple(out) if isinstance(obj, tuple) else out
    if texts and isinstance(obj, str):
        return redact_text(obj, max(len(obj), 1))
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


# In free text (a log line, a command line): `key: value` / `key=value` pairs (quoted or bare
# keys, as in a Python or JSON dict, an env assignment or `--flag=value`) and `--flag value`.
_STEMS = ("key", "token", "secret", "passw", "pwd", "credential", "auth", "cookie")
_TEXT_PAIR = re.compile(
    r"""(?P<key>['"]?-{0,2}[A-Za-z_][\w.-]*['"]?)(?P<sep>\s*[:=]\s*)"""
    r"""(?P<value>(?:Bearer|Basic|Token)\s+[^\s,;]+|\[[^\]]*\]?|'[^']*'?|"[^"]*"?|[^\s,;})\]]+)""")
_TEXT_FLAG = re.compile(r"""(?P<key>(?<![\w-])--?[A-Za-z][\w-]*)(?P<sep>\s+)"""
                        r"""(?P<value>'[^']*'?|"[^"]*"?|[^\s-][^\s]*)""")
_SEPARATORS = frozenset("'\":= \t")


def may_hold_secret(text: str) -> bool:
    """Cheap test (no regex: this runs on every log line shown): a secret word ends a word
    that a separator follows (`api_key'`, `token=`, `--api-key `). Lines joined with `\n`
    test as each would alone (a newline neither extends a word nor separates a value)."""
    low = text.lower()
    size = len(low)
    for stem in _STEMS:
        at = low.find(stem)
        while at >= 0:
            end = at + len(stem)
            while end < size and low[end].isalpha():
                end += 1
            start = at
            while start > 0 and low[start - 1].isalpha():
                start -= 1
            if end < size and low[end] in _SEPARATORS and low[start:end] in _SECRET_WORDS:
                return True
            at = low.find(stem, end)
    return False


def _key_of(match: re.Match[str]) -> str:
    return match["key"].strip("'\"").lstrip("-")


def _hide_pairs(text: str) -> str:
    """Every secret pair's value hidden. A pair whose key is no secret keeps its value in the
    scan: that value may be the next pair's key (`A= 'api_key': '...'`) or hold a pair of its
    own (`env: HF_TOKEN=...`)."""
    out: list[str] = []
    pos = 0
    while (match := _TEXT_PAIR.search(text, pos)) is not None:
        if is_secret_key(_key_of(match)):
            out += [text[pos:match.start()], _hide(match)]
            pos = match.end()
        else:
            out.append(text[pos:match.start("value")])
            pos = match.start("value")
    out.append(text[pos:])
    return "".join(out)


def _hide(match: re.Match[str]) -> str:
    key = _key_of(match)
    value = match["value"]
    if not is_secret_key(key):
        # The value may hold a pair of its own (`--env HF_TOKEN=...`): the match consumed it.
        inner = _hide_pairs(value) if value != match[0] else value
        return f"{match['key']}{match['sep']}{inner}"
    if value in ("None", "null", "''", '""', "[]") or value.strip("'\"") == REDACTED:
        return match[0]
    quote = value[0] if value[0] in "'\"" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{match['key']}{match['sep']}{quote}{REDACTED}{quote}"


def redact_text(text: str, limit: int = 64 * 1024) -> str:
    """`text` with the values of secret-looking keys and flags replaced by `<redacted>`:
    `'api_key': ['sk-...']`, `"token": "..."`, `HF_TOKEN=...`, `--api-key sk-...`,
    `--api-key=sk-...`, `Authorization: Bearer ...`. For lines shown or exported whole (the
    log). Only the first `limit` characters are looked at (what a screen can show)."""
    if len(text) > limit:
        return redact_text(text[:limit], limit) + text[limit:]
    if not may_hold_secret(text):
        return text
    return _TEXT_FLAG.sub(_hide, _hide_pairs(text))
