"""A simulated host's server as the main process of a simulated Docker container.

The tree's `docker` stand-in (ROOT/bin/docker, `host-bin/docker.py`) plays the CLI and the
daemon; this module only says, as an operator would type it, which container to run: the fake
`vllm serve` as its entry point (`--entrypoint ROOT/venv/bin/vllm`, the official image's way),
on the host's network, with the tree bind-mounted at its own path (the container's paths are
the host's). Everything else (`ps`, `inspect`, `logs`, `exec`, `restart`) is the console's to
run through the stand-in, as it runs the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from typing import Any

from vllm_console.console.sim.tree import SimTree

NAME = "vllm-sim"
IMAGE = "vllm-console-sim/vllm-openai:latest"


def container_argv(tree: SimTree) -> list[str]:
    """The container's main command: `vllm serve` with the tree's launch options."""
    return [str(tree.root / "venv" / "bin" / "vllm"), *tree.serve_argv()[3:]]


def container_env(tree: SimTree, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The container's configured environment (`docker run -e`): the image's few variables
    and the scenario's, nothing inherited from whoever runs `docker`."""
    env = {"PATH": f"{tree.root / 'venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
           "HOME": "/tmp", "LANG": "C.UTF-8"}
    env.update(tree.serve_env())
    env.update(extra or {})
    return env


def docker(tree: SimTree, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """The tree's `docker` stand-in run with `args` (PATH as the console's host side sees it:
    the tree's bin directory first)."""
    env = {**os.environ, "PATH": f"{tree.root / 'bin'}:{os.environ.get('PATH', '')}"}
    return subprocess.run([str(tree.docker), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def run_container(tree: SimTree, *, name: str = NAME,
                  env: Mapping[str, str] | None = None) -> str:
    """`docker run -d` the tree's server as container `name`; its id. Not waited for: the
    server starts up as a bare one does (`runner.wait_ready`)."""
    env_args = [w for key, value in container_env(tree, env).items()
                for w in ("-e", f"{key}={value}")]
    argv = container_argv(tree)
    done = docker(tree, "run", "-d", "--name", name, "--network", "host", *env_args,
                  "-v", f"{tree.root}:{tree.root}", "-w", str(tree.root),
                  "--entrypoint", argv[0], IMAGE, *argv[1:])
    if done.returncode != 0:
        raise OSError(f"docker run {name} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def inspect(tree: SimTree, ref: str = NAME) -> dict[str, Any]:
    """`docker inspect REF`'s one container ({} when there is none)."""
    done = docker(tree, "inspect", ref)
    found = json.loads(done.stdout or "[]")
    return found[0] if found else {}


def stop_containers(tree: SimTree, grace: int = 5) -> None:
    """`docker stop -t GRACE` every running container of the tree (its shims record the
    exits; `runner.stop` then ends whatever is left of the tree)."""
    if not tree.docker.exists():
        return
    ids = docker(tree, "ps", "-q", "--no-trunc").stdout.split()
    if ids:
        docker(tree, "stop", "-t", str(grace), *ids, timeout=grace + 40)
