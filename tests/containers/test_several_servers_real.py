"""Several servers on one host, with the real engine: this machine over the test sshd runs a
real `vllm serve` bare (as the login user), a real one as PID 1 of a real Docker container
(the container tier's recipe) and a simulated one (DESIGN.md, "Several servers on one host").

Before, discovery asked each kind of place in turn and the bare process hid the container.
Now `status --json` lists all three with their ports and containers; each, pinned by
`--port`, gets its own engine config, its own log and its own check verdict (the evidence
names its pid); `restart --port N --yes` restarts that one and leaves the other two with their
pids and start times unchanged. The login user reaches the tests' daemon as a member of the
socket's group, through a docker context (`login_with_docker_access`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.containers.test_container_discovery import login_with_docker_access  # noqa: F401
from tests.docker import ContainerServer, Dockerd, models_volume, run_server
from tests.fault_support import helpers_on_host
from tests.real_vllm.fixture import RealServer, RealVllm, dflash_spec
from tests.real_vllm.support import cli, server
from tests.several_support import launch, pid_on
from tests.sshd import Sshd, chown_to, free_port
from tests.tmux import Terminal, app_env
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.tree import SimTree, materialise

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.real_vllm, pytest.mark.ssh, pytest.mark.tmux,
              pytest.mark.timeout(1800)]


@dataclass
class Mixed:
    bare: RealServer
    box: ContainerServer
    sim: SimTree
    hosts: Path

    def pids(self) -> dict[int, tuple[int, str]]:
        """Port -> (pid, start): the bare server's process start ticks, the container's
        StartedAt, the simulated server's start ticks."""
        box = self.box.inspect()
        return {self.bare.port: _identity(_bare_pid(self.bare)),
                self.box.port: (int(box["State"]["Pid"]),  # type: ignore[index]
                                str(box["State"]["StartedAt"])),  # type: ignore[index]
                self.sim.port: _identity(pid_on(self.sim.root.parent, self.sim.port))}


def _bare_pid(srv: RealServer) -> int:
    """The top-most `vllm serve` of the fixture listening on the bare server's port."""
    return pid_on(srv.fixture.venv, srv.port)


def _identity(pid: int) -> tuple[int, str]:
    return pid, Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


@pytest.fixture(scope="module")
def sim_server(sshd: Sshd) -> Iterator[SimTree]:
    if sshd.proc is None:
        sshd.start()
    base = sshd.user_dir("mixed")
    tree = materialise("healthy", base / "healthy", port=free_port(), startup_s=0.3)
    chown_to(base, sshd.user)
    launch(tree, sshd.user)
    try:
        assert wait_ready(tree, None, timeout=30)
        yield tree
    finally:
        stop(tree, timeout=5)


PAIR = ("--seed", "4141")
"""On both servers of the pair alone: a `match` that admits these two and no other real server
the suite runs meanwhile on this daemon and login user."""


@pytest.fixture(scope="module")
def real_pair(sshd: Sshd, dockerd: Dockerd, real_vllm: RealVllm
              ) -> Iterator[tuple[RealServer, ContainerServer]]:
    """The bare server and the container's (the container tier's recipe: `vllm serve
    /models/target` as the entry point, the models on a volume), started side by side and
    given time to come up on a machine that runs other tests too."""
    if sshd.proc is None:
        sshd.start()
    name = "vllm-several-servers-real"
    volume = models_volume(dockerd, real_vllm, f"{name}-models")
    box = run_server(dockerd, real_vllm, name=name, port=free_port(), volume=volume,
                     speculative_config=dflash_spec(Path("/models/dflash-incident")),
                     extra_args=PAIR)
    bare = server(real_vllm, sshd, "bare", dflash_spec(real_vllm.drafter("dflash-incident")),
                  extra_args=PAIR)
    try:
        bare.start()
        box.wait_ready(timeout=900)
        bare.wait_ready(timeout=900)
        yield bare, box
    finally:
        bare.stop()
        box.remove()
        dockerd.docker("volume", "rm", "-f", volume, check=False)


@pytest.fixture
def mixed(real_pair: tuple[RealServer, ContainerServer], sim_server: SimTree, sshd: Sshd,
          login_with_docker_access: str, tmp_path: Path) -> Mixed:  # noqa: F811
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.gpu]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
                     f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                     f'[hosts.gpu.gpu]\nnvidia_smi = "{sim_server.nvidia_smi}"\n')
    return Mixed(*real_pair, sim_server, hosts)


def status(mixed: Mixed, *args: str) -> dict[str, Any]:
    done = cli("status", "gpu", "--config", str(mixed.hosts), "--json", *args, timeout=180)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_status_lists_the_bare_the_container_and_the_simulated_server(mixed: Mixed) -> None:
    ids = mixed.pids()
    servers = {s["port"]: s for s in status(mixed)["servers"]}
    # (other servers of the login user, another test's, may run beside them)
    assert {mixed.bare.port, mixed.box.port, mixed.sim.port} <= set(servers)
    assert servers[mixed.box.port]["container"] == mixed.box.name
    assert servers[mixed.bare.port]["container"] is None
    assert servers[mixed.sim.port]["container"] is None
    for port, (pid, _start) in ids.items():
        assert servers[port]["pid"] == pid
        assert servers[port]["state"] == "ready"
    assert [s["chosen"] for s in servers.values()].count(True) == 1
    assert servers[min(servers)]["chosen"]  # nothing pinned: the lowest port


@pytest.mark.parametrize("which", ["bare", "box", "sim"])
def test_each_port_gets_its_own_config_log_and_verdict(mixed: Mixed, which: str) -> None:
    port = {"bare": mixed.bare.port, "box": mixed.box.port, "sim": mixed.sim.port}[which]
    pid = mixed.pids()[port][0]
    data = status(mixed, "--port", str(port))
    serve = data["serve"]
    assert serve["pid"] == pid
    assert serve["url"].endswith(f":{port}")
    if which == "box":
        assert serve["container"]["name"] == mixed.box.name
        assert serve["log"] is None  # its log is the container's output
        assert data["engine"]["version"] == "0.32.0"
    elif which == "bare":
        assert serve["container"] is None
        assert serve["log"] == str(mixed.bare.log)
        assert data["engine"]["version"] == "0.32.0"
    else:
        assert serve["log"] == str(mixed.sim.log)
        assert data["engine"]["version"] != "0.32.0"  # the simulated install's
    done = cli("check", "gpu", "--config", str(mixed.hosts), "--json", "--port", str(port),
               timeout=300)
    assert done.stdout.strip(), done.stderr
    report = json.dumps(json.loads(done.stdout))
    assert f"pid {pid}" in report, report[:3000]
    for other, (other_pid, _start) in mixed.pids().items():
        if other != port:  # named only as what it is not: another port's server
            aside = f"pid {other_pid} serves port {other}, not the configured {port}"
            assert f"pid {other_pid}" not in report.replace(aside, ""), report[:3000]


def test_restart_by_port_restarts_the_bare_server_alone(mixed: Mixed) -> None:
    before = mixed.pids()
    done = cli("restart", "gpu", "--config", str(mixed.hosts), "--port", str(mixed.bare.port),
               "--yes", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    deadline = time.monotonic() + 60
    while mixed.bare.health() != 200 and time.monotonic() < deadline:
        time.sleep(1)
    after = mixed.pids()
    assert after[mixed.bare.port][0] != before[mixed.bare.port][0]
    assert after[mixed.box.port] == before[mixed.box.port]
    assert after[mixed.sim.port] == before[mixed.sim.port]


def test_the_tui_in_a_terminal_counts_and_switches_the_real_pair(
        real_pair: tuple[RealServer, ContainerServer], sshd: Sshd, dockerd: Dockerd,
        login_with_docker_access: str, tmp_path: Path) -> None:  # noqa: F811
    """The real TUI in tmux over the sshd, on the bare real server and the container's (its
    `match` admits those two alone): "server 1 of 2", `p` lists both ports, choosing the
    other moves the panes to its model and log; `q` leaves only what the test started."""
    bare, box = real_pair
    low, high = sorted((bare, box), key=lambda s: s.port)
    model = {bare.port: str(bare.fixture.target), box.port: box.target}
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.gpu]\nssh = "{sshd.user}@127.0.0.1:{sshd.port}"\n'
                     f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
                     f'[hosts.gpu.serve]\nmatch = "{bare.fixture.vllm} serve {" ".join(PAIR)}"\n')
    servers_before = {bare.port: _identity(_bare_pid(bare)),
                      box.port: str(box.inspect()["State"]["StartedAt"])}  # type: ignore[index]
    boxes_before = dockerd.docker("ps", "-aq", "--no-trunc").stdout.split()
    env = app_env()
    env.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path / "state"))
    term = Terminal([sys.executable, "-m", "vllm_console", "--config", str(hosts), "gpu"],
                    width=200, height=50, env=env).start()
    try:
        term.wait_for(f"server 1 of 2 · :{low.port}", timeout=180)
        engine_model(term, model[low.port], model[high.port])
        term.keys("p")
        listed = term.wait_for(lambda s: f":{low.port}" in s and f":{high.port}" in s
                               and f"container {box.name}" in s, timeout=30)
        assert "bare process" in listed
        term.keys("Down", "Enter")
        term.wait_for(f"server 2 of 2 · :{high.port}", timeout=120)
        engine_model(term, model[high.port], model[low.port])
        # The log pane follows the other server's log now: the bare one's API server names
        # its host pid on its lines, the container's its own (PID 1 inside).
        term.keys("/", *"APIServer pid=", "Enter")
        screen = term.wait_for(lambda s: "search /APIServer pid=/" in s and
                               "(APIServer pid=" in s.split("Serve log", 1)[-1], timeout=60)
        log = screen.split("Serve log", 1)[-1]
        bare_line = f"(APIServer pid={_bare_pid(bare)})"
        assert (bare_line in log) is (high is bare), log
        assert term.quit(timeout=20)
    finally:
        term.stop()
    # No helper of this console is left on the host (they carry the entry's match, the
    # fixture's `vllm`, in their arguments; another test's console of the same user may run).
    deadline = time.monotonic() + 10
    while helpers_on_host(bare.fixture.vllm, sshd.user) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert helpers_on_host(bare.fixture.vllm, sshd.user) == []
    assert dockerd.docker("ps", "-aq", "--no-trunc").stdout.split() == boxes_before
    assert {bare.port: _identity(_bare_pid(bare)),
            box.port: str(box.inspect()["State"]["StartedAt"])} == servers_before  # type: ignore[index]


def engine_model(term: Terminal, want: str, other: str) -> None:
    """The Engine config tab (`v` switches the right pane to it) shows the server's model:
    `want`, never `other`."""
    for _ in range(3):
        try:
            screen = term.wait_for(f"model = '{want}'", timeout=20)
            break
        except AssertionError:
            term.keys("v")
    else:
        screen = term.wait_for(f"model = '{want}'", timeout=20)
    assert f"model = '{other}'" not in screen, screen
