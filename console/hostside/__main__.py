"""Runs one entry point of the host-side package: `PYTHON BUNDLE ENTRY [ARGS]`.

The arguments are ARGS, or (when there are none) the JSON list in `VLLM_CONSOLE_ARGS`: the
console passes them in the environment so that a helper's command line never holds the match
words or a log path (anything looking for `vllm serve` by command line would find the helper).

Written in the oldest Python 3 syntax on purpose (no f-strings, no annotations): it is what
tells a host whose Python is too old, as one line of JSON the console reads, exit status 3.
"""

import json
import os
import sys

ENTRIES = {
    "agent": "agent",
    "follow": "follow",
    "follow-container": "container_follow",
    "discover": "discover",
    "probe-code": "probes.code_probe",
    "probe-configs": "probes.configs_probe",
    "probe-fields": "probes.fields_probe",
    "probe-log": "probes.log_probe",
    "container-log": "containers",
    "restart": "restart.main",
    "stacks": "stacks",
    "watchdog-dumps": "watchdog",
}
STREAMS = ("agent", "follow", "follow-container")


def main():
    from importlib import import_module

    package = __package__ or "vllm_console.console.hostside"
    minimum = import_module(package).MIN_PYTHON
    wire = import_module(package + ".wire")
    if sys.version_info[:2] < minimum:
        sys.stdout.write(json.dumps({"t": "error", "too_old": True, "msg": (
            "Python {} at {} is too old for the console's host side (it needs {}.{}+)".format(
                sys.version.split()[0], sys.executable, *minimum))}) + "\n")
        return wire.TOO_OLD_EXIT
    if len(sys.argv) < 2 or sys.argv[1] not in ENTRIES:
        sys.stderr.write("usage: BUNDLE {} [ARGS]\n".format("|".join(sorted(ENTRIES))))
        return 2
    args = sys.argv[2:]
    if not args and wire.ARGS_ENV in os.environ:
        args = json.loads(os.environ[wire.ARGS_ENV])
    entry = import_module(package + "." + ENTRIES[sys.argv[1]]).main
    if sys.argv[1] not in STREAMS:
        return entry(args)  # a crash: non-zero, its traceback on stderr (see wire)
    try:
        return entry(args)
    except Exception as exc:
        # A stream's last word, one JSON line (an agent line, a follower frame header alike):
        # the console shows it instead of a silent end.
        line = json.dumps({"t": "error", "msg": "{}: {}".format(type(exc).__name__, exc)},
                          separators=(",", ":"))
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except OSError:
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
