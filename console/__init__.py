"""vllm-console: a terminal control console for a GPU host running vllm serve."""

__version__ = "0.1.0"

APP_NAME = "vllm-console"


class ConfigError(Exception):
    """The hosts file or a command-line setting is wrong; the message says where and how.

    Here, not in `console.settings` with the hosts file's models (pydantic: a tenth of a second
    to import), so that a command that reads no hosts file (`--url`) never loads them."""
