"""The host names offered at a Tab: the hosts file's entries, then ssh_config's aliases."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_console.console.cli.host_names import host_names


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host bastion gpu1\n  User u\nHost *.lab\n")
    return tmp_path


def test_names_come_from_the_hosts_file_then_ssh_config(home: Path) -> None:
    hosts = home / "hosts.toml"
    hosts.write_text('[hosts.gpu1]\nssh = "u@h"\n[hosts.gpu2]\nlocal = true\n')
    assert host_names(str(hosts)) == ["gpu1", "gpu2", "bastion"]


def test_a_broken_entry_still_offers_every_name(home: Path) -> None:
    """The name is what the user is typing; the command then says what is wrong with the
    entry. An entry with a typo'd key used to hide every name of the file."""
    hosts = home / "hosts.toml"
    hosts.write_text('[hosts.gpu1]\nssh = "u@h"\n[hosts.gpu2]\nsssh = "typo"\n')
    assert host_names(str(hosts)) == ["gpu1", "gpu2", "bastion"]


@pytest.mark.parametrize("text", ["[hosts\n", "hosts = 3\n", "[hosts]\ngpu1 = 3\n", "\xff"])
def test_a_file_that_is_not_a_hosts_table_offers_only_ssh_config(home: Path, text: str) -> None:
    hosts = home / "hosts.toml"
    hosts.write_bytes(text.encode("latin-1"))
    assert host_names(str(hosts)) == ["bastion", "gpu1"]


def test_a_fifo_given_as_the_hosts_file_is_never_waited_on(home: Path) -> None:
    fifo = home / "hosts.fifo"
    os.mkfifo(fifo)
    assert host_names(str(fifo)) == ["bastion", "gpu1"]
