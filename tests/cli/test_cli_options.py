"""The command line as a person meets it: options generated from the settings model, words
refused with what would have been right (a theme, an identity file, a host called like a
subcommand), the way to a first hosts file (`init`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from vllm_console.console.cli.parser import build_parser, main, subcommands
from vllm_console.console.settings import (
    FleetSettings,
    HostConfig,
    HostEntry,
    load_hosts_file,
    override_type,
    overrides,
)
from vllm_console.console.transport.connect import host_config_from_args

HOST_COMMANDS = ("tui", "check", "status", "restart")


def config_from(words: list[str]) -> HostConfig:
    return host_config_from_args(build_parser().parse_args(words))


def test_every_overridable_setting_is_an_option_of_every_host_command_with_its_docstring(
) -> None:
    """One declaration per setting: the hosts file's key, the option, the help."""
    found = overrides()
    assert {name for name, *_ in found} >= {"python", "log", "target", "draft", "match", "url",
                                             "nvidia_smi", "reference", "profile"}
    for command in HOST_COMMANDS:
        helptext = " ".join(subcommands(build_parser())[command].format_help().split())
        for name, metavar, description, _default in found:
            flag = f"--{name.replace('_', '-')} {metavar}"
            assert flag in helptext, (command, flag)
            first_words = " ".join(description.rstrip(".").split()[1:5])
            assert first_words in helptext, (command, name)


def test_each_option_lands_in_the_setting_it_overrides(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[hosts.gpu1]\nssh = "u@h"\n[hosts.gpu1.serve]\nlog = "/from/file"\n')
    for command in HOST_COMMANDS:
        for name, *_ in overrides():
            value: object = 7.5 if override_type(name) is float else \
                8001 if override_type(name) is int else \
                "podman" if name == "runtime" else f"/cli/{name}"
            config = config_from([command, "gpu1", "--config", str(hosts),
                                  f"--{name.replace('_', '-')}", str(value)])
            sections = (config.serve, config.gpu, config.checks)
            assert [getattr(s, name) for s in sections if hasattr(s, name)] == [value]
    assert config_from(["status", "gpu1", "--config", str(hosts)]).serve.log == "/from/file"


def test_port_picks_the_server_never_the_ssh_port(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`--port N` is the server's port (`serve.port`): the SSH port stays the destination's,
    and the hosts file's `serve.port` is the same setting."""
    config = config_from(["status", "u@h:2222", "--port", "8001"])
    assert (config.port, config.serve.port) == (2222, 8001)
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[hosts.gpu1]\nssh = "u@h"\nport = 22\n[hosts.gpu1.serve]\nport = 8002\n')
    config = config_from(["status", "gpu1", "--config", str(hosts)])
    assert (config.port, config.serve.port) == (22, 8002)
    assert config_from(["status", "gpu1", "--config", str(hosts), "--port", "8003"]
                       ).serve.port == 8003
    assert main(["status", "gpu1", "--config", str(hosts), "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_a_container_runtime_is_docker_or_podman_and_nothing_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`serve.runtime` names the program the host runs: any other word is refused, in one
    line, on the command line and in the hosts file alike."""
    assert config_from(["status", "h", "--runtime", "podman"]).serve.runtime == "podman"
    assert config_from(["status", "h"]).serve.runtime == "docker"
    assert main(["status", "h", "--runtime", "sh -c id"]) == 2
    err = capsys.readouterr().err
    assert "runtime" in err
    assert "must be one of docker, podman" in err
    assert "Traceback" not in err
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[hosts.gpu1]\nssh = "u@h"\n[hosts.gpu1.serve]\ncontainer = "-v"\n')
    assert main(["status", "gpu1", "--config", str(hosts)]) == 2
    assert "must be a container's name or id" in capsys.readouterr().err


def test_the_host_options_land_in_the_host_config(tmp_path: Path) -> None:
    key = tmp_path / "id_gpu"
    key.write_text("")
    config = config_from(["status", "u@h", "--identity", str(key), "--known-hosts",
                          str(tmp_path / "kh"), "--accept-new", "--readonly"])
    assert (config.identity, config.known_hosts, config.accept_new, config.readonly,
            config.local) == (str(key), str(tmp_path / "kh"), True, True, False)
    assert config_from(["status", "h", "--local"]).local


def test_the_subcommand_is_found_after_any_option_that_takes_a_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`vllm-console --unit check status h`: `check` is --unit's value and `status` the command
    (the options that take a value are read off the parser, not kept by hand)."""
    missing = tmp_path / "missing.toml"
    assert main(["--unit", "check", "status", "h", "--config", str(missing)]) == 2  # check: 3
    assert capsys.readouterr().err.startswith("vllm-console status: hosts file")


@pytest.mark.parametrize("command", ["tui", "demo", "fleet"])
def test_an_unknown_theme_is_refused_with_the_list(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_console.themes import THEMES

    words = {"tui": ["tui", "h", "--local"], "demo": ["demo"],
             "fleet": ["fleet", "--prometheus", "http://127.0.0.1:9"]}[command]
    assert main([*words, "--theme", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown theme 'nope'" in err
    assert all(name in err for name in THEMES)


@pytest.mark.parametrize("command", ["status", "check", "restart", "tui"])
def test_a_missing_identity_file_is_named(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("")
    missing = tmp_path / "nonexistent"
    assert main([command, "127.0.0.1:1", "--config", str(hosts), "--identity",
                 str(missing), "--yes"] if command == "restart" else
                [command, "127.0.0.1:1", "--config", str(hosts), "--identity", str(missing)]
                ) == (3 if command == "check" else 2)
    err = capsys.readouterr().err
    assert f"identity file {missing} does not exist" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["sim", "check"])
def test_a_host_called_like_a_subcommand_hints_tui(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.{command}]\nssh = "u@h"\n')
    assert main([command, "--config", str(hosts)]) != 0
    # The hosts file named keeps being named: without it the hint opened no such host.
    assert f"`vllm-console tui {command} --config {hosts}`" in capsys.readouterr().err
    config = config_from(["tui", command, "--config", str(hosts)])
    assert (config.name, config.hostname) == (command, "h")


def test_an_ssh_config_alias_called_like_a_subcommand_hints_tui(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host status *.lab\n  HostName 10.0.0.5\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert main(["status"]) == 2
    assert "`vllm-console tui status`" in capsys.readouterr().err


def test_no_hosts_file_names_the_path_and_init_writes_one_it_never_overwrites(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "vllm-console" / "hosts.toml"
    assert main([]) == 2
    err = capsys.readouterr().err
    assert f"the hosts file {path} does not exist" in err
    assert "`vllm-console init`" in err

    assert main(["init"]) == 0
    assert str(path) in capsys.readouterr().out
    assert load_hosts_file(path, required=True).hosts == {}  # valid, and opens nothing
    assert main([]) == 2
    assert f"the hosts file {path} has no hosts" in capsys.readouterr().err

    written = path.read_text()
    path.write_text(written + '[hosts.mine]\nssh = "me@gpu"\n')
    assert main(["init"]) == 2
    assert f"{path} exists; not overwriting it" in capsys.readouterr().err
    assert path.read_text().endswith('[hosts.mine]\nssh = "me@gpu"\n')


def test_the_init_template_documents_every_key_of_a_host_entry(tmp_path: Path) -> None:
    """Uncommented, the template is a full host entry: every key it shows is a real one."""
    path = tmp_path / "hosts.toml"
    assert main(["init", "--config", str(path)]) == 0
    body = "\n".join(re.sub(r"^# (?=\[|\w+ = )", "", line)
                     for line in path.read_text().splitlines())
    data = load_hosts_file_text(body, tmp_path)
    entries = data["hosts"]
    assert set(HostEntry.model_fields) == {*entries["gpu1"], *entries["gpu3"]}
    assert {name for name, *_ in overrides()} == {
        *entries["gpu1"]["serve"], *entries["gpu1"]["gpu"], *entries["gpu1"]["checks"]}
    assert set(data["fleet"]) == set(FleetSettings.model_fields)


def load_hosts_file_text(body: str, tmp_path: Path) -> dict[str, Any]:
    full = tmp_path / "full.toml"
    full.write_text(body)
    load_hosts_file(full, required=True)  # valid against the model, not only TOML
    return tomllib.loads(body)


def test_a_fleet_opens_with_one_hosts_missing_identity_file_and_that_host_says_why(
        tmp_path: Path) -> None:
    """`vllm-console` with two hosts, one whose key is not on this laptop: the fleet still
    builds (the other host is usable); the host itself is refused at connect, naming the file."""
    import asyncio

    from vllm_console.console.transport.host import ConnectionState, HostError
    from vllm_console.console.transport.ssh_host import SSHHost

    missing = tmp_path / "id_gone"
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.a]\nssh = "u@127.0.0.1:1"\nidentity = "{missing}"\n'
                     '[hosts.b]\nssh = "u@127.0.0.1:1"\n')
    args = build_parser().parse_args(["tui", "--config", str(hosts)])
    configs = [host_config_from_args(args, name) for name in ("a", "b")]
    assert configs[0].identity == str(missing)

    async def connect() -> str:
        host = SSHHost(configs[0])
        states: list[ConnectionState] = []
        host.add_listener(lambda status: states.append(status.state))
        try:
            with pytest.raises(HostError) as refused:
                await host.connect()
            await asyncio.sleep(0.7)  # past the first backoff step: not retried
            assert ConnectionState.RECONNECTING not in states
            return str(refused.value)
        finally:
            await host.close()

    assert asyncio.run(connect()) == f"a: identity file {missing} does not exist"


@pytest.mark.programs
@pytest.mark.parametrize(("key", "said"), [
    ("not a key\n", "is not a usable private key (Invalid private key)"),
    (None, "is not a usable private key (Passphrase must be specified to import encrypted "
           "private keys): load it into ssh-agent instead (`ssh-add {path}`)"),
])
def test_an_identity_file_that_is_no_usable_key_is_named(
        key: str | None, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that is not a key, and a key behind a passphrase (the console asks for none):
    one line that names the file, exit 2; it said "KeyImportError ... please report this"."""
    import subprocess

    path = tmp_path / "id_x"
    if key is None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f",
                        str(path)], check=True)
    else:
        path.write_text(key)
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("")
    assert main(["status", "127.0.0.1:1", "--config", str(hosts), "--identity", str(path)]) == 2
    err = capsys.readouterr().err
    said = said.format(path=path)
    assert err == f"vllm-console status: 127.0.0.1:1: identity file {path} {said}\n"


def test_init_where_it_cannot_write_says_so(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = blocker / "hosts.toml"
    assert main(["init", "--config", str(target)]) == 2
    assert capsys.readouterr().err == \
        f"vllm-console init: cannot write {target}: {blocker}: File exists\n"

