"""A tolerant reader of Python `repr` text as vLLM prints it in its config lines.

Values come back as plain Python data that `json.dumps` accepts after `to_jsonable`:

- strings (either quote, escapes decoded), ints, floats, None/True/False (also JSON's
  `null`/`true`/`false`, which vLLM prints inside `compilation_config`);
- lists, tuples, dicts, sets (as lists);
- `Name(a, key=value)` becomes `{"__type__": "Name", "__args__": [a], "key": value}`
  (`__args__` only when there are positional arguments);
- anything else (`torch.bfloat16`, `<Enum.X: 1>`, an unquoted path) is kept as its text.

The reader never backtracks and never raises: a malformed part becomes text and reading goes on.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from typing import Any

TYPE_KEY = "__type__"
ARGS_KEY = "__args__"
UNPARSED_KEY = "__unparsed__"

# Deeper nesting than this is kept as text (it also bounds the recursion).
_MAX_DEPTH = 60

_WS = re.compile(r"\s*")
_STRING = re.compile(
    r"""(?P<prefix>[rRbBuU]{0,2})(?:'(?P<s>(?:[^'\\\n]|\\.)*)'|"(?P<d>(?:[^"\\\n]|\\.)*)")""",
    re.DOTALL,
)
_NUMBER = re.compile(r"[-+]?(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# `<Enum.X: 1>`, `<CUDAGraphMode.FULL: (2, 1)>`, `<function f.<locals>.g at 0x7f>`: one level
# of nesting, bounded, so a failed attempt costs little however many `<` a line holds.
_ANGLE = re.compile(r"<[^<>\n]{0,300}(?:<[^<>\n]{0,300}>[^<>\n]{0,300}){0,4}>")
_IDENT = re.compile(r"[A-Za-z_][\w.]*")
_KEY = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*=(?!=)")
_WORDS: dict[str, Any] = {
    "None": None, "True": True, "False": False, "null": None, "true": True, "false": False,
    "inf": math.inf, "nan": math.nan,
}  # fmt: skip
_OPEN_CLOSE = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = ")]}"


def parse_repr(text: str) -> Any:
    """Parse one repr value. Text that is not one whole value is returned as it is (stripped)."""
    reader = _Reader(text)
    value = reader.value(0, ",")
    reader.skip_ws()
    if reader.pos < len(reader.s):
        return text.strip()
    return value


def parse_kwargs(text: str) -> dict[str, Any]:
    """Parse a flat `key=value, key=value` list (values are reprs).

    Where the list stops making sense, the rest of the text is kept under `__unparsed__`.
    """
    reader = _Reader(text)
    s = reader.s
    out: dict[str, Any] = {}
    while True:
        reader.skip_ws()
        if reader.pos >= len(s):
            return out
        m = _KEY.match(s, reader.pos)
        if m is None:
            out[UNPARSED_KEY] = s[reader.pos :].strip()
            return out
        reader.pos = m.end()
        out[m[1]] = reader.value(0, ",")
        reader.skip_ws()
        if reader.pos < len(s) and s[reader.pos] == ",":
            reader.pos += 1
        elif reader.pos < len(s):
            out[UNPARSED_KEY] = s[reader.pos :].strip()
            return out


def to_jsonable(value: Any) -> Any:
    """Make parsed data `json.dumps`-safe: tuples to lists, keys to str, NaN/inf to text."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else repr(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


class _Reader:
    """Recursive descent over `s`; every method consumes text and returns a value."""

    def __init__(self, text: str) -> None:
        self.s = text if isinstance(text, str) else str(text)
        self.pos = 0

    def skip_ws(self) -> None:
        m = _WS.match(self.s, self.pos)
        if m is not None:
            self.pos = m.end()

    def value(self, depth: int, stops: str) -> Any:
        """Read one value; `stops` are the extra characters that end a bare word here."""
        self.skip_ws()
        s, pos = self.s, self.pos
        if pos >= len(s):
            return ""  # a missing value, as `bare` gives it: not Python's None
        ch = s[pos]
        if depth >= _MAX_DEPTH:
            return self.bare(stops)
        if ch in _OPEN_CLOSE:
            return self.container(depth, ch)
        if ch in "'\"" or (ch in "rRbBuU" and pos + 1 < len(s) and s[pos + 1] in "'\"rRbB"):
            m = _STRING.match(s, pos)
            if m is not None:
                self.pos = m.end()
                return _decode_string(m)
        if ch == "<":
            m = _ANGLE.match(s, pos)
            if m is not None:
                self.pos = m.end()
                return m[0]
        m = _NUMBER.match(s, pos)
        if m is not None and self.ends_word(m.end(), stops):
            self.pos = m.end()
            return _number(m[0])
        m = _IDENT.match(s, pos)
        if m is not None:
            word = m[0]
            if m.end() < len(s) and s[m.end()] == "(":
                self.pos = m.end()
                return self.call(depth, word)
            if word in _WORDS and self.ends_word(m.end(), stops):
                self.pos = m.end()
                return _WORDS[word]
        return self.bare(stops)

    def ends_word(self, end: int, stops: str) -> bool:
        m = _WS.match(self.s, end)
        end = m.end() if m is not None else end
        return end >= len(self.s) or self.s[end] in stops or self.s[end] in _CLOSERS

    def bare(self, stops: str) -> str:
        """Unquoted text up to a stop character or an unmatched closer, brackets balanced."""
        s, start = self.s, self.pos
        i, n, depth = start, len(s), 0
        while i < n:
            ch = s[i]
            if ch in _OPEN_CLOSE:
                depth += 1
            elif ch in _CLOSERS:
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and ch in stops:
                break
            i += 1
        self.pos = i
        return s[start:i].strip()

    def items(self, closer: str, item: Callable[[], None]) -> None:
        """Read comma-separated items until `closer`; `item()` reads and stores one."""
        s = self.s
        while True:
            self.skip_ws()
            if self.pos >= len(s):
                return
            ch = s[self.pos]
            if ch == closer:
                self.pos += 1
                return
            if ch in _CLOSERS:
                return  # someone else's closer: let the enclosing reader have it
            if ch == ",":
                self.pos += 1
                continue
            before = self.pos
            item()
            if self.pos == before:
                self.pos += 1  # a stray character: skip it so reading always moves on

    def container(self, depth: int, opener: str) -> Any:
        self.pos += 1
        closer = _OPEN_CLOSE[opener]
        if opener == "{":
            return self.braces(depth)
        out: list[Any] = []
        trailing_comma = False

        def item() -> None:
            nonlocal trailing_comma
            out.append(self.value(depth + 1, ","))
            self.skip_ws()
            trailing_comma = self.pos < len(self.s) and self.s[self.pos] == ","

        self.items(closer, item)
        if opener == "(" and (len(out) != 1 or trailing_comma):
            return tuple(out)
        return out if opener == "[" else out[0]

    def braces(self, depth: int) -> Any:
        result: dict[Any, Any] = {}
        members: list[Any] = []

        def item() -> None:
            key = self.value(depth + 1, ",:")
            self.skip_ws()
            if self.pos < len(self.s) and self.s[self.pos] == ":":
                self.pos += 1
                result[_hashable(key)] = self.value(depth + 1, ",")
            else:
                members.append(key)

        self.items("}", item)
        # `{1, 2}` is a set: JSON has no sets, so it becomes a list.
        return members if members and not result else result

    def call(self, depth: int, name: str) -> dict[str, Any]:
        self.pos += 1
        out: dict[str, Any] = {TYPE_KEY: name}
        args: list[Any] = []

        def item() -> None:
            m = _KEY.match(self.s, self.pos)
            if m is not None:
                self.pos = m.end()
                out[m[1]] = self.value(depth + 1, ",")
            else:
                args.append(self.value(depth + 1, ","))

        self.items(")", item)
        if args:
            out[ARGS_KEY] = args
        return out


def _decode_string(m: re.Match[str]) -> str:
    body = m["s"] if m["s"] is not None else m["d"]
    prefix = m["prefix"].lower()
    if "\\" not in body or "r" in prefix:
        return body
    try:
        decoded = ast.literal_eval(m[0])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return body
    if isinstance(decoded, bytes):
        return decoded.decode("utf-8", errors="backslashreplace")
    return decoded if isinstance(decoded, str) else body


def _number(text: str) -> Any:
    try:
        if any(c in text for c in ".eE"):
            return float(text)
        return int(text)
    except ValueError:  # e.g. more digits than int() accepts from a string
        return text


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        return repr(key)
    return key
