"""`vllm-console` command line: the TUI, `demo`, `check`, `status`, `restart`, `sim`.

The commands and their exit codes are the external contract (DESIGN.md). Each subcommand lives in
`console/commands/<name>.py` with a `run(args) -> int`; this module only parses and dispatches,
turning every expected failure into a one-line message and exit status 2 (3 for `check`, which
follows the monitoring-plugin convention), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from console import __version__

SUBCOMMANDS = ("demo", "check", "status", "restart", "sim", "tui", "fleet")

# Options that take a value: needed to find the subcommand word wherever it stands.
_VALUE_OPTIONS = {
    "--config", "--known-hosts", "--identity", "--profile", "--python", "--log", "--target",
    "--draft", "--match", "--url", "--nvidia-smi", "--reference", "--scenario", "--root",
    "--port", "--theme", "--prometheus", "--selector", "--host-label",
}

_ARGPARSE_USAGE = 2

HOST_HELP = "a hosts-file name, an ssh_config alias, or [user@]host[:port]"

SERVE_OVERRIDES = ("python", "log", "target", "draft", "match", "url", "nvidia_smi", "reference")


def _common(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("host options")
    g.add_argument("--config", metavar="PATH",
                   help="hosts file (default: $XDG_CONFIG_HOME/vllm-console/hosts.toml)")
    g.add_argument("--local", action="store_true", help="this machine, no SSH")
    g.add_argument("--known-hosts", metavar="PATH",
                   help="known_hosts file checked strictly (default ~/.ssh/known_hosts)")
    g.add_argument("--identity", metavar="PATH", help="private key file")
    g.add_argument("--accept-new", action="store_true",
                   help="record an unknown host key (never a changed one), like OpenSSH "
                        "StrictHostKeyChecking=accept-new")
    g.add_argument("--readonly", action="store_true", help="no restart, no writes on the host")
    g.add_argument("--profile", metavar="NAME|PATH",
                   help="checks profile (default auto: the one for the engine's speculative "
                        "method)")
    s = parser.add_argument_group("serve overrides (discovered from the running process "
                                  "when absent)")
    s.add_argument("--python", metavar="PATH", help="interpreter that runs vllm serve")
    s.add_argument("--log", metavar="PATH", help="the serve log")
    s.add_argument("--target", metavar="DIR", help="target model directory")
    s.add_argument("--draft", metavar="DIR", help="draft model directory")
    s.add_argument("--match", metavar="WORDS",
                   help="words that find the serve process (default 'vllm serve')")
    s.add_argument("--url", metavar="URL", help="server URL as seen from the host; with no "
                                                "HOST, the console on this URL alone (no SSH)")
    s.add_argument("--nvidia-smi", metavar="PATH", help="nvidia-smi on the host")
    s.add_argument("--reference", metavar="PATH", help="reference draft config.json (local)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-console",
        description="A terminal control console for a GPU host running `vllm serve` with "
                    "speculative decoding: GPUs, live log, engine config, draft config diff, "
                    "the verification chain, one-key restart.",
        epilog="HOST is a name from the hosts file, an ssh_config alias, or [user@]host[:port]. "
               "`vllm-console` alone opens every host of the hosts file. "
               "Without SSH: `vllm-console --url http://HOST:8000`, or `vllm-console fleet "
               "--prometheus URL`. Try it offline: `vllm-console demo`.")
    parser.add_argument("--version", action="version", version=f"vllm-console {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    tui = sub.add_parser("tui", help="the console on HOST (the default command)",
                         description="Open the console on HOST, or on every host of the hosts "
                                     "file when HOST is omitted.")
    tui.add_argument("host", nargs="?", metavar="HOST", help=HOST_HELP)
    tui.add_argument("--theme", help="colour theme (default: the last one used)")
    _common(tui)

    demo = sub.add_parser("demo", help="the console on a built-in simulated host (offline)",
                          description="Open the console on a simulated serving host: no GPU, "
                                      "no sshd, no network. The default scenario reproduces the "
                                      "DFlash acceptance incident (1.17 instead of ~6.4).")
    demo.add_argument("--scenario", default="incident", help="scenario (default: incident)")
    demo.add_argument("--list", action="store_true", help="list the scenarios and exit")
    demo.add_argument("--theme", help="colour theme")
    demo.add_argument("--readonly", action="store_true", help="no restart, no writes")

    check = sub.add_parser("check", help="run the verification chain headless",
                           description="Run the chain code-present -> fields-extracted -> "
                                       "runtime-activation -> config-correct on HOST. Exit "
                                       "status as a monitoring plugin's: 0 OK, every link "
                                       "passed; 1 WARNING, none failed but one is unknown or "
                                       "error; 2 CRITICAL, a link failed; 3 UNKNOWN, it could "
                                       "not run.")
    check.add_argument("host", metavar="HOST", help=HOST_HELP)
    check.add_argument("--json", action="store_true", help="print one JSON object")
    _common(check)

    status = sub.add_parser("status", help="one snapshot: GPUs, serve process, engine, "
                                           "spec decode",
                            description="Print one snapshot of HOST. Exit 0, or 2 when it "
                                        "could not run.")
    status.add_argument("host", metavar="HOST", help=HOST_HELP)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    _common(status)

    restart = sub.add_parser("restart", help="stop the serve tree, relaunch, wait until ready",
                             description="The same restart as the console's `r` key. Exit 0 "
                                         "once the new server is ready; 1 when it did not come "
                                         "up (reason printed); 2 when it could not run.")
    restart.add_argument("host", metavar="HOST", help=HOST_HELP)
    restart.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    restart.add_argument("--trace", action="store_true",
                         help="relaunch with the activation trace hook (this run only)")
    _common(restart)

    fleet = sub.add_parser("fleet", help="every vLLM server a Prometheus scrapes, no SSH",
                           description="One row per vLLM server from Prometheus (PromQL over "
                                       "its HTTP API): health, model, acceptance length, "
                                       "throughput, requests, KV cache, GPUs (dcgm-exporter). "
                                       "Enter opens a server. Exit 0, or 2 when Prometheus "
                                       "gave no table.")
    fleet.add_argument("--prometheus", metavar="URL",
                       help="Prometheus base URL (default: [fleet] prometheus in the hosts file)")
    fleet.add_argument("--selector", metavar="SEL",
                       help="label selector of the vLLM targets, e.g. '{job=\"vllm\"}'")
    fleet.add_argument("--host-label", metavar="LABEL",
                       help="the label that names a server (default instance)")
    fleet.add_argument("--json", action="store_true", help="print one refresh as JSON")
    fleet.add_argument("--config", metavar="PATH", help="hosts file")
    fleet.add_argument("--theme", help="colour theme")

    sim = sub.add_parser("sim", help="materialise a simulated host tree and run its fake "
                                     "vllm serve in the foreground",
                         description="Write a simulated serving host into DIR (fake vLLM "
                                     "install, models, nvidia-smi) and run its fake `vllm "
                                     "serve` in the foreground, to try the console over real "
                                     "SSH to localhost.")
    sim.add_argument("--scenario", default="incident", help="scenario (default: incident)")
    sim.add_argument("--root", metavar="DIR", help="where to write the tree (required)")
    sim.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    sim.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return parser


def _normalise(argv: list[str]) -> list[str]:
    """Put the subcommand first; a bare HOST means `tui HOST`."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in _VALUE_OPTIONS:
            i += 2
            continue
        if word.startswith("-"):
            if word in ("-h", "--help", "--version"):
                return argv
            i += 1
            continue
        if word in SUBCOMMANDS:
            return [word, *argv[:i], *argv[i + 1:]]
        break
    return ["tui", *argv]


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    words = _normalise(args_in)
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:
        # argparse says "bad usage" with 2, which is CRITICAL to a monitoring system running
        # `check`: for check, bad usage is UNKNOWN (DESIGN.md), argparse's message kept.
        if words[:1] == ["check"] and exc.code == _ARGPARSE_USAGE:
            from checks.models import EXIT_UNKNOWN  # here: pydantic stays off the first frame

            return EXIT_UNKNOWN
        raise
    module = importlib.import_module(f"console.commands.{args.command}")
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
