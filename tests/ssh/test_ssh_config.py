"""`~/.ssh/config` honoured, against a real OpenSSH sshd on loopback: a host named only by its
alias (`vllm-console gpu`) reaches the right address, port and user with the right key, checks
the host key against the configured known_hosts file, gives up after ConnectTimeout, goes
through a ProxyJump, and with `StrictHostKeyChecking accept-new` records an unknown key once and
is strict from then on. Each test writes a `~/.ssh/config` into a fresh HOME (no agent, no
default keys), so only what the file says can make the connection work."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.sshd import Sshd, keygen
from tests.tcp_proxy import TcpProxy
from vllm_console.console.cli.parser import main
from vllm_console.console.settings import HostConfig, HostsFile, resolve_host
from vllm_console.console.transport.host import HostError, HostKeyError
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sshd: Sshd) -> Path:
    """A HOME of its own with an empty ~/.ssh, no ssh-agent, and the sshd running."""
    if sshd.proc is None:
        sshd.start()
    (tmp_path / ".ssh").mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return tmp_path


def write_config(home: Path, sshd: Sshd, *, leave_out: str = "", extra: str = "",
                 port: int | None = None) -> Path:
    """`Host gpu` with every option the connection needs, but `leave_out`."""
    options = {
        "HostName": "127.0.0.1",
        "Port": str(port or sshd.port),
        "User": sshd.user,
        "IdentityFile": str(sshd.client_key),
        "UserKnownHostsFile": str(sshd.known_hosts),
    }
    options.pop(leave_out, None)
    body = "Host gpu\n" + "".join(f"  {k} {v}\n" for k, v in options.items()) + extra
    path = home / ".ssh" / "config"
    path.write_text(body)
    return path


def alias_config(name: str = "gpu") -> HostConfig:
    """What `vllm-console gpu` resolves to with an empty hosts file: the alias, nothing else."""
    config = resolve_host(name, HostsFile())
    assert (config.hostname, config.username, config.port, config.identity,
            config.known_hosts) == (name, None, None, "", "")
    return config


async def whoami(config: HostConfig) -> str:
    host = SSHHost(config, connect_timeout=5)
    try:
        return (await host.run("whoami")).text.strip()
    finally:
        await host.close()


@pytest.mark.parametrize("option", ["HostName", "Port", "User", "IdentityFile",
                                    "UserKnownHostsFile"])
async def test_each_option_of_the_alias_is_what_makes_the_connection_work(
        option: str, home: Path, sshd: Sshd) -> None:
    """With every option the alias reaches the sshd as its login user; without any one of them
    it cannot (wrong address, port 22, user root, no key, an unknown host key)."""
    write_config(home, sshd)
    assert await whoami(alias_config()) == sshd.user
    write_config(home, sshd, leave_out=option)
    with pytest.raises(HostError):
        await whoami(alias_config())


async def test_user_known_hosts_file_is_where_keys_are_checked_and_named(
        home: Path, sshd: Sshd) -> None:
    """The configured file vouches for the key (~/.ssh/known_hosts does not exist); an empty
    configured file refuses the key and the refusal names that file."""
    assert not (home / ".ssh" / "known_hosts").exists()
    empty = home / "elsewhere_known_hosts"
    empty.write_text("")
    write_config(home, sshd, leave_out="UserKnownHostsFile",
                 extra=f"  UserKnownHostsFile {empty}\n")
    with pytest.raises(HostKeyError, match=f"record it in {empty}"):
        await whoami(alias_config())
    empty.write_text(sshd.known_hosts.read_text())
    assert await whoami(alias_config()) == sshd.user


async def test_connect_timeout_bounds_a_host_that_never_answers(home: Path, sshd: Sshd) -> None:
    """A host that accepts TCP and never speaks SSH: ConnectTimeout 1 gives up in about a
    second, not after the console's own 10 s default."""
    silent = TcpProxy(sshd.port).start()
    silent.silent = True
    try:
        write_config(home, sshd, port=silent.port, extra="  ConnectTimeout 1\n")
        host = SSHHost(alias_config(), connect_timeout=10)
        started = time.monotonic()
        with pytest.raises(HostError, match="cannot connect"):
            await host.connect()
        took = time.monotonic() - started
        await host.close()
    finally:
        silent.close()
    assert took < 5, took


async def test_proxy_jump_goes_through_the_jump_host(home: Path, sshd: Sshd) -> None:
    """The jump host is the same sshd seen through a TCP proxy: the login only counts as
    jumped when the proxy carried a connection (a direct one would not touch it)."""
    jump = TcpProxy(sshd.port).start()
    try:
        key = sshd.host_key_pub.split()[:2]
        known = home / "known_hosts"
        known.write_text(sshd.known_hosts.read_text() +
                         f"[127.0.0.1]:{jump.port} {key[0]} {key[1]}\n")
        (home / ".ssh" / "config").write_text(
            f"Host gpu\n  HostName 127.0.0.1\n  Port {sshd.port}\n"
            f"  ProxyJump {sshd.user}@127.0.0.1:{jump.port}\n"
            f"Host *\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
            f"  UserKnownHostsFile {known}\n")
        assert await whoami(alias_config()) == sshd.user
        assert jump.accepted == 1
    finally:
        jump.close()


async def test_strict_host_key_checking_accept_new_records_once_then_is_strict(
        home: Path, sshd: Sshd) -> None:
    recorded = home / ".ssh" / "known_hosts"
    write_config(home, sshd, leave_out="UserKnownHostsFile",
                 extra="  StrictHostKeyChecking accept-new\n")
    assert await whoami(alias_config()) == sshd.user
    line = recorded.read_text()
    assert line.split()[:3] == [f"[127.0.0.1]:{sshd.port}", *sshd.host_key_pub.split()[:2]]
    assert recorded.stat().st_mode & 0o777 == 0o600

    assert await whoami(alias_config()) == sshd.user  # known now: nothing more recorded
    assert recorded.read_text() == line

    # The host "re-keyed": the recorded key is another one now. accept-new never takes it.
    other = keygen(home / "other_host").split()
    recorded.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    with pytest.raises(HostKeyError, match="HOST KEY CHANGED"):
        await whoami(alias_config())
    assert recorded.read_text().count("\n") == 1  # never rewritten, never appended to


def test_strict_host_key_checking_yes_stays_strict_from_the_cli(
        home: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]) -> None:
    """`yes` (OpenSSH's default too) refuses the unknown key with its fingerprint: exit 2."""
    write_config(home, sshd, leave_out="UserKnownHostsFile",
                 extra="  StrictHostKeyChecking yes\n")
    hosts = home / "hosts.toml"
    hosts.write_text("")
    assert main(["status", "gpu", "--config", str(hosts)]) == 2
    err = capsys.readouterr().err
    assert "unknown host key" in err
    assert "SHA256:" in err
    assert not (home / ".ssh" / "known_hosts").exists()


async def test_an_unknown_jump_host_key_is_refused_naming_the_jump(home: Path,
                                                                   sshd: Sshd) -> None:
    """The jump host's key is checked strictly too (asyncssh checks it against ssh_config's
    known_hosts files); the refusal says it was the jump host's."""
    jump = TcpProxy(sshd.port).start()
    try:
        (home / ".ssh" / "config").write_text(
            f"Host gpu\n  HostName 127.0.0.1\n  Port {sshd.port}\n"
            f"  ProxyJump {sshd.user}@127.0.0.1:{jump.port}\n"
            f"Host *\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
            f"  UserKnownHostsFile {sshd.known_hosts}\n")
        with pytest.raises(HostKeyError, match=f"ProxyJump {sshd.user}@127.0.0.1:{jump.port}"):
            await whoami(alias_config())
    finally:
        jump.close()
