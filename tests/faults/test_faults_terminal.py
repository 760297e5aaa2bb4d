"""Faults of the console's own terminal, in a real one (tmux): the pane killed under it, the
session killed, SIGHUP ignored (nohup) so that only the dead pty says so, SIGTERM. Each time the
console is gone within seconds, having burnt next to no CPU on the way out, with what it
started stopped (the demo's simulated host; over SSH, its agent and follower on the host), and
after SIGTERM the terminal is given back as it was: no alternate screen, no mouse reporting."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.fault_support import helpers_on_host
from tests.fleet_support import FleetWorld
from tests.sshd import Sshd, chown_to, free_port, start_as
from tests.tmux import Terminal, app_env, demo_processes
from vllm_console.console.sim import stop
from vllm_console.console.sim.tree import materialise

pytestmark = pytest.mark.tmux

ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 10.0
# A console that ignores SIGHUP, as under `nohup`: then the dead pty alone says the terminal
# is gone (Textual's input thread spun on it at 130 % of a core, for good).
NOHUP = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGHUP, "
         "signal.SIG_IGN); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]
CONSOLE = ["-m", "vllm_console"]


def console_terminal(tmp_path: Path, *args: str, nohup: bool = False,
                     status: Path | None = None) -> Terminal:
    """The console in tmux; with `status`, under a shell that writes its exit status there
    (tmux's own `pane_dead_status` is not to be relied on: it now and then left the exited
    console a zombie, unreaped and with no status, for as long as the test waited)."""
    env = app_env()
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "s"),
               XDG_DATA_HOME=str(tmp_path / "d"), XDG_CONFIG_HOME=str(tmp_path / "c"))
    python = NOHUP if nohup else [sys.executable]
    wrapper = ["sh", "-c", f'"$0" "$@"; echo $? > {status}'] if status else []
    return Terminal([*wrapper, *python, *CONSOLE, *args], env=env).start()


def pane_pid(term: Terminal) -> int:
    return int(term._tmux("list-panes", "-t", "main", "-F", "#{pane_pid}").stdout)


def console_pid(term: Terminal) -> int:
    """The console's pid under the status wrapper: the child of the pane's shell."""
    shell = pane_pid(term)
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and int((entry / "stat").read_text()
                                                .rsplit(")", 1)[1].split()[1]) == shell:
                    return int(entry.name)
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError("the console never started under its shell")


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of `pid`; None once it is gone (or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] in ("Z", "X"):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_until_gone(pid: int, timeout: float = GONE_WITHIN_S) -> float:
    """CPU seconds `pid` burns from now until it is gone; AssertionError if it outlives
    `timeout` (the figure it burnt meanwhile said)."""
    start = last = cpu_s(pid) or 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = cpu_s(pid)
        if now is None:
            return last - start
        last = now
        time.sleep(0.1)
    state = Path(f"/proc/{pid}/stat").read_text()[:60]
    raise AssertionError(f"{state}: the console (pid {pid}) still runs {timeout:.0f} s after its "
                         f"terminal went away, having burnt {last - start:.1f} s of CPU since")


def terminal_modes(term: Terminal) -> str:
    """What the pane's terminal is in: alternate screen, mouse reporting."""
    return term._tmux("display-message", "-p", "-t", "main",
                      "alt=#{alternate_on} mouse=#{mouse_any_flag}").stdout.strip()


def exit_status(status: Path, timeout: float = GONE_WITHIN_S) -> str:
    """The console's exit status, as its shell wrote it to `status`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if status.exists() and status.read_text().strip():
            return status.read_text().strip()
        time.sleep(0.1)
    raise AssertionError("the console did not exit")


def kill_left(term: Terminal, pid: int) -> None:
    """End the test's console should it have outlived its terminal (the failure under test),
    so that a failing run leaves no spinning process behind."""
    term.stop()
    if cpu_s(pid) is not None:
        os.kill(pid, 9)


@pytest.mark.parametrize("kill", ["kill-pane", "kill-session"])
def test_killing_its_terminal_ends_the_demo_and_its_simulated_host(tmp_path: Path,
                                                                   kill: str) -> None:
    term = console_terminal(tmp_path, "demo")
    pid = pane_pid(term)
    try:
        term.wait_for("GPU0", timeout=40)
        term._tmux(kill, "-t", "main")
        assert cpu_until_gone(pid) < 2.0, "it burnt CPU on the way out"
        deadline = time.monotonic() + GONE_WITHIN_S
        while demo_processes(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert demo_processes(tmp_path) == [], "the demo left its simulated host running"
        assert not any(p.name.startswith("vllm-console-demo-") for p in tmp_path.iterdir())
    finally:
        kill_left(term, pid)


def test_a_dead_pty_ends_the_console_even_with_sighup_ignored(tmp_path: Path) -> None:
    term = console_terminal(tmp_path, "tui", "here", "--local", nohup=True)
    pid = pane_pid(term)
    try:
        term.wait_for("connected", timeout=30)
        term._tmux("kill-pane", "-t", "main")
        assert cpu_until_gone(pid) < 2.0, "it burnt CPU on the way out"
    finally:
        kill_left(term, pid)


def test_a_dead_pty_ends_the_demo_with_sighup_ignored_and_stops_its_host(tmp_path: Path
                                                                          ) -> None:
    term = console_terminal(tmp_path, "demo", nohup=True)
    pid = pane_pid(term)
    try:
        term.wait_for("GPU0", timeout=40)
        term._tmux("kill-session", "-t", "main")
        assert cpu_until_gone(pid) < 2.0, "it burnt CPU on the way out"
        deadline = time.monotonic() + GONE_WITHIN_S
        while demo_processes(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert demo_processes(tmp_path) == [], "the demo left its simulated host running"
    finally:
        kill_left(term, pid)


@pytest.mark.parametrize("command", [("tui", "here", "--local"), ("demo",)])
def test_sigterm_exits_143_and_gives_the_terminal_back(tmp_path: Path,
                                                       command: tuple[str, ...]) -> None:
    status = tmp_path / "status"
    term = console_terminal(tmp_path, *command, status=status)
    pid = console_pid(term)
    try:
        term.wait_for(lambda s: "connected" in s or "GPU0" in s, timeout=40)
        # The app switched the terminal to the alternate screen and mouse reporting.
        assert terminal_modes(term) == "alt=1 mouse=1"
        os.kill(pid, 15)
        assert exit_status(status) == "143"
        assert terminal_modes(term) == "alt=0 mouse=0", "the terminal was not given back"
        assert demo_processes(tmp_path) == [], "it left its simulated host running"
    finally:
        kill_left(term, pid)


@pytest.mark.parametrize("where", ["table", "server"])
def test_fleet_ends_on_sigterm_and_on_a_dead_pty_in_its_table_and_in_a_server(
        prometheus_world: FleetWorld, tmp_path: Path, where: str) -> None:
    """In the table and in the console Enter opened from it: SIGTERM ends the whole command
    (not back to the table), and so does the pty dying with SIGHUP ignored."""
    for how in ("sigterm", "dead-pty"):
        status = tmp_path / f"status-{how}"
        term = console_terminal(tmp_path, "fleet", "--prometheus", prometheus_world.prom.url,
                                nohup=how == "dead-pty", status=status)
        pid = console_pid(term)
        try:
            term.wait_for("3/3 servers", timeout=30)
            if where == "server":
                term.keys("Enter")
                term.wait_for("URL only:", timeout=30)
            if how == "sigterm":
                os.kill(pid, 15)
                assert exit_status(status) == "143"
                assert terminal_modes(term) == "alt=0 mouse=0", "the terminal was not given back"
            else:
                term._tmux("kill-pane", "-t", "main")
                assert cpu_until_gone(pid) < 2.0, "it burnt CPU on the way out"
        finally:
            kill_left(term, pid)


@pytest.mark.ssh
@pytest.mark.parametrize("how", ["kill-pane", "kill-pane-sighup-ignored", "sigterm"])
def test_the_console_gone_leaves_no_helper_on_the_host(sshd: Sshd, tmp_path: Path,
                                                       how: str) -> None:
    """Its terminal killed (SIGHUP, or the dead pty alone) or SIGTERM: the console closes its
    SSH link and sshd ends its agent and follower (and their nvidia-smi loops)."""
    if sshd.proc is None:
        sshd.start()
    tree = materialise("incident", sshd.user_dir("hangup") / how, port=free_port(),
                       startup_s=0.5, metrics_interval_s=0.3)
    chown_to(tree.root, sshd.user)
    server = start_as(tree, sshd.user)
    hosts = sshd.hosts_file(tmp_path / "hosts.toml", "gpu1", tree.root, tree.nvidia_smi)
    term = console_terminal(tmp_path, "--config", str(hosts), "gpu1",
                            nohup=how.endswith("ignored"))
    pid = pane_pid(term)
    try:
        term.wait_for(lambda s: "GPU0" in s and "SpecDecoding" in s, timeout=45)
        assert helpers_on_host(tree.root, sshd.user)
        if how == "sigterm":
            os.kill(pid, 15)
        else:
            term._tmux("kill-pane", "-t", "main")
        assert cpu_until_gone(pid) < 2.0, "it burnt CPU on the way out"
        deadline = time.monotonic() + GONE_WITHIN_S
        while helpers_on_host(tree.root, sshd.user) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert helpers_on_host(tree.root, sshd.user) == [], "helpers left on the host"
    finally:
        kill_left(term, pid)
        stop(server)
        stop(tree)
