"""vllm-console: a terminal control console for a GPU host running vllm serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__version__ = "0.1.0"

APP_NAME = "vllm-console"

# The hosts file is read whole; a bound keeps a wrong path (a device, a huge file) from
# taking the console's memory.
MAX_HOSTS_FILE_BYTES = 16 << 20


class ConfigError(Exception):
    """The hosts file or a command-line setting is wrong; the message says where and how.

    Here, not in `console.settings` with the hosts file's models (pydantic: a tenth of a second
    to import), so that a command that reads no hosts file (`--url`) never loads them."""


# The hosts file as a file (where it is, reading it, its TOML) is here too, for the same
# reason: a Tab that completes a host name reads the file's names and nothing else (the models
# cost a quarter of a second per Tab). `console.settings.load_hosts_file` validates what this
# reads; nothing else reads the file.


def default_hosts_path() -> Path:
    """`$XDG_CONFIG_HOME/vllm-console/hosts.toml` (platformdirs honours XDG_CONFIG_HOME)."""
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME)) / "hosts.toml"


def read_hosts_toml(path: Path, *, required: bool = False) -> dict[str, Any]:
    """The hosts file's TOML, not validated. A missing file is an empty one unless `required`;
    what is not a regular file is refused before reading from it (a FIFO would block every
    command on its first read: opened non-blocking, so not even the open waits for a writer)."""
    import os
    import stat
    import tomllib

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if required:
            raise ConfigError(f"hosts file {path}: not found") from None
        return {}
    except OSError as exc:
        raise ConfigError(f"hosts file {path}: cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"hosts file {path}: not a regular file; refusing to read it")
        if info.st_size > MAX_HOSTS_FILE_BYTES:
            raise ConfigError(f"hosts file {path}: larger than "
                              f"{MAX_HOSTS_FILE_BYTES >> 20} MiB; refusing to read it")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(MAX_HOSTS_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"hosts file {path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"hosts file {path}: not valid TOML: {exc}") from None


def hosts_file_names(path: Path) -> list[str]:
    """The names of the hosts file's entries (`[hosts.NAME]` tables), without validating them:
    for completion, where the name is what the user is typing and the command then says what
    is wrong with its entry. A file that cannot be read or is not TOML has none."""
    try:
        hosts = read_hosts_toml(path).get("hosts")
    except ConfigError:
        return []
    return [n for n, e in hosts.items() if isinstance(e, dict)] if isinstance(hosts, dict) else []
