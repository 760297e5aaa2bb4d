"""The simulated `vllm serve` (console.sim) as the main process of a container on the tests' own
real Docker daemon: a server in a container in a second, with no real vLLM.

The tree is made with the host's /usr/bin/python3 and bind-mounted at its own path; the host's
system is mounted read-only (the image is empty), so the container runs the tree's `vllm` as
an operator's image would run the real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.docker import IMAGE, Dockerd
from vllm_console.console.sim import SimTree, materialise
from vllm_console.console.sim.container import container_argv, container_env

BASE_PYTHON = "/usr/bin/python3"
FAST = {"startup_s": 0.5, "metrics_interval_s": 0.3}


def system_mounts() -> list[str]:
    """The host's system, read-only, at its own paths."""
    out: list[str] = []
    for path in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"):
        if os.path.exists(path):
            out += ["-v", f"{path}:{path}:ro"]
    return out


def sim_tree(base: Path, port: int, startup_s: float = 0.5) -> SimTree:
    """A healthy simulated host in `base` (readable by the container's root)."""
    base.mkdir(parents=True, exist_ok=True)
    return materialise("healthy", base / "host", base_python=BASE_PYTHON, port=port,
                       **{**FAST, "startup_s": startup_s})


def run(daemon: Dockerd, tree: SimTree, name: str, *options: str,
        argv: list[str] | None = None, entrypoint: str | None = None) -> dict[str, Any]:
    """`docker run -d` the tree's server as container `name` (`options` before the image,
    `argv` replacing the server's command line); its inspection once /health answers."""
    argv = argv or container_argv(tree)
    env = [w for k, v in container_env(tree).items() for w in ("-e", f"{k}={v}")]
    daemon.docker("run", "-d", "--name", name, "--network", "host", *system_mounts(),
                  "-v", f"{tree.root}:{tree.root}", *env, *options,
                  "--entrypoint", entrypoint or argv[0], IMAGE,
                  *(argv if entrypoint else argv[1:]))
    wait_health(daemon, tree, name)
    return inspect(daemon, name)


def inspect(daemon: Dockerd, ref: str) -> dict[str, Any]:
    return dict(json.loads(daemon.docker("inspect", ref).stdout)[0])


def health(tree: SimTree) -> int | None:
    try:
        with urllib.request.urlopen(f"{tree.url}/health", timeout=2) as resp:
            return int(resp.status)
    except OSError:
        return None


def wait_health(daemon: Dockerd, tree: SimTree, name: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if health(tree) == 200:
            return
        time.sleep(0.2)
    logs = daemon.docker("logs", name, check=False)
    raise AssertionError(f"{name} not healthy: {(logs.stdout + logs.stderr)[-2000:]}")


def clear_trace_hooks() -> None:
    """Remove the console's cached trace-hook directories, as a user cleaning
    `$XDG_CACHE_HOME` would (there must be some: a traced restart wrote them)."""
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "vllm-console"
    hooks = list(cache.rglob("trace-hook-*"))
    assert hooks, f"no trace hook under {cache}"
    for hook in hooks:
        shutil.rmtree(hook)


def host_servers(tree: SimTree) -> list[int]:
    """Processes of the host's own pid namespace running the tree's `vllm serve` outside any
    container (what a wrong-target restart would have started)."""
    from vllm_console.console.hostside.procfs import container_from_cgroup

    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            words = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(words).decode(errors="replace")
        if str(tree.root) in text and " serve " in f" {text} " and \
                not container_from_cgroup(int(name)):
            found.append(int(name))
    return found


def kill_host_servers(tree: SimTree) -> None:
    for pid in host_servers(tree):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def cli_env(daemon: Dockerd) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"},
            "DOCKER_HOST": daemon.host}


def run_cli(daemon: Dockerd, *args: str, timeout: float = 180
            ) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "vllm_console", *args], capture_output=True,
                          text=True, timeout=timeout, env=cli_env(daemon), check=False)


@contextlib.contextmanager
def scratch_tree(port: int, startup_s: float = 0.5) -> Iterator[SimTree]:
    """A simulated host in a fresh directory under /tmp (readable by the daemon); afterwards
    its servers on the host (if a wrong restart started one) ended and the directory gone."""
    base = Path(tempfile.mkdtemp(prefix="sim-box-", dir="/tmp"))
    base.chmod(0o755)
    made = sim_tree(base, port, startup_s)
    try:
        yield made
    finally:
        kill_host_servers(made)
        shutil.rmtree(base, ignore_errors=True)
