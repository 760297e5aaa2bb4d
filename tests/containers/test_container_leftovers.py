"""What a container's recreation keeps and leaves (issue 44, items 4 and 6-8), on the tests' own
real Docker daemon with the simulated server inside: its anonymous volumes' data, however they
were made; the aside container never startable by the daemon and never left unnamed; a traced
container that needs nothing of the console's cache.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import sim_box
from tests.docker import Dockerd
from tests.sim.test_sim_serve import free_port
from vllm_console.console.sim import SimTree

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


@pytest.fixture
def tree() -> Iterator[SimTree]:
    base = Path(tempfile.mkdtemp(prefix="sim-box-", dir="/tmp"))
    base.chmod(0o755)
    made = sim_box.sim_tree(base, free_port())
    try:
        yield made
    finally:
        sim_box.kill_host_servers(made)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def box(dockerd: Dockerd) -> Iterator[str]:
    """The container's name; it, whatever the console set aside, and its volumes removed."""
    name = f"vllm-console-left-{free_port()}"
    yield name
    listed = dockerd.docker("ps", "-a", "--format", "{{.Names}}", check=False).stdout.split()
    for other in [n for n in listed if n == name or n.startswith(f"{name}-vllm-console-")]:
        dockerd.docker("rm", "-f", "-v", other, check=False, timeout=60)


def hosts(path: Path, tree: SimTree) -> str:
    path.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{tree.url}"\n')
    return str(path)


def volume_at(info: dict[str, object], destination: str) -> str:
    mounts = info["Mounts"]
    assert isinstance(mounts, list)
    return next(str(m["Name"]) for m in mounts if m["Destination"] == destination)


def test_anonymous_volumes_keep_their_data_across_a_traced_restart(
        dockerd: Dockerd, tree: SimTree, box: str, tmp_path: Path) -> None:
    """`--mount type=volume,target=/x` (no source) and `-v /y`: after `restart --trace` (the
    container made again) the files written before are there, in the same volumes; none of
    them is left dangling for the next `docker volume prune` (the old code gave the `--mount`
    one a new, empty volume)."""
    before = sim_box.run(dockerd, tree, box, "--mount", "type=volume,target=/data/anonmount",
                         "-v", "/data/anon")
    for path in ("/data/anonmount", "/data/anon"):
        dockerd.docker("exec", box, "/bin/sh", "-c", f"echo kept > {path}/file")
    done = sim_box.run_cli(dockerd, "restart", "box", "--config", hosts(tmp_path / "h", tree),
                           "--yes", "--trace")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    after = sim_box.inspect(dockerd, box)
    assert after["Id"] != before["Id"], "made again"
    for path in ("/data/anonmount", "/data/anon"):
        assert volume_at(after, path) == volume_at(before, path), path
        assert dockerd.docker("exec", box, "/bin/cat", f"{path}/file").stdout == "kept\n", path
    dangling = dockerd.docker("volume", "ls", "-q", "-f", "dangling=true").stdout.split()
    assert volume_at(before, "/data/anonmount") not in dangling
