"""What a container's recreation keeps and leaves (issue 44, items 4 and 6-8), on the tests' own
real Docker daemon with the simulated server inside: its anonymous volumes' data, however they
were made; the aside container never startable by the daemon and never left unnamed; a traced
container that needs nothing of the console's cache.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import sim_box
from tests.docker import Dockerd
from tests.fault_support import sigint_as_in_a_terminal
from tests.sim.test_sim_serve import free_port
from vllm_console.console.sim import SimTree
from vllm_console.console.sim.container import container_argv

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


@pytest.fixture
def tree() -> Iterator[SimTree]:
    with sim_box.scratch_tree(free_port()) as made:
        yield made


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


def test_a_traced_container_survives_the_consoles_cache_cleared(
        dockerd: Dockerd, tree: SimTree, box: str, tmp_path: Path) -> None:
    """After `restart --trace` the container has its own copy of the trace hook: with the
    console's cache directory cleared, `docker restart` (or the daemon after a reboot) still
    starts it, traced (the old code bind-mounted the hook from the cache: "error mounting")."""
    sim_box.run(dockerd, tree, box)
    done = sim_box.run_cli(dockerd, "restart", "box", "--config", hosts(tmp_path / "h", tree),
                           "--yes", "--trace")
    assert done.returncode == 0, done.stdout + done.stderr
    sim_box.clear_trace_hooks()
    restarted = dockerd.docker("restart", "-t", "5", box, check=False)
    assert restarted.returncode == 0, restarted.stderr
    sim_box.wait_health(dockerd, tree, box)
    env = dict(e.split("=", 1) for e in sim_box.inspect(dockerd, box)["Config"]["Env"])
    hook = env["VLLM_CONSOLE_TRACE_HOOK"]
    from vllm_console.console.hostside.restart.hook_files import hook_files

    for name in hook_files():  # the hook and the vocabulary it imports, all inside
        assert dockerd.docker("exec", box, "/bin/ls", f"{hook}/{name}",
                              check=False).returncode == 0, name


def test_a_failed_rollback_says_the_server_is_down_which_container_is_where_and_what_to_run(
        dockerd: Dockerd, tree: SimTree, box: str, tmp_path: Path) -> None:
    """The container's bind source goes away while it stops (its own stop handler removes
    it): the new container cannot start, nor can the old one when it is put back. The message
    keeps the daemon's cause, says the server is down, where the old container is, and the
    command that brings it back, which does once the source is there again."""
    shared = Path(tempfile.mkdtemp(prefix="rollback-", dir="/tmp"))
    shared.chmod(0o755)
    (shared / "weights").mkdir()
    server = " ".join(shlex.quote(w) for w in container_argv(tree))
    script = f'trap "rm -rf /p/weights; exit 0" TERM; {server} & wait'
    try:
        before = sim_box.run(dockerd, tree, box, "-v", f"{shared}:/p", "--mount",
                             f"type=bind,source={shared / 'weights'},target=/weights",
                             argv=["-c", script], entrypoint="/bin/sh")
        done = sim_box.run_cli(dockerd, "restart", "box", "--config",
                               hosts(tmp_path / "h", tree), "--yes", "--trace")
        out = done.stdout + done.stderr
        assert done.returncode == 1, out
        assert "the server is down" in out, out
        assert str(shared / "weights") in out, "the daemon's cause, not its last line"
        assert f"`docker start {box}`" in out, out
        after = sim_box.inspect(dockerd, box)
        assert after["Id"] == before["Id"], "the old container has its name back"
        assert after["State"]["Running"] is False
        (shared / "weights").mkdir()
        assert dockerd.docker("start", box, check=False).returncode == 0
        sim_box.wait_health(dockerd, tree, box)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_new_server_that_fails_leaves_the_old_container_named_with_its_way_back(
        dockerd: Dockerd, tree: SimTree, box: str, tmp_path: Path) -> None:
    """The recreated container's server exits before it is ready (a flag on a bind mount
    makes it): the restart fails (exit 1) and says where the old container waits, stopped
    under its aside name with restart policy "no" (the daemon never starts it beside the new
    one), and the command back to it, which, run as printed, brings the old server back with
    its name and its policy."""
    state = Path(tempfile.mkdtemp(prefix="fails-", dir="/tmp"))
    state.chmod(0o755)
    server = " ".join(shlex.quote(w) for w in container_argv(tree))
    script = f"[ -e /state/fail ] && {{ sleep 1; exit 3; }}; exec {server}"
    try:
        before = sim_box.run(dockerd, tree, box, "-v", f"{state}:/state",
                             "--restart", "on-failure:2", argv=["-c", script],
                             entrypoint="/bin/sh")
        (state / "fail").touch()
        done = sim_box.run_cli(dockerd, "restart", "box", "--config",
                               hosts(tmp_path / "h", tree), "--yes", "--trace")
        out = done.stdout + done.stderr
        assert done.returncode == 1, out
        names = dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
        aside = [n for n in names if n.startswith(f"{box}-vllm-console-old-")]
        assert len(aside) == 1, (names, out)
        kept = sim_box.inspect(dockerd, aside[0])
        assert kept["Id"] == before["Id"]
        assert kept["State"]["Running"] is False
        assert kept["HostConfig"]["RestartPolicy"]["Name"] == "no"
        failed = next((line for line in out.splitlines() if line.startswith("failed: ")), "")
        assert f"kept, stopped, as {aside[0]}" in failed, out
        said = re.search(r"to go back to it: `([^`\n]+)`", failed)
        assert said, out
        assert f"docker rename {aside[0]} {box}" in said.group(1)
        assert f"docker update --restart on-failure:2 {box}" in said.group(1)
        (state / "fail").unlink()
        back = subprocess.run(["/bin/sh", "-c", said.group(1)], capture_output=True, text=True,
                              timeout=120, env=sim_box.cli_env(dockerd), check=False)
        assert back.returncode == 0, back.stderr
        sim_box.wait_health(dockerd, tree, box)
        now = sim_box.inspect(dockerd, box)
        assert now["Id"] == before["Id"], "the old container, under its name again"
        assert now["HostConfig"]["RestartPolicy"] == before["HostConfig"]["RestartPolicy"]
        names = dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
        assert not [n for n in names if n.startswith(f"{box}-vllm-console-")], names
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_ctrl_c_names_the_aside_container_which_the_daemon_never_starts_and_is_removed(
        dockerd: Dockerd, box: str, tmp_path: Path) -> None:
    """Ctrl+C just after "launched" of a traced restart under `--restart always`: the console
    says where the old container waits and the command back to it; meanwhile its restart
    policy is "no" (a daemon restart would not start it beside the new one); the step goes on
    on the host, and once the new server is ready the old container is gone."""
    with sim_box.scratch_tree(free_port(), startup_s=4.0) as slow:
        sim_box.run(dockerd, slow, box, "--restart", "always")
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm_console", "restart", "box", "--config",
             hosts(tmp_path / "h", slow), "--yes", "--trace"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, env=sim_box.cli_env(dockerd),
            preexec_fn=sigint_as_in_a_terminal)
        seen = []
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if " launched " in line:
                break
        proc.send_signal(signal.SIGINT)
        out = "".join(seen) + proc.communicate(timeout=60)[0]
        assert proc.returncode == 130, out
        aside = [n for n in dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
                 if n.startswith(f"{box}-vllm-console-old-")]
        assert len(aside) == 1, out
        assert f"as {aside[0]}" in out, out
        said = next(line for line in out.splitlines() if "interrupted: the restart" in line)
        assert f"docker rename {aside[0]} {box}" in said, out
        policy = sim_box.inspect(dockerd, aside[0])["HostConfig"]["RestartPolicy"]["Name"]
        assert policy == "no"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and aside[0] in \
                dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split():
            time.sleep(0.5)
        names = dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
        assert aside[0] not in names, "the old container is removed once the new one is ready"
        now = sim_box.inspect(dockerd, box)
        assert now["State"]["Running"] is True
        assert now["HostConfig"]["RestartPolicy"]["Name"] == "always"
