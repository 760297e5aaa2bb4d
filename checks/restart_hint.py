"""How a hint tells a person to restart the host, in words that work where they read it.

The hints said `vllm-console restart HOST --trace` wherever they were read: in the demo, whose
host `demo` exists only inside the console, that command fails; for a host given by options
(`vllm-console check gpu1 --log X`), it dropped them and restarted with other settings. The
caller knows where the hint is read (the console's keys, a command line and its options) and
says so here once.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class HowToRestart:
    """The ways the reader has to restart this host."""

    command: str = ""
    """`vllm-console restart HOST [options that name the host]`, shell-quoted; "" where no
    command reaches the host (the demo's)."""
    keys: bool = False
    """The reader is in the console: `r` restarts, `R` restarts with the trace."""

    @classmethod
    def for_host(cls, words: list[str] | tuple[str, ...], *, keys: bool = False
                 ) -> HowToRestart:
        """`vllm-console restart` followed by `words` (HOST, then its options)."""
        return cls(shlex.join(["vllm-console", "restart", *words]), keys)

    def plain(self) -> str:
        """"press r, or run `vllm-console restart gpu1`"."""
        return self._either("r", self.command)

    def traced(self) -> str:
        """"press R, or run `vllm-console restart gpu1 --trace`"."""
        return self._either("R", f"{self.command} --trace" if self.command else "")

    def _either(self, key: str, command: str) -> str:
        said = [f"press {key}"] if self.keys else []
        said += [f"run `{command}`"] if command else []
        # Neither: a read-only view of a host that no command reaches (`demo --readonly`).
        return ", or ".join(said) or ("a traced restart" if key == "R" else "a restart")
