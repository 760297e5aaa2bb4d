"""`vllm-console` command line: the TUI, `demo`, `check`, `status`, `restart`, `stacks`, `sim`,
`init`, `completion`.

The commands and their exit codes are the external contract (docs/design.md). Each subcommand
lives in `console/cli/commands/<name>.py` with a `run(args) -> int` that returns its exit status or
raises; `main` is the one place that turns a failure into one line on stderr and the command's
"could not run" status (2; 3 for `check`, which follows the monitoring-plugin convention), never
a traceback. The options that override a host's settings are generated from the settings model
(`console.settings.overrides`), their help from the fields' docstrings.

Start-up is on the user's clock (`--help`, `--version`, the console's first frame): this module
imports only argparse at the top. `vllm-console --help` and `--version` build the parser without
the settings model (pydantic and the models cost ~0.1 s of CPU; their options appear only in the
subcommands' help, so the text is the same: tests/cli/test_cli_fast_help.py), and so does
`vllm-console --url URL`, whose one override it adds by hand (`parser_for`); a command's own
imports are its module's (`console/cli/commands/<name>.py`).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import shlex
import sys
from collections.abc import Sequence
from types import ModuleType

from vllm_console.console import __version__

_ARGPARSE_USAGE = 2
SHELLS = ("bash", "zsh", "fish")
"""The shells `completion` writes a script for."""
_TOP_LEVEL_ONLY = frozenset({"-h", "--help", "--version"})
_CONSOLES = ("tui", "demo")
"""The commands whose start-up ends at the console's first frame (see `main`)."""

HOST_HELP = "a hosts-file name, an ssh_config alias, or [user@]host[:port]"


class _ScenariosListed(argparse.HelpFormatter):
    """`demo --help` and `sim --help` end with the scenarios (the simulator's module is read
    only when the help is asked for: it is not on the console's start-up path)."""

    def format_help(self) -> str:
        import textwrap

        from vllm_console.console.sim import SCENARIOS

        lines = [textwrap.fill(s.description, self._width, initial_indent=f"  {name}: ",
                               subsequent_indent="      ") for name, s in SCENARIOS.items()]
        return super().format_help() + "\nscenarios (--scenario NAME):\n" + \
            "\n".join(lines) + "\n"


def _window(text: str) -> float:
    """`--window S`: seconds, above 0 and at most an hour."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text} s: give 0 < S <= 3600")
    return value


def _common(parser: argparse.ArgumentParser, settings: bool) -> None:
    g = parser.add_argument_group("host options")
    g.add_argument("--config", metavar="PATH",
                   help="hosts file (default: $XDG_CONFIG_HOME/vllm-console/hosts.toml)")
    g.add_argument("--local", action="store_true", help="this machine, no SSH")
    g.add_argument("--known-hosts", metavar="PATH",
                   help="known_hosts file checked strictly (default: ssh_config's "
                        "UserKnownHostsFile, then ~/.ssh/known_hosts)")
    g.add_argument("--identity", metavar="PATH",
                   help="private key file (default: ssh_config's IdentityFile, ~/.ssh, the "
                        "agent)")
    g.add_argument("--accept-new", action="store_true",
                   help="record an unknown host key (never a changed one), like OpenSSH "
                        "StrictHostKeyChecking=accept-new")
    g.add_argument("--readonly", action="store_true", help="no restart, no writes on the host")
    if not settings:
        return
    from vllm_console.console.settings import override_type, overrides

    s = parser.add_argument_group("the hosts file's settings, overridden (the serve ones are "
                                  "discovered from the running process when absent)")
    for name, metavar, description, default in overrides():
        text = description[:1].lower() + description[1:].rstrip(".")
        text += f" (default: {default})" if default else ""
        s.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar=metavar,
                       type=override_type(name), help=text.replace("%", "%%"))


def build_parser(*, settings: bool = True) -> argparse.ArgumentParser:
    """The whole command line; `settings=False` leaves out the options generated from the
    settings model (the subcommands' `--python`, `--log`, ...), which the top-level help and
    `--version` do not show."""
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
    _common(tui, settings)

    demo = sub.add_parser("demo", help="the console on a built-in simulated host (offline)",
                          description="Open the console on a simulated serving host: no GPU, "
                                      "no sshd, no network. The default scenario reproduces the "
                                      "DFlash acceptance incident (1.17 instead of ~6.4).",
                          formatter_class=_ScenariosListed)
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
    _common(check, settings)

    status = sub.add_parser("status", help="one snapshot: GPUs, serve process, engine, "
                                           "spec decode",
                            description="Print one snapshot of HOST. Exit 0, or 2 when it "
                                        "could not run.")
    status.add_argument("host", metavar="HOST", help=HOST_HELP)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.add_argument("--window", type=_window, metavar="S",
                        help="latency over S seconds of scrapes (default: the look's own few "
                             "seconds, or since the server's start when no request finished "
                             "in them)")
    _common(status, settings)

    restart = sub.add_parser("restart", help="stop the serve tree, relaunch, wait until ready",
                             description="The same restart as the console's `r` key. Exit 0 "
                                         "once the new server is ready; 1 when it did not come "
                                         "up (reason printed); 2 when it could not run.")
    restart.add_argument("host", metavar="HOST", help=HOST_HELP)
    restart.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    how = restart.add_mutually_exclusive_group()
    how.add_argument("--trace", action="store_true",
                     help="relaunch with the activation trace hook (this run only)")
    how.add_argument("--debug", action="store_true",
                     help="relaunch with vLLM's debugging switches (the console's `D`); a "
                          "plain restart takes them out again")
    _common(restart, settings)

    stacks = sub.add_parser("stacks", help="the Python stack of every thread of the server's "
                                           "processes (py-spy on the host)",
                            description="`py-spy dump` of every process of the server's tree "
                                        "(API server, EngineCore, workers), labelled by role. "
                                        "Exit 0 every process dumped; 1 some not (each says "
                                        "why); 2 it could not run (no py-spy, not allowed to "
                                        "trace: one line says what to do).")
    stacks.add_argument("host", metavar="HOST", help=HOST_HELP)
    stacks.add_argument("--json", action="store_true", help="print one JSON object")
    stacks.add_argument("--native", action="store_true",
                        help="native frames too (suspends each process for the dump)")
    stacks.add_argument("--pid", type=int, action="append", metavar="PID",
                        help="only this process (repeatable)")
    _common(stacks, settings)

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
                                     "SSH to localhost.",
                         formatter_class=_ScenariosListed)
    sim.add_argument("--scenario", default="incident", help="scenario (default: incident)")
    sim.add_argument("--root", metavar="DIR", help="where to write the tree (required)")
    sim.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    sim.add_argument("--list", action="store_true", help="list the scenarios and exit")

    init = sub.add_parser("init", help="write a commented hosts file to fill in",
                          description="Write a commented example hosts file (never over an "
                                      "existing one). Exit 0 written, 2 when it could not.")
    init.add_argument("--config", metavar="PATH",
                      help="where (default: $XDG_CONFIG_HOME/vllm-console/hosts.toml)")

    completion = sub.add_parser("completion", help="print a shell completion script",
                                description="Print the completion script for SHELL: commands, "
                                            "options, and hosts from the hosts file and "
                                            "~/.ssh/config. bash: `source <(vllm-console "
                                            "completion bash)`; zsh: `source <(vllm-console "
                                            "completion zsh)`; fish: `vllm-console completion "
                                            "fish | source`.")
    completion.add_argument("shell", metavar="SHELL", choices=(*SHELLS, "hosts"),
                            help="bash, zsh or fish; `hosts` lists the host names it offers")
    completion.add_argument("--config", metavar="PATH", help="hosts file to read host names "
                            "from (default: $XDG_CONFIG_HOME/vllm-console/hosts.toml)")
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers by name (what `_normalise` and the completion read; argparse
    keeps them in `_actions`, unchanged since Python 3.2, and offers no public accessor)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _value_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option of any subcommand that takes a value: the word after it is that value,
    never the subcommand."""
    return {flag for sub in subcommands(parser).values() for action in sub._actions
            if action.nargs != 0 for flag in action.option_strings}


def positionals(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """The words that are neither options nor an option's value (the subcommand, HOST)."""
    value_options, found = _value_options(parser), []
    words = iter(argv)
    for word in words:
        if word in value_options:
            next(words, None)
        elif not word.startswith("-"):
            found.append(word)
    return found


def _normalise(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Put the subcommand first; a bare HOST means `tui HOST`."""
    names, value_options = subcommands(parser), _value_options(parser)
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in value_options:
            i += 2
            continue
        if word.startswith("-"):
            if word in ("-h", "--help", "--version"):
                return argv
            i += 1
            continue
        if word in names:
            return [word, *argv[:i], *argv[i + 1:]]
        break
    return ["tui", *argv]


def _hint_for_a_host_named(command: str, argv: list[str]) -> None:
    """`vllm-console sim` runs the subcommand even when a host is called `sim`: when that
    failed and such a host exists, say how to open it."""
    from vllm_console.console.cli.commands.common import emit
    from vllm_console.console.cli.host_names import host_names

    config = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else None
    if command in host_names(config):
        opens = shlex.join(["vllm-console", "tui", command, *(["--config", config] if config
                                                             else [])])
        emit(f"vllm-console: `{command}` is a subcommand; to open the host {command!r}, run "
             f"`{opens}`", sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up allocates what lives as long as the process (modules, classes, the parser), so the
    # cyclic collector's passes over it free nothing: ~45 ms of CPU before the console's first
    # frame, a full pass 20-25 ms of it. Off until a command's own work begins (`_run`); the
    # console turns it on once its sessions are open (`ConsoleApp._open_sessions`).
    gc.disable()
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        gc.enable()


def url_alone(args_in: Sequence[str]) -> bool:
    """`vllm-console [tui] --url URL [--theme THEME]`: the console on a server's URL alone,
    which reads no hosts file and needs none of the settings' options."""
    words = list(args_in[1:] if args_in[:1] == ["tui"] else args_in)
    seen = False
    while words:
        word = words.pop(0)
        name = word.split("=", 1)[0]
        if name not in ("--url", "--theme"):
            return False
        if "=" not in word:
            if not words:
                return False
            words.pop(0)
        seen = seen or name == "--url"
    return seen


def parser_for(args_in: Sequence[str]) -> argparse.ArgumentParser:
    """The command line for these words: without the settings' generated options (pydantic
    and the models: ~0.1 s before the first frame) for `--help`, `--version`, a URL alone and
    `completion` (which takes none of them; `completion hosts` runs at every Tab)."""
    if args_in and _TOP_LEVEL_ONLY.issuperset(args_in):
        return build_parser(settings=False)  # nothing but the top level
    if args_in[:1] == ["completion"]:
        return build_parser(settings=False)
    if url_alone(args_in):
        parser = build_parser(settings=False)
        subcommands(parser)["tui"].add_argument("--url", metavar="URL")  # the override's
        return parser
    return build_parser()


def _misspelt_command(args_in: list[str], parser: argparse.ArgumentParser) -> str:
    """Why the words, which name no subcommand, are no `tui HOST` either ("" when they may
    be): `vllm-console statsu` opened the console on a host called `statsu`."""
    words = positionals(args_in, parser)
    if not words or words[0] in subcommands(parser) or "--url" in args_in:
        return ""
    from vllm_console.console.cli.typed_host import misspelt_command

    config = args_in[args_in.index("--config") + 1] if "--config" in args_in[:-1] else None
    return misspelt_command(words, [n for n in subcommands(parser) if n != "tui"], config)


def _main(args_in: list[str]) -> int:
    parser = parser_for(args_in)
    words = _normalise(args_in, parser)
    command = words[0] if words and words[0] in subcommands(parser) else "tui"
    if command == "tui" and args_in[:1] != ["tui"] and \
            not _TOP_LEVEL_ONLY.intersection(args_in):
        misspelt = _misspelt_command(args_in, parser)
        if misspelt:
            from vllm_console.console.cli.commands.common import emit

            emit(f"vllm-console: {misspelt}", sys.stderr)
            return _ARGPARSE_USAGE
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:
        if exc.code != _ARGPARSE_USAGE:
            raise  # --help, --version
        # argparse said why (bad usage); the status is the command's "could not run", so
        # that `check` says UNKNOWN (3) to a monitoring system, not CRITICAL (2).
        code = _could_not_run(_command_module(command))
    else:
        code = _run(command, args)
    if code == _could_not_run(_command_module(command)) and command != "tui":
        _hint_for_a_host_named(command, args_in)
    return code


def _command_module(command: str) -> ModuleType:
    return importlib.import_module(f"vllm_console.console.cli.commands.{command}")


def _could_not_run(module: ModuleType) -> int:
    from vllm_console.console.cli.commands.common import (
        EXIT_COULD_NOT_RUN,  # the command module imported it
    )

    return int(getattr(module, "COULD_NOT_RUN", EXIT_COULD_NOT_RUN))


def _check_typed(args: argparse.Namespace) -> None:
    """The options (one rule for every command: `console.cli.options`) and the HOST a person
    typed, refused before the command runs when they cannot work."""
    from vllm_console.console.cli.commands.common import CommandError
    from vllm_console.console.cli.options import check_options

    check_options(args)
    host, config = getattr(args, "host", None), getattr(args, "config", None)
    if not host or getattr(args, "local", False):
        return
    from vllm_console.console.cli.typed_host import bare, in_hosts_file, unknown_host

    if not bare(host) or in_hosts_file(host, config):
        return
    from vllm_console.console.transport.connect import host_config_from_args

    # The settings first (every override): what is wrong there is said in the words the
    # command would use, before the host's name is looked up.
    host_config_from_args(args)
    problem = unknown_host(host, config)
    if problem:
        raise CommandError(problem)


def _run(command: str, args: argparse.Namespace) -> int:
    """The command's exit status; a failure as one line on stderr and "could not run"."""
    from vllm_console.console.cli.commands.common import EXPECTED, emit, failure_line, one_line

    who = "vllm-console" if command == "tui" else f"vllm-console {command}"
    module = _command_module(command)
    if command not in _CONSOLES:
        gc.enable()
    try:
        _check_typed(args)
        return int(module.run(args))
    except KeyboardInterrupt:
        emit("interrupted", sys.stderr)
        return 130
    except Exception as exc:
        if isinstance(exc, getattr(module, "EXPECTED", EXPECTED)):
            emit(failure_line(who, exc), sys.stderr)
        else:  # a bug of ours: still one line, and the way to get it fixed
            emit(f"{who}: could not run: {type(exc).__name__}: {one_line(exc)} (please "
                 "report this)", sys.stderr)
        return _could_not_run(module)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
