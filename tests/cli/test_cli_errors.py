"""One error path for every command: whatever goes wrong ends as one line on stderr and the
command's documented "could not run" status (3 for `check`, 2 for the others), never a
traceback. Each case here printed a traceback from at least one command before `cli.main`
handled them all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_console.console.cli.parser import main

COULD_NOT_RUN = {"status": 2, "check": 3, "restart": 2}


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    assert err.count("\n") == 1, err
    return err


@pytest.fixture
def broken_ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose ~/.ssh/config has a typo, as a person's might."""
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    (ssh / "config").write_text("Host gpu1\n  Port twenty-two\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    return ssh / "config"


@pytest.mark.parametrize("command", ["status", "check", "restart"])
def test_a_broken_ssh_config_is_one_line_naming_the_file_and_line(
        command: str, broken_ssh_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = broken_ssh_config.parent.parent / "hosts.toml"
    hosts.write_text("")
    extra = ["--yes"] if command == "restart" else []
    assert main([command, "gpu1", "--config", str(hosts), *extra]) == COULD_NOT_RUN[command]
    err = one_line(capsys.readouterr().err)
    assert f"vllm-console {command}: " in err
    assert f"{broken_ssh_config} line 2" in err
    assert "twenty-two" in err


def test_an_unexpected_failure_is_one_line_that_asks_for_a_report(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bug of ours (here: a restart planner that trips over itself) still ends as one line,
    with the restart's "could not run" status, and says it is ours."""

    async def trips(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("vllm_console.console.cli.commands.restart.plan_restart", trips)
    assert main(["restart", "h", "--local", "--yes"]) == 2
    err = one_line(capsys.readouterr().err)
    assert "ZeroDivisionError: division by zero" in err
    assert "please report this" in err


@pytest.mark.programs
@pytest.mark.parametrize("words", [["demo", "--list"], ["sim", "--list"]])
def test_a_reader_that_leaves_early_is_not_an_error(words: list[str]) -> None:
    """`vllm-console demo --list | head -1`: the reader closes the pipe before the listing is
    written; the command says nothing on stderr and exits 0."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    proc = subprocess.run([sys.executable, "-m", "vllm_console", *words], stdout=write_end,
                          stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    os.close(write_end)
    assert proc.stderr == ""
    assert proc.returncode == 0


def test_a_system_error_names_the_file_without_errno_noise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An OSError a command lets through reads as `PATH: reason`, not `[Errno 13] ... 'PATH'`."""
    root = tmp_path / "tree"
    root.write_text("")  # a file where sim wants a directory
    assert main(["sim", "--root", str(root / "host")]) == 2
    err = one_line(capsys.readouterr().err)
    assert "[Errno" not in err
    assert str(root) in err



@pytest.mark.programs
@pytest.mark.parametrize("command", ["status", "check", "restart"])
def test_a_hosts_file_that_is_a_fifo_is_refused_in_one_line(
        command: str, tmp_path: Path) -> None:
    """A FIFO given as the hosts file (a typo, `<(...)` gone stale) used to block every command
    on its first read, with no output at all. It is refused before anything is read."""
    fifo = tmp_path / "hosts.toml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "vllm_console", command, "h",
                           "--config", str(fifo),
                           "--yes" if command == "restart" else "--local"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == COULD_NOT_RUN[command]
    err = one_line(proc.stderr)
    assert str(fifo) in err
    assert "not a regular file" in err


@pytest.mark.parametrize(("key", "option"), [("match", "--match"), ("log", "--log")])
def test_a_huge_setting_is_refused_at_load_naming_its_key(
        key: str, option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 10 MB `match` reached the host's shell ("Argument list too long") and `check` then
    said no serve process was found, which was false: discovery never ran. Every setting's
    length is bounded where it is read, the hosts file or the command line. (200 kB: over
    Linux's bound on one argument, 128 kB, and 50 times the settings' bound.)"""
    huge = "x" * 200_000
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.h]\nlocal = true\n[hosts.h.serve]\n{key} = "{huge}"\n')
    assert main(["check", "h", "--config", str(hosts)]) == COULD_NOT_RUN["check"]
    err = one_line(capsys.readouterr().err)
    assert f"hosts.h.serve.{key}" in err
    assert "at most" in err
    assert len(err) < 500
    hosts.write_text("")
    assert main(["check", "h", "--local", "--config", str(hosts), option, huge]) == 3
    err = one_line(capsys.readouterr().err)
    assert option in err
    assert "at most" in err
    assert len(err) < 500
