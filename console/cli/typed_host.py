"""What a word typed where a command or a HOST goes means: a host the person has, a misspelt
command, or a name nobody knows.

Said before any connection: a typo (`vllm-console statsu`) used to open the console on a host
called `statsu` and retry it for ever, and a host missing from the hosts file was "cannot
connect: Name or service not known" without a word about the file. A HOST may still be any
`[user@]host[:port]` (docs/design.md): a name that resolves, or that ssh_config sends
somewhere, is always let through.
"""

from __future__ import annotations

import re
import shlex
import socket
import threading
from pathlib import Path

from vllm_console.console import default_hosts_path, hosts_file_names, read_hosts_toml
from vllm_console.console.cli.host_names import ssh_config_aliases

# How long a name's lookup may take before the connection is left to decide (a slow DNS is
# not a missing host).
RESOLVE_WAIT_S = 2.0
# getaddrinfo's answers that mean "no such name" (not "the resolver is unreachable").
_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def hosts_path(config: str | None) -> Path:
    return Path(config).expanduser() if config else default_hosts_path()


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+")


def bare(word: str) -> bool:
    """A plain name (`gpu7`), not a destination (`u@gpu7`, `gpu7:22`, `10.0.0.5`, `gpu7.lab`)
    that can only be meant as a host, nor a word no host name holds (those are refused as
    destinations, in the settings' words)."""
    return bool(_PLAIN_NAME.fullmatch(word))


def did_you_mean(word: str, commands: list[str]) -> str | None:
    """The command `word` is most likely a misspelling of, or None."""
    import difflib

    found = difflib.get_close_matches(word, commands, n=1, cutoff=0.7)
    return found[0] if found else None


def misspelt_command(positionals: list[str], commands: list[str], config: str | None) -> str:
    """Why the first word is no command and no host ("" when it may be a host): several words
    where the console takes one HOST, or one plain word close to a command that names no host
    of the hosts file or ssh_config."""
    word = positionals[0]
    guess = did_you_mean(word, commands)
    if len(positionals) == 1 and not (guess and bare(word)):
        return ""
    path = hosts_path(config)
    if word in hosts_file_names(path) or word in ssh_config_aliases():
        return ""  # a host of that name: argparse says what else is wrong
    said = f"unknown command {word!r}; "
    said += f"did you mean `{guess}`?" if guess else f"commands: {', '.join(commands)}"
    if len(positionals) == 1:
        opens = shlex.join(["vllm-console", "tui", word, *(["--config", config] if config
                                                          else [])])
        said += (f" (no host {word!r} in {path} or ~/.ssh/config either; `{opens}` opens a "
                 "host of that name)")
    return said


def _hosts_file_names(path: Path, config: str | None) -> list[str]:
    """The hosts file's names; a file that cannot be read is said first (ConfigError), in
    the words the command itself would use."""
    entries = read_hosts_toml(path, required=config is not None).get("hosts")
    return list(entries) if isinstance(entries, dict) else []


def in_hosts_file(word: str, config: str | None) -> bool:
    return word in _hosts_file_names(hosts_path(config), config)


def unknown_host(word: str, config: str | None) -> str:
    """Why HOST names no host ("" when it may): a plain name that is not in the hosts file,
    not an ssh_config alias, that ssh_config sends nowhere else and that does not resolve."""
    if not bare(word):
        return ""
    path = hosts_path(config)
    names = _hosts_file_names(path, config)
    if word in names or word in ssh_config_aliases() or _ssh_config_routes(word):
        return ""
    why = _does_not_resolve(word)
    if not why:
        return ""
    known = f"known: {', '.join(names)}" if names else \
        ("it has no hosts" if path.exists() else "it does not exist: `vllm-console init` "
                                                 "writes one")
    return (f"no host {word!r} in {path} ({known}), nor in ~/.ssh/config, and as a host name: "
            f"{why}")


def _ssh_config_routes(word: str) -> bool:
    """Whether ~/.ssh/config gives `word` a HostName, a ProxyJump or a ProxyCommand (a `Host
    *.lab` or `Host *` pattern can): then the name is not looked up here."""
    # ssh_host first: it keeps asyncssh's import-time warnings off the person's terminal.
    from vllm_console.console.transport import ssh_host  # noqa: F401
    from vllm_console.console.transport.host import HostError
    from vllm_console.console.transport.ssh_config import read_ssh_config

    try:
        view = read_ssh_config(word)
    except HostError:
        return True  # a broken ssh_config: the command says so, naming the file and line
    return bool(view.proxy_jump or view.proxy_command) or view.hostname not in ("", word)


def _does_not_resolve(name: str) -> str:
    """The resolver's words when `name` is no name it knows; "" when it resolves, when the
    resolver cannot be reached, or when it takes longer than RESOLVE_WAIT_S."""
    answer: list[str] = []

    def look_up() -> None:
        try:
            socket.getaddrinfo(name, 22, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            answer.append(exc.strerror if exc.errno in _NO_SUCH_NAME and exc.strerror else "")
        except (OSError, UnicodeError):
            answer.append("")
        else:
            answer.append("")

    # A daemon thread: a lookup that hangs never keeps the command from going on or exiting.
    thread = threading.Thread(target=look_up, name="resolve-host", daemon=True)
    thread.start()
    thread.join(RESOLVE_WAIT_S)
    return answer[0] if answer else ""
