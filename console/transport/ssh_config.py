"""What `~/.ssh/config` says about a host, for the parts the console decides itself.

asyncssh reads `~/.ssh/config` on every connect and applies `HostName`, `User`, `Port`,
`IdentityFile` and `ProxyJump` by itself. Three settings it cannot apply for us, because the
console passes its own value or asyncssh ignores the option: the known_hosts files
(`UserKnownHostsFile`: the console checks keys itself, to name a refused key's fingerprint and
record accepted ones), the connect timeout (`ConnectTimeout`: the console has a default of its
own), and `StrictHostKeyChecking` (asyncssh has no such option). This module reads those with
asyncssh's own parser, so both agree on which `Host`/`Match` blocks apply. And the words for a
key file that cannot be used (missing, not a key, behind a passphrase), which asyncssh reports
without naming the file.
"""

from __future__ import annotations

import functools
import getpass
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_console.console.transport.host import HostError

# Values of StrictHostKeyChecking that let an unknown key be recorded. OpenSSH's `no`/`off`
# would also accept a changed key; the console never does, so they mean accept-new here.
_ACCEPT_NEW = {"accept-new", "no", "off"}


@dataclass(frozen=True)
class SshConfigView:
    """The settings of one host that the console applies itself; empty when not configured."""

    known_hosts: tuple[str, ...] = ()
    """UserKnownHostsFile, `~` expanded; accepted keys are recorded in the first."""
    connect_timeout: float | None = None
    """ConnectTimeout, in seconds."""
    accept_new: bool = False
    """StrictHostKeyChecking accept-new (or no/off, never weaker than accept-new here)."""
    proxy_jump: str = ""
    """ProxyJump (asyncssh goes through it; named when the jump host's key is refused)."""
    hostname: str = ""
    """HostName (`%h` expanded), when a block gives one."""
    proxy_command: str = ""
    """ProxyCommand: the host is reached through a program, not looked up here."""

    def known_hosts_files(self, configured: str = "") -> list[Path]:
        """The known_hosts files to check, in order: `configured` (--known-hosts or the hosts
        file), else UserKnownHostsFile, else ~/.ssh/known_hosts."""
        chosen = [configured] if configured else list(self.known_hosts) or ["~/.ssh/known_hosts"]
        return [Path(os.path.expanduser(p)) for p in chosen]


def default_path() -> Path:
    """`~/.ssh/config`, as asyncssh and OpenSSH look for it."""
    return Path("~/.ssh/config").expanduser()


@functools.cache
def _reader() -> Any:
    """asyncssh's client config parser, also keeping StrictHostKeyChecking (which asyncssh
    skips as unknown). Built on first use: asyncssh is imported lazily."""
    from asyncssh.config import SSHClientConfig

    handlers = dict(SSHClientConfig._handlers)
    handlers["stricthostkeychecking"] = ("StrictHostKeyChecking", SSHClientConfig._set_string)
    return type("ConsoleSSHClientConfig", (SSHClientConfig,), {"_handlers": handlers})


def read_ssh_config(host: str, user: str | None = None, port: int | None = None,
                    path: Path | None = None) -> SshConfigView:
    """The settings `path` (default `~/.ssh/config`) gives `host`. A file that is missing or
    unreadable gives none, as it does to OpenSSH; one that does not parse is a HostError
    naming the file and line."""
    path = path or default_path()
    if not os.access(path, os.R_OK):
        return SshConfigView()
    from asyncssh.config import ConfigParseError

    try:
        local_user = getpass.getuser()
    except (KeyError, OSError):  # no name for our uid: `Match localuser` then matches nothing
        local_user = ""
    try:
        config = _reader().load(None, [path], False, False, False, local_user,
                                user if user else (), host, port if port else ())
    except (ConfigParseError, OSError) as exc:
        raise HostError(f"{host}: ssh config {exc}") from None
    files = config.get("UserKnownHostsFile") or []
    timeout = config.get("ConnectTimeout")
    strict = str(config.get("StrictHostKeyChecking") or "").lower()
    jump = str(config.get("ProxyJump") or "")
    return SshConfigView(
        known_hosts=tuple(os.path.expanduser(f) for f in files if f.lower() != "none"),
        connect_timeout=float(timeout) if timeout else None,
        accept_new=strict in _ACCEPT_NEW,
        proxy_jump="" if jump.lower() == "none" else jump,
        hostname=str(config.get("Hostname") or ""),
        proxy_command=_words(config.get("ProxyCommand")))


def _words(value: object) -> str:
    """A setting asyncssh keeps as a string or as a list of words."""
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value or "")


def identity_problem(path: str) -> str:
    """Why the identity file `path` cannot be used, or "" (asyncssh would say only "No such
    file or directory", after opening the connection)."""
    if not path or os.path.isfile(path):
        return ""
    return f"identity file {path} {'is not a file' if os.path.exists(path) else 'does not exist'}"


def unusable_identity(path: str, why: Exception) -> str:
    """What to say when asyncssh could not load a key (`path`: --identity or the hosts file's;
    empty when ssh_config's IdentityFile named it). The console asks for no passphrase."""
    which = f"identity file {path}" if path else "an IdentityFile of ~/.ssh/config"
    said = f"{which} is not a usable private key ({why})"
    if "passphrase" not in str(why).lower():
        return said
    return said + f": load it into ssh-agent instead (`ssh-add {path or 'KEYFILE'}`)"
