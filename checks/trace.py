"""Activation trace lines: how a traced run proves (or disproves) that SWA was built.

vLLM logs nothing when it builds sliding-window layers, so the runtime-activation link can only
say `unknown` from an ordinary log. `vllm-console restart HOST --trace` relaunches the server
with a hook that wraps the profile's `watch` functions and writes one line per event into the
serve log (stdout). The runtime link reads these lines from the current run.

Line format (one line, anywhere in it — a vLLM prefix before it is fine)::

    [vllm-console-trace] {"v": 1, "event": "call", "fn": "MODULE:QUALNAME", "pid": 123,
                          "args": {...}, "result": ...}

- `v`: format version, 1.
- `event`: `installed` (the hook wrapped `fn`), `missing` (`fn` does not exist in this vLLM),
  `call` (one call of `fn` returned or raised).
- `fn`: the watched function exactly as the profile's `watch` names it.
- `args`: a JSON summary of the arguments, not the objects. For the dflash-swa functions:
  `_get_dflash_layer_types(config)` -> `{"num_hidden_layers", "layer_types", "sliding_window",
  "use_sliding_window"}` read from `config`; `_resolve_layer_attention(config, layer_idx)` ->
  the same plus `"layer_idx"`.
- `result`: the return value as JSON (tuples as lists): `_get_dflash_layer_types` returns the
  layer types (`["sliding_attention", ..., "full_attention"]`), `_resolve_layer_attention`
  returns `[sliding_window_or_null, causal]`.
- `raised` (instead of `result`): `"ExceptionType: message"` when the call raised.

`format_trace_line` builds a line; `parse_trace_line` reads one (None for anything else,
never an exception). Lines longer than `MAX_LINE` are not trace lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vllm_console.console.hostside.vocabulary import TRACE_TAG

TRACE_VERSION = 1
MAX_LINE = 64 * 1024
EVENTS = ("installed", "missing", "call")


@dataclass(frozen=True)
class TraceEvent:
    """One trace line, parsed."""

    event: str
    fn: str
    pid: int | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    result: Any = None
    raised: str | None = None

    @property
    def function(self) -> str:
        """The bare function name (`_resolve_layer_attention`)."""
        return self.fn.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def format_trace_line(event: str, fn: str, *, args: Mapping[str, Any] | None = None,
                      result: Any = None, raised: BaseException | str | None = None,
                      pid: int | None = None) -> str:
    """The trace line for one event (no newline). `result` must be JSON-able (tuples are)."""
    if event not in EVENTS:
        raise ValueError(f"unknown trace event {event!r}")
    obj: dict[str, Any] = {"v": TRACE_VERSION, "event": event, "fn": fn}
    if pid is not None:
        obj["pid"] = pid
    if args:
        obj["args"] = dict(args)
    if raised is not None:
        obj["raised"] = (raised if isinstance(raised, str)
                         else f"{type(raised).__name__}: {raised}")
    elif event == "call":
        obj["result"] = result
    return f"{TRACE_TAG} {json.dumps(obj, default=repr, separators=(', ', ': '))}"


def parse_trace_line(line: str) -> TraceEvent | None:
    """The event a line carries, or None when it is not a (valid) trace line."""
    if len(line) > MAX_LINE:
        return None
    at = line.find(TRACE_TAG)
    if at < 0:
        return None
    body = line[at + len(TRACE_TAG):].strip()
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("v") != TRACE_VERSION:
        return None
    event, fn = obj.get("event"), obj.get("fn")
    if event not in EVENTS or not isinstance(fn, str) or not fn:
        return None
    args = obj.get("args")
    pid = obj.get("pid")
    raised = obj.get("raised")
    return TraceEvent(
        event=event,
        fn=fn,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        args=args if isinstance(args, dict) else {},
        result=obj.get("result"),
        raised=str(raised) if raised is not None else None,
    )
