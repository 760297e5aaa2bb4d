"""The host names a person may type: the hosts file's entries and `~/.ssh/config`'s aliases.

For shell completion and for the hint when a host is called like a subcommand. Never raises: a
missing or broken file only means fewer names. Imports no settings model: it runs at every Tab.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from vllm_console.console import default_hosts_path, hosts_file_names

_PATTERN = set("*?!")


def ssh_config_aliases(path: Path | None = None, _depth: int = 0) -> list[str]:
    """The literal names of `Host` lines (patterns such as `*.lab` or `!x` are not names), in
    the files `Include` names too (relative to ~/.ssh, globs expanded, as OpenSSH does)."""
    path = path or Path(os.path.expanduser("~/.ssh/config"))
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    names: list[str] = []
    for line in text.splitlines():
        words = line.replace("=", " ", 1).split()
        if len(words) < 2:
            continue
        if words[0].lower() == "host":
            names += [w for w in words[1:] if not _PATTERN & set(w) and w not in names]
        elif words[0].lower() == "include" and _depth < 8:  # OpenSSH's nesting limit is 16
            ssh_dir = os.path.expanduser("~/.ssh")
            for pattern in words[1:]:
                for found in sorted(glob.glob(os.path.join(ssh_dir, os.path.expanduser(pattern)))):
                    names += [n for n in ssh_config_aliases(Path(found), _depth + 1)
                              if n not in names]
    return names


def host_names(config: str | None = None) -> list[str]:
    """The hosts file's names (`config`, else the default file), then ssh_config's aliases."""
    path = Path(config).expanduser() if config else default_hosts_path()
    names = hosts_file_names(path)
    return names + [n for n in ssh_config_aliases() if n not in names]
