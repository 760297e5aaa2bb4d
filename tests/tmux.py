"""Drive the real app in a real terminal: tmux on a private socket, send-keys, capture-pane."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Terminal:
    """One tmux session running a command at a fixed size."""

    command: list[str]
    width: int = 160
    height: int = 50
    env: dict[str, str] = field(default_factory=dict)
    socket: str = field(default_factory=lambda: f"vc-test-{uuid.uuid4().hex[:8]}")

    def _tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, check=check)

    def start(self) -> Terminal:
        if shutil.which("tmux") is None:
            raise RuntimeError("tmux is not installed: run `make test` or apt-get install tmux")
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        # env -i: nothing of the test runner leaks in (pytest exports COLUMNS/LINES).
        line = f"env -i {env} {shlex.join(self.command)}"
        self._tmux("-f", "/dev/null", "new-session", "-d", "-x", str(self.width), "-y",
                   str(self.height), "-s", "main", line)
        self._tmux("set-option", "-g", "remain-on-exit", "on", check=False)
        return self

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "main", *keys)

    def screen(self) -> str:
        result = self._tmux("capture-pane", "-p", "-t", "main", check=False)
        return result.stdout

    def raw_screen(self) -> str:
        """With escape sequences, to prove what the terminal was sent (`-e`)."""
        return self._tmux("capture-pane", "-p", "-e", "-t", "main", check=False).stdout

    def title(self) -> str:
        return self._tmux("display-message", "-p", "-t", "main", "#{pane_title}",
                          check=False).stdout.strip()

    def wait_for(self, predicate: Callable[[str], bool] | str, timeout: float = 15.0) -> str:
        check = (lambda s: predicate in s) if isinstance(predicate, str) else predicate
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if check(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {predicate!r}; screen was:\n{screen}")

    def pane_pid(self) -> int:
        """The program's pid (`env -i` execs it in the pane)."""
        return int(self._tmux("display-message", "-p", "-t", "main", "#{pane_pid}").stdout)

    def alive(self) -> bool:
        out = self._tmux("list-panes", "-t", "main", "-F", "#{pane_dead}", check=False).stdout
        return out.strip() == "0"

    def quit(self, timeout: float = 15.0) -> bool:
        """Press `q` and wait up to `timeout` seconds for the program to exit; whether it did."""
        self.keys("q")
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        return not self.alive()

    def stop(self) -> None:
        self._tmux("kill-server", check=False)


def app_env() -> dict[str, str]:
    """A predictable terminal for the app under test."""
    return {"TERM": "xterm-256color", "COLORTERM": "truecolor", "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"),
            "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", ""),
            "XDG_STATE_HOME": os.environ.get("XDG_STATE_HOME", "")}


def demo_processes(tmp_path: Path) -> list[str]:
    """What a `vllm-console demo` started with TMPDIR=tmp_path still runs: the simulated host
    (its tree is under tmp_path) and the console itself (its environment names tmp_path)."""
    found = []
    marker = f"TMPDIR={tmp_path}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline.startswith("tmux "):
            continue  # the terminal the test drives (its command line names the console)
        if marker in environ or (str(tmp_path) in cmdline and "vllm" in cmdline):
            found.append(cmdline)
    return found
