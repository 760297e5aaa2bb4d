"""What both sides of the link agree on: how an entry point gets its input and gives its answer.

A one-shot entry (discovery, a probe, a restart query) reads its parameters as one JSON object
on stdin and writes its answer as one JSON object after the `MARKER` line (which also names the
interpreter that ran), so that whatever an import prints before it (vLLM's logger does) cannot
corrupt the answer; the console reads it with `console.transport.remote_scripts.run_json`.
Expected problems are facts in the answer and the exit status is 0; a crash exits non-zero with
its traceback on stderr. A long-lived entry (agent, follow) gets its arguments in `ARGS_ENV` (a
JSON list) and writes JSON lines or frames of its own.

Written in the oldest Python 3 syntax, like `__main__`, which reads `TOO_OLD_EXIT` from here
before it knows whether this Python is new enough for the rest.
"""

import json
import sys

MARKER = "@@vllm-console-json@@"
ARGS_ENV = "VLLM_CONSOLE_ARGS"
TOO_OLD_EXIT = 3
"""The exit status of an entry started by a Python older than `MIN_PYTHON` (with one JSON line
saying so, `too_old` set)."""
NEEDS_SITE = ("probe-code", "probe-fields")
"""The entries that import the serving vLLM, so need its interpreter's site-packages. The
rest use the standard library alone and run with `-S`: no site-packages, so no `.pth` file
runs at each start (one that imports a package costs every helper run: 35 ms with this
project's CI Python; one that fails prints on stderr)."""


def read_params():
    """The entry's parameters: the JSON object on stdin ({} when stdin is empty)."""
    text = sys.stdin.read()
    value = json.loads(text) if text.strip() else {}
    return value if isinstance(value, dict) else {}


def answer(value, **dumps):
    """Write `value` (a dict) after the marker line, which names the interpreter that ran
    (the console runs it directly next time, not through a version manager's shim) as a JSON
    string: a path may hold a newline; the entry's exit status (0)."""
    sys.stdout.write(MARKER + " " + json.dumps(sys.executable or "") + "\n"
                     + json.dumps(value, **dumps) + "\n")
    sys.stdout.flush()
    return 0


def interpreter_flags(entry):
    """The interpreter's options for `entry` (see `NEEDS_SITE`)."""
    return [] if entry in NEEDS_SITE else ["-S"]
