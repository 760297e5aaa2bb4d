"""What the host side and the laptop side must say and read alike, in one place (stdlib only,
imported by both): the lines that mark where a run of `vllm serve` starts and when it is ready,
and the one rule that orders them; the port and address a serve command line asks for; the
words, file names and environment names the restart's trace hook and last-launch record share.
The follower, the log probe and the restart step on the host and the telemetry, the chain and
the restart client on the laptop read them from here, so that they cannot drift
(tests/test_vocabulary_agreement.py feeds both sides the same real logs and command lines).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from enum import IntEnum

# -- where a run starts -----------------------------------------------------------------------

RESTART_MARKER = "[vllm-console] restart at"
"""The first words of the line the console's restart appends to the log before relaunching:
always the first line of a run (also of one that dies before vLLM writes a word)."""

BANNER = "server version "
"""In the version banner: `vLLM server version X, serving model M` (older: `vLLM API server
version X`)."""

LOGO_VERSION = "  version "
"""In the ASCII logo's banner row `▄▄ ▄█ █ ... █  version X` (0.30+)."""

ARGS_LINE = "non-default args:"
"""The API server's `non-default args: {...}`."""

ENGINE_START = "LLM engine ("
"""In `Initializing a V1 LLM engine (vX) with config: ...` (each data-parallel engine)."""

READY_LINE = "Application startup complete"
"""uvicorn's line once the API server serves (vLLM prints no ready line of its own)."""

RUN_MARKERS = (RESTART_MARKER, BANNER, LOGO_VERSION, ARGS_LINE, ENGINE_START)
"""Every line that is a run mark (`run_mark`) holds one of these: what a scan on the host
searches for (`bytes.find`) before it asks `run_mark` about the line."""

_ENGINE_LINE = re.compile(r"Initializing an? (?:(V\d+) )?LLM engine \(([^()\s]{0,200})\)")


class RunMark(IntEnum):
    """A line that marks a run of `vllm serve`, in the order one run writes them."""

    RESTART = 0  # the console's restart marker
    BANNER = 1  # `vLLM server version X`, the logo's version row, older `vLLM API server ...`
    ARGS = 2  # `non-default args: {...}`
    ENGINE = 3  # `Initializing a V1 LLM engine (vX) with config: ...`


def engine_start(text: str) -> tuple[str | None, str, int] | None:
    """The engine start line's engine kind (`V1`, None for the old wording), vLLM version (a
    `v` before its digits taken off) and where the match ends; None for any other line. The
    one reading of that line: the run mark, the engine config and the start-up phase."""
    if ENGINE_START not in text:
        return None
    m = _ENGINE_LINE.search(text)
    if m is None:
        return None
    version = m[2]
    if version.startswith("v") and version[1:2].isdigit():
        version = version[1:]
    return m[1], version, m.end()


_SGR = re.compile("\x1b\\[[0-9;]*m")


def run_mark(line: str) -> RunMark | None:
    """The run mark a log line is (raw or parsed: the prefix and colour codes do not matter),
    or None. The one rule both sides ask, line by line."""
    if "\x1b" in line:
        line = _SGR.sub("", line)
    if RESTART_MARKER in line:
        return RunMark.RESTART
    if ENGINE_START in line and engine_start(line) is not None:
        return RunMark.ENGINE
    if ARGS_LINE in line:
        return RunMark.ARGS
    if BANNER in line or _logo_version_row(line):
        return RunMark.BANNER
    return None


def _logo_version_row(line: str) -> bool:
    """The logo is drawn with block elements (U+2580..U+259F): its version row has one right
    before `  version`."""
    at = line.find(LOGO_VERSION)
    return at > 0 and "\u2580" <= line[at - 1] <= "\u259f"


def starts_run(last: RunMark | None, mark: RunMark) -> bool:
    """Whether `mark` begins a new run, after `last` (the latest mark of the run so far, None
    before any): a run writes restart marker, banner, `non-default args`, engine line in that
    order, so a mark that goes back in that order is the next run, and so is a second restart
    marker (a relaunch that died before vLLM wrote anything). The other marks may repeat within
    a run: the logo banner spans rows, each data-parallel engine writes its own engine line,
    and a repeated `non-default args` is no surer a sign. A start-up that dies before its
    engine line is still a run of its own: the next one's banner goes back in the order."""
    if last is None or mark < last:
        return True
    return mark == last and mark is RunMark.RESTART


def current_run_start(marks: Iterable[RunMark | None]) -> int | None:
    """The index of the mark that starts the last run among lines' marks, read forwards (None:
    no mark)."""
    start = None
    last: RunMark | None = None
    for i, mark in enumerate(marks):
        if mark is None:
            continue
        if starts_run(last, mark):
            start = i
        last = mark
    return start


def last_run_start(marks_backwards: Iterable[tuple[int, RunMark]]) -> int | None:
    """`current_run_start` read backwards, for a scan from the end of a big log: the position
    of the mark that starts the last run, given (position, mark) from the last mark back.
    It stops at the first mark the rule says starts a run, never reading further back."""
    later: tuple[int, RunMark] | None = None
    for pos, mark in marks_backwards:
        if later is not None and starts_run(mark, later[1]):
            return later[0]
        if mark is RunMark.RESTART:  # first in the order: nothing before it is its run's
            return pos
        later = (pos, mark)
    return None if later is None else later[0]


# -- where a server is ----------------------------------------------------------------------

DEFAULT_PORT = 8000
"""vLLM's port when `--port` is not given."""

DEFAULT_MATCH = "vllm serve"
"""The words that find the serve process when the hosts file names none (`match`)."""

_ANY = ("", "*", "localhost")


def reachable(host: str | None) -> str:
    """Where a server bound to `host` (`--host`, a URL's host) is reached from its own
    machine: a wildcard (`0.0.0.0`, `::`, `[::]`, `*`, none) or `localhost` on 127.0.0.1,
    anything else as written (brackets off). The one rule for discovery, the restart's ready
    check and telemetry."""
    import ipaddress  # here: the trace hook imports this module into every process it is in

    bare = (host or "").strip().strip("[]")
    if bare in _ANY:
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(bare).is_unspecified:
            return "127.0.0.1"
    except ValueError:
        pass
    return bare


def last_option(argv: Sequence[str], *names: str) -> str | None:
    """The value of the last `--name V` / `--name=V` in argv for any of `names` (spellings of
    one option), as argparse keeps the last; None when not given."""
    value: str | None = None
    for i, word in enumerate(argv):
        for name in names:
            if word == name and i + 1 < len(argv):
                value = argv[i + 1]
            elif word.startswith(name + "="):
                value = word[len(name) + 1:]
    return value


def argv_port(argv: Sequence[str]) -> int:
    """The port a serve command line asks for, as vLLM's argparse reads it: the last `--port N`
    or `--port=N` decides (`--port=0` asks for 0: the kernel picks one). A last value that is
    not a port number (`--port 9000 --port abc`) is a line argparse refuses, that no server
    runs: the answer is then vLLM's default, never an earlier `--port`."""
    value = (last_option(argv, "--port") or "").strip()
    if value.isascii() and value.isdigit() and int(value) <= 65535:  # int('²') raises
        return int(value)
    return DEFAULT_PORT


def argv_host(argv: Sequence[str]) -> str | None:
    """The `--host` a serve command line binds (None: not given, vLLM binds every address)."""
    return last_option(argv, "--host")


# -- what the restart leaves on the host ---------------------------------------------------

OWN_ENV_PREFIX = "VLLM_CONSOLE_"
"""Every environment variable the console sets starts so (a server with or without them is the
same server)."""

TRACE_TAG = "[vllm-console-trace]"
"""What starts each line the trace hook writes into the serve log (`checks.trace`'s format)."""

TRACE_ENV_HOOK = "VLLM_CONSOLE_TRACE_HOOK"
"""Set (to the hook's directory) in a traced run's environment: the hook installs itself."""

TRACE_ENV_WATCH = "VLLM_CONSOLE_TRACE_WATCH"
"""The functions the hook watches (a JSON list of `module:qualname`)."""

TRACE_ENV_ORIG_PYTHONPATH = "VLLM_CONSOLE_ORIG_PYTHONPATH"
"""The PYTHONPATH a traced run had before the hook's directory went in front of it."""

HOOK_DIR_PREFIX = "trace-hook-"
"""The trace hook's directory name in the console's private directory on the host
(`trace-hook-<digest>`)."""

HOOK_MODULE_VOCABULARY = "vllm_console_vocabulary"
"""This module's name beside the hook (`sitecustomize.py`) in its directory: the hook reads
its words from it."""


def is_hook_dir(path: str) -> bool:
    """Whether a path (a PYTHONPATH entry, a bind mount's source) is a trace hook's directory."""
    return f"/vllm-console/{HOOK_DIR_PREFIX}" in path


LAST_LAUNCH_PREFIX, LAST_LAUNCH_SUFFIX = "last-launch-", ".json"


def last_launch_file(key: str) -> str:
    """The file name of a host entry's last-launch record (`key`: the entry's, never shared)."""
    return f"{LAST_LAUNCH_PREFIX}{key}{LAST_LAUNCH_SUFFIX}"
