"""`vllm-console completion bash|zsh|fish`: a shell completion script, written from the parser.

Subcommands, their options, the values an option takes (files, directories, themes,
scenarios), and host names. The scripts ask `vllm-console completion hosts` for the host names
at each completion, so a host added to the hosts file or `~/.ssh/config` is offered at once.
zsh runs the bash function through `bashcompinit` (zsh's own bash-completion layer, which calls
it in sh emulation: 0-based arrays as in bash).
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

from vllm_console.console.cli.commands.common import emit
from vllm_console.console.cli.parser import SHELLS

_FILE_METAVARS = {"PATH", "NAME|PATH"}


@dataclass(frozen=True)
class Option:
    """One option of one subcommand, as completion sees it."""

    flags: tuple[str, ...]
    help: str
    value: str = ""
    """What follows it: "" nothing, "file" (and `words`), "dir", "words", "any"."""
    words: tuple[str, ...] = ()


def _value_words(dest: str) -> tuple[str, ...]:
    """Values argparse does not list as choices (they are checked by the command)."""
    if dest == "theme":
        from vllm_console.themes import THEMES

        return tuple(THEMES)
    if dest == "scenario":
        from vllm_console.console.sim import SCENARIOS

        return tuple(SCENARIOS)
    if dest == "profile":  # auto, a shipped name, or a file (offered too)
        from vllm_console.checks.profile import shipped_profiles

        return ("auto", *shipped_profiles())
    return ()


def host_commands(parser: argparse.ArgumentParser) -> str:
    """The subcommands that take a HOST, space-separated: after them, host names."""
    from vllm_console.console.cli.parser import subcommands

    return " ".join(name for name, sub in subcommands(parser).items()
                    if any(action.dest == "host" for action in sub._actions))


def describe(parser: argparse.ArgumentParser) -> dict[str, list[Option]]:
    """Each subcommand's options, read off the parser."""
    from vllm_console.console.cli.parser import subcommands

    found: dict[str, list[Option]] = {}
    for name, sub in subcommands(parser).items():
        options = []
        for action in sub._actions:
            if not action.option_strings:
                continue
            helptext = (action.help or "").replace("%%", "%")
            if action.nargs == 0:
                options.append(Option(tuple(action.option_strings), helptext))
                continue
            words = tuple(action.choices or ()) or _value_words(action.dest)
            value = "file" if action.metavar in _FILE_METAVARS else "words" if words else \
                "dir" if action.metavar == "DIR" else "any"
            options.append(Option(tuple(action.option_strings), helptext, value, words))
        found[name] = options
    return found


def _bash(parser: argparse.ArgumentParser) -> str:
    commands = describe(parser)
    valued = sorted({f for opts in commands.values() for o in opts if o.value for f in o.flags
                     if f != "--config"})
    arms = []
    words = {f: o for opts in commands.values() for o in opts if o.words for f in o.flags}
    for flag in sorted(words):
        files = " -f" if words[flag].value == "file" else ""
        arms.append(f'        {flag}) COMPREPLY=($(compgen{files} -W '
                    f'{shlex.quote(" ".join(words[flag].words))} -- "$cur")); return ;;')
    for kind, action in (("file", "compgen -f"), ("dir", "compgen -d")):
        flags = sorted({f for opts in commands.values() for o in opts if o.value == kind
                        for f in o.flags if f not in words})
        arms.append(f'        {"|".join(flags)}) COMPREPLY=($({action} -- "$cur")); return ;;')
    arms.append(f'        {"|".join(valued)}) return ;;')
    per_command = "\n".join(
        f"        {name}) opts={shlex.quote(' '.join(f for o in opts for f in o.flags))} ;;"
        for name, opts in commands.items())
    names = " ".join(commands)
    return f"""\
_vllm_console() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
    local cmd="" host="" config="" word i opts
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        case $word in
            --config) config=${{COMP_WORDS[i+1]}}; ((i++)) ;;
            {"|".join(valued)}) ((i++)) ;;
            -*) ;;
            *) if [[ -z $cmd ]]; then cmd=$word; else host=$word; fi ;;
        esac
    done
    local top=""
    [[ -z $cmd ]] && top=" {names}"
    case " {names} " in
        *" $cmd "*) ;;
        *) [[ -n $cmd ]] && host=$cmd; cmd=tui ;;
    esac
    case $prev in
{chr(10).join(arms)}
    esac
    case $cmd in
{per_command}
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts${{top:+ --version}}" -- "$cur"))
    elif [[ $cmd == completion ]]; then
        COMPREPLY=($(compgen -W "{" ".join((*SHELLS, "hosts"))}" -- "$cur"))
    elif [[ -z $host && " {host_commands(parser)} " == *" $cmd "* ]]; then
        local hosts
        if [[ -n $config ]]; then
            hosts=$(vllm-console completion hosts --config "$config" 2>/dev/null)
        else
            hosts=$(vllm-console completion hosts 2>/dev/null)
        fi
        COMPREPLY=($(compgen -W "$hosts$top" -- "$cur"))
    fi
}}
complete -F _vllm_console vllm-console
"""


def bash_script(parser: argparse.ArgumentParser) -> str:
    return ("# vllm-console completion for bash: source <(vllm-console completion bash)\n"
            + _bash(parser))


def zsh_script(parser: argparse.ArgumentParser) -> str:
    return ("#compdef vllm-console\n"
            "# vllm-console completion for zsh: source <(vllm-console completion zsh)\n"
            "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + _bash(parser))


def fish_script(parser: argparse.ArgumentParser) -> str:
    commands = describe(parser)
    others = " ".join(n for n in commands if n != "tui")
    valued = sorted({f for opts in commands.values() for o in opts if o.value for f in o.flags})
    lines = ["# vllm-console completion for fish: vllm-console completion fish | source",
             "function __vllm_console_hosts",
             "    set -l words (commandline -opc)",
             "    set -l at (contains -i -- --config $words)",
             "    and set -q words[(math $at + 1)]",
             "    and vllm-console completion hosts --config $words[(math $at + 1)] 2>/dev/null",
             "    or vllm-console completion hosts 2>/dev/null",
             "end",
             "function __vllm_console_wants_host",
             "    set -l positional",
             "    set -l skip 0",
             "    for word in (commandline -opc)[2..-1]",
             "        if test $skip = 1",
             "            set skip 0",
             f"        else if contains -- $word {' '.join(valued)}",
             "            set skip 1",
             "        else if not string match -q -- '-*' $word",
             "            set -a positional $word",
             "        end",
             "    end",
             "    test (count $positional) -eq 0",
             f"    or begin; test (count $positional) -eq 1; and contains -- $positional[1] "
             f"{host_commands(parser)}; end",
             "end",
             "complete -c vllm-console -f"]
    hosts = "(__vllm_console_hosts)"
    for name, sub in _subparser_help(parser).items():
        lines.append(f"complete -c vllm-console -n __fish_use_subcommand -a {name} "
                     f"-d {shlex.quote(sub)}")
    lines.append(f"complete -c vllm-console -n __vllm_console_wants_host -a '{hosts}' -d host")
    lines.append("complete -c vllm-console -n '__fish_seen_subcommand_from completion' "
                 f"-a '{' '.join((*SHELLS, 'hosts'))}'")
    for name, opts in commands.items():
        when = f"not __fish_seen_subcommand_from {others}" if name == "tui" else \
            f"__fish_seen_subcommand_from {name}"
        for o in opts:
            spec = " ".join(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}"
                            for f in o.flags)
            takes = {"": "", "file": " -r -F", "dir": " -r -a '(__fish_complete_directories)'",
                     "any": " -r", "words": " -r"}[o.value]
            takes += f" -a {shlex.quote(' '.join(o.words))}" if o.words else ""
            lines.append(f"complete -c vllm-console -n {shlex.quote(when)} {spec}{takes} "
                         f"-d {shlex.quote(o.help[:80])}")
    return "\n".join(lines) + "\n"


def _subparser_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def run(args: argparse.Namespace) -> int:
    from vllm_console.console.cli.parser import build_parser

    if args.shell == "hosts":
        from vllm_console.console.cli.host_names import host_names

        emit("\n".join(host_names(args.config)))
        return 0
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell]
    emit(script(build_parser()).rstrip("\n"))
    return 0
