"""SSHHost against a real OpenSSH sshd on loopback: every verb, the host-key rules, quoting,
and a link that dies and comes back."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from tests.sshd import Sshd, chown_to, keygen
from vllm_console.console.transport.host import ConnectionState, HostError, HostKeyError
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh


@pytest.fixture
async def host(sshd: Sshd):
    if sshd.proc is None:
        sshd.start()
    h = SSHHost(sshd.host_config())
    yield h
    await h.close()


async def test_run_returns_exit_status_and_both_streams(host: SSHHost, sshd: Sshd) -> None:
    result = await host.run("echo out; echo err >&2; whoami; exit 3")
    assert result.exit_status == 3
    assert result.text.splitlines() == ["out", sshd.user]
    assert result.error_text.strip() == "err"
    assert host.link.state is ConnectionState.CONNECTED


async def test_stream_delivers_chunks_of_a_long_lived_command(host: SSHHost) -> None:
    handle = await host.stream("for i in 1 2 3; do echo line$i; sleep 0.05; done")
    data = b"".join([chunk async for chunk in handle])
    assert data.decode().split() == ["line1", "line2", "line3"]


async def test_closing_a_stream_ends_the_remote_command(host: SSHHost, sshd: Sshd) -> None:
    marker = "vc-stream-marker-417"
    handle = await host.stream(f"sleep 417 # {marker}")
    await asyncio.sleep(0.3)
    assert (await host.run(["pgrep", "-u", sshd.user, "-f", "^sleep 417"])).ok
    await handle.close()
    for _ in range(50):
        if not (await host.run(["pgrep", "-u", sshd.user, "-f", "^sleep 417"])).ok:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the remote command outlived its closed stream")


async def test_read_file_and_its_failures(host: SSHHost, sshd: Sshd) -> None:
    d = sshd.user_dir("read")
    (d / "config.json").write_text('{"a": 1}')
    secret = d / "secret"
    secret.write_text("root only")
    os.chown(secret, 0, 0)
    os.chmod(secret, 0o600)
    assert await host.read_file(str(d / "config.json")) == b'{"a": 1}'
    assert await host.read_file(str(d / "config.json"), max_bytes=3) == b'{"a'
    with pytest.raises(FileNotFoundError) as missing:
        await host.read_file(str(d / "nope.json"))
    assert missing.value.filename == str(d / "nope.json")
    if os.geteuid() == 0:
        with pytest.raises(PermissionError):
            await host.read_file(str(secret))
    with pytest.raises(HostError, match="is a directory"):
        await host.read_file(str(d))


async def test_write_file_is_atomic_with_private_mode(host: SSHHost, sshd: Sshd) -> None:
    d = sshd.user_dir("write")
    target = d / "config.json"
    target.write_text("old")
    chown_to(target, sshd.user)
    await host.write_file(str(target), b'{"new": true}', mode=0o600)
    assert target.read_text() == '{"new": true}'
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in d.iterdir()] == ["config.json"]


async def test_paths_with_spaces_quotes_and_command_substitution_are_data(
        host: SSHHost, sshd: Sshd) -> None:
    d = sshd.user_dir("quote")
    nasty = d / "a b $(touch PWNED) `touch PWNED2`; 'q\" x.json"
    nasty.write_text("payload")
    chown_to(nasty, sshd.user)
    assert await host.read_file(str(nasty)) == b"payload"
    listed = await host.run(["ls", "-1", str(d)])
    assert listed.text.strip() == nasty.name
    await host.write_file(str(nasty), b"again")
    pid = await host.start_detached(["cat", str(nasty)], log=str(d / "log $(x).txt"), cwd=str(d))
    assert pid > 0
    await asyncio.sleep(0.3)
    assert (d / "log $(x).txt").read_text() == "again"
    assert not (d / "PWNED").exists()
    assert not (d / "PWNED2").exists()
    assert not Path("PWNED").exists()


async def test_start_detached_survives_the_link(host: SSHHost, sshd: Sshd) -> None:
    d = sshd.user_dir("detach")
    log = d / "out.log"
    pid = await host.start_detached(["sh", "-c", "echo started; sleep 30"], log=str(log),
                                    env={"GREETING": "hi there"})
    await host.close()
    await asyncio.sleep(0.3)
    try:
        assert Path(f"/proc/{pid}").exists(), "the detached process died with the link"
        assert os.getsid(pid) == pid, "not in a session of its own"
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"GREETING=hi there" in environ
        assert log.read_text() == "started\n"
    finally:
        os.kill(pid, 9)


async def test_forward_port_reaches_a_service_on_the_host(host: SSHHost) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"pong:" + await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        local = await host.forward_port("127.0.0.1", port)
        assert local != port
        reader, writer = await asyncio.open_connection("127.0.0.1", local)
        writer.write(b"ping\n")
        await writer.drain()
        assert await reader.read() == b"pong:ping\n"
        writer.close()
        assert await host.forward_port("127.0.0.1", port) == local


async def test_at_most_four_channels_at_once(host: SSHHost, sshd: Sshd) -> None:
    d = sshd.user_dir("chan")
    script = (f'mkdir {d}/$1; n=$(ls {d} | grep -c ^j); echo $n; sleep 0.3; rmdir {d}/$1')
    results = await asyncio.gather(*[host.run(["sh", "-c", script, "sh", f"j{i}"])
                                     for i in range(12)])
    assert all(r.ok for r in results), [r.error_text for r in results]
    peak = max(int(r.text) for r in results)
    assert 2 <= peak <= 4


async def test_unknown_host_key_is_refused_with_its_fingerprint(sshd: Sshd, tmp_path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = SSHHost(sshd.host_config(known_hosts=str(empty)))
    with pytest.raises(HostKeyError) as refused:
        await host.run("true")
    fingerprint = subprocess.run(["ssh-keygen", "-lf", str(sshd.directory / "host_ed25519.pub")],
                                 capture_output=True, text=True, check=True).stdout.split()[1]
    assert refused.value.fingerprint == fingerprint
    assert fingerprint in str(refused.value)
    assert "--accept-new" in str(refused.value)
    assert not refused.value.changed
    assert host.link.state is ConnectionState.REFUSED
    assert empty.read_text() == ""
    await host.close()


async def test_accept_new_records_the_key_then_connects_strictly(sshd: Sshd, tmp_path) -> None:
    known = tmp_path / "ssh" / "known_hosts"
    host = SSHHost(sshd.host_config(known_hosts=str(known), accept_new=True))
    assert (await host.run("echo ok")).text == "ok\n"
    await host.close()
    key_type, key_b64 = sshd.host_key_pub.split()[:2]
    assert known.read_text() == f"[127.0.0.1]:{sshd.port} {key_type} {key_b64}\n"
    strict = SSHHost(sshd.host_config(known_hosts=str(known)))
    assert (await strict.run("echo again")).ok
    await strict.close()


async def test_changed_host_key_is_always_refused(sshd: Sshd, tmp_path) -> None:
    other = keygen(tmp_path / "other").split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    for accept_new in (False, True):
        host = SSHHost(sshd.host_config(known_hosts=str(known), accept_new=accept_new))
        with pytest.raises(HostKeyError, match="HOST KEY CHANGED") as refused:
            await host.connect()
        assert refused.value.changed
        await host.close()
    assert known.read_text().count("\n") == 1


async def test_login_refused_is_a_clear_error(sshd: Sshd, tmp_path) -> None:
    keygen(tmp_path / "stranger")
    host = SSHHost(sshd.host_config(identity=str(tmp_path / "stranger")))
    with pytest.raises(HostError, match="login refused"):
        await host.run("true")
    await host.close()


async def test_nothing_listening_is_a_clear_error(sshd: Sshd) -> None:
    from tests.sshd import free_port

    host = SSHHost(sshd.host_config(port=free_port()), connect_timeout=3)
    with pytest.raises(HostError, match="cannot connect"):
        await host.run("true")
    await host.close()


async def test_sshd_killed_then_back_reconnects_and_a_stream_resumes(sshd: Sshd) -> None:
    d = sshd.user_dir("resume")
    log = d / "serve.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    chown_to(log, sshd.user)
    states: list[ConnectionState] = []
    host = SSHHost(sshd.host_config(), keepalive_interval=0.5, keepalive_count_max=2)
    host.add_listener(lambda s: states.append(s.state))
    received = b""

    async def follow(offset: int) -> None:
        nonlocal received
        handle = await host.stream(["tail", "-c", f"+{offset + 1}", "-F", str(log)])
        try:
            async for chunk in handle:
                received += chunk
        except HostError:
            pass

    try:
        task = asyncio.create_task(follow(0))
        while received.count(b"\n") < 100:
            await asyncio.sleep(0.05)
        sshd.kill()
        await asyncio.wait_for(task, 10)
        with log.open("a") as fh:  # the server keeps logging while the link is down
            fh.writelines(f"line {i}\n" for i in range(100, 150))
        for _ in range(100):
            if ConnectionState.RECONNECTING in states:
                break
            await asyncio.sleep(0.1)
        assert ConnectionState.RECONNECTING in states
        sshd.start()
        await host.wait_connected(timeout=20)
        task = asyncio.create_task(follow(len(received)))
        for _ in range(100):
            if received.count(b"\n") >= 150:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        lines = received.decode().splitlines()
        assert lines == [f"line {i}" for i in range(150)], "gap or duplicate after resume"
        assert host.link.reconnects >= 1
    finally:
        if sshd.proc is None:
            sshd.start()
        await host.close()


async def test_empty_input_and_no_input_reach_eof(host: SSHHost, sshd: Sshd) -> None:
    assert (await host.run("cat", timeout=5)).stdout == b""
    assert (await host.run("cat", input=b"", timeout=5)).stdout == b""
    d = sshd.user_dir("empty")
    await host.write_file(str(d / "empty.json"), b"")
    assert (d / "empty.json").read_bytes() == b""


async def test_ssh_config_alias_user_port_and_identity_are_honoured(
        sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if sshd.proc is None:
        sshd.start()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host gpu-alias\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n")
    monkeypatch.setenv("HOME", str(home))
    from vllm_console.console.settings import HostsFile, resolve_host

    config = resolve_host("gpu-alias", HostsFile(),
                          overrides={"known_hosts": str(sshd.known_hosts)})
    assert config.hostname == "gpu-alias"
    assert config.port is None
    assert config.username is None
    host = SSHHost(config)
    try:
        result = await host.run("whoami")
        assert result.text.strip() == sshd.user
    finally:
        await host.close()


async def test_input_to_a_command_that_exits_without_reading_it_is_no_error(
        host: SSHHost) -> None:
    # `test -s helper || cat > helper` (how helper scripts are installed): once the helper is
    # there the shell exits at once, and the channel can close before the input is written.
    # The command ran: its status, not a broken pipe, is the answer.
    results = await asyncio.gather(*(host.run("exit 3", input=b"unread\n" * 1000)
                                     for _ in range(40)))
    assert {r.exit_status for r in results} == {3}
