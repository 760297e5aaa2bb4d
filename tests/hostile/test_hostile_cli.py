"""Bad configuration and hostile words at the command line: a hosts file with unknown keys,
wrong types, broken TOML or bytes, option-looking destinations; error text from a host that
carries escapes and newlines. Every one ends as exit 2 with one inert line that names the
problem (the key and the file for the hosts file), never a traceback, never a connection."""

from __future__ import annotations

import pytest

from vllm_console.console.cli.parser import main
from vllm_console.console.transport.host import HostError

BAD_HOSTS_FILES: list[tuple[bytes, str]] = [
    (b'[hosts.a]\nssh = "x"\npasswd = "hunter2"\n', "unknown key 'hosts.a.passwd'"),
    (b'[hosts.a]\nssh = "x"\npassword = "hunter2"\n', "unknown key 'hosts.a.password'"),
    (b'[hosts.a]\nssh = "x"\n[hosts.a.serve]\nlogs = "/x"\n', "unknown key 'hosts.a.serve.logs'"),
    (b'[hosts.a]\nssh = "x"\n[hosts.a.checks]\nprofil = "x"\n',
     "unknown key 'hosts.a.checks.profil'"),
    (b'[hosts.a]\nssh = "x"\n[hosts.a.sshd]\nport = 1\n', "unknown key 'hosts.a.sshd'"),
    (b'hosts_ = 1\n', "unknown key 'hosts_'"),
    (b'[hosts.a]\nssh = "x"\nport = "22"\n', "hosts.a.port: Input should be a valid integer"),
    (b'[hosts.a]\nssh = "x"\nport = 22.5\n', "hosts.a.port"),
    (b'[hosts.a]\nssh = "x"\nport = 70000\n', "hosts.a.port"),
    (b'[hosts.a]\nssh = "x"\nport = true\n', "hosts.a.port"),
    (b'[hosts.a]\nssh = "x"\nlocal = "yes"\n', "hosts.a.local: Input should be a valid boolean"),
    (b'[hosts.a]\nssh = 5\n', "hosts.a.ssh"),
    (b'[hosts.a]\nssh = "x"\nserve = "vllm serve"\n', "hosts.a.serve"),
    (b'[hosts.a]\nssh = "x"\n[hosts.a.serve]\nlog = 5\n', "hosts.a.serve.log"),
    (b'[hosts.a]\nssh = "x"\n[hosts.a.serve]\nmatch = ["vllm"]\n', "hosts.a.serve.match"),
    (b'[hosts.a]\nssh = "x"\n[hosts.a.gpu]\nnvidia_smi = {a = 1}\n', "hosts.a.gpu.nvidia_smi"),
    (b'hosts = [1, 2]\n', "hosts: Input should be a valid dictionary"),
    (b'[hosts]\na = "x"\n', "hosts.a"),
    (b'[hosts.a]\nssh = "-oProxyCommand=touch /tmp/vc-pwned"\n', "hosts.a.ssh"),
    (b'[hosts.a]\nssh = "a b"\n', "hosts.a.ssh"),
    (b'[hosts.a\nssh = "x"\n', "not valid TOML"),
    (b'[hosts.a]\nssh = "x"\nssh = "y"\n', "not valid TOML"),
    (b'\xff\xfe[hosts.a]\n', "not valid TOML"),
    (b'[hosts.a]\nssh = "x\x00"\n', "not valid TOML"),
    (b"[" * 5000, "not valid TOML"),
]


# "Could not run": 2, but 3 (UNKNOWN) for `check`, a monitoring plugin's convention.
COULD_NOT_RUN = {"status": 2, "check": 3, "restart": 2, "tui": 2}


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err.count("\n") == 1, captured.err
    assert "\x1b" not in captured.err
    return captured.err


@pytest.mark.parametrize(("body", "expected"), BAD_HOSTS_FILES,
                         ids=[f"hosts{i}" for i in range(len(BAD_HOSTS_FILES))])
@pytest.mark.parametrize("command", ["status", "check", "restart", "tui"])
def test_a_bad_hosts_file_is_one_line_naming_key_and_file(
        command: str, body: bytes, expected: str, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    hosts = tmp_path / "hosts.toml"
    hosts.write_bytes(body)
    assert main([command, "a", "--config", str(hosts)]) == COULD_NOT_RUN[command]
    err = one_line_error(capsys)
    assert expected in err
    assert str(hosts) in err
    assert not (tmp_path / "vc-pwned").exists()


@pytest.mark.parametrize("dest", ["a b", "-oProxyCommand=x", "user@host:99999", "h:0",
                                  "user@@host", "[::1", "host;touch x", "host$(x)"])
def test_a_bad_destination_is_refused_before_any_connection(
        dest: str, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("")
    code = main(["status", "--config", str(hosts), "--", dest]) if dest.startswith("-") \
        else main(["status", dest, "--config", str(hosts)])
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if not dest.startswith("-"):
        assert "is not [user@]host[:port]" in err or "out of range" in err or \
            "cannot connect" in err


@pytest.mark.parametrize("command", ["status", "check"])
def test_a_hosts_words_reach_stderr_inert_and_on_one_line(
        command: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    hostile = "cannot read /x: \x1b]0;PWNED\x07\x1b[2J\nsecond line\r\x9b2J"

    async def refuse(*args: object, **kwargs: object) -> None:
        raise HostError(hostile)

    if command == "status":
        monkeypatch.setattr("vllm_console.console.cli.commands.status.collect_status", refuse)
    else:
        monkeypatch.setattr("vllm_console.console.cli.commands.check.run_chain", refuse)
    assert main([command, "h", "--local"]) == COULD_NOT_RUN[command]
    err = one_line_error(capsys)
    assert "\x07" not in err
    assert "\x9b" not in err
    assert "second line" in err
