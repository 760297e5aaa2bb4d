"""Input a person types by hand: a misspelt subcommand, a host nobody has, an option that
cannot work. Each is one line on stderr saying what would have been right, before anything
connects; none opens a console on a host that does not exist (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_console.console.cli.parser import main

# What each command returns when it could not run (`check`: UNKNOWN).
COULD_NOT_RUN = {"tui": 2, "status": 2, "check": 3, "restart": 2}
# A name no resolver knows ("invalid" is reserved for that: RFC 6761).
NOBODY = "nosuchhost-h40-invalid"


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no ssh_config, and a hosts file of two hosts."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "hosts.toml"
    path.write_text('[hosts.gpu1]\nssh = "u@127.0.0.1:1"\n[hosts.gpu2]\nssh = "u@127.0.0.1:1"\n')
    return path


@pytest.fixture
def consoles(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The consoles that would have opened (recorded, never run)."""
    opened: list[object] = []

    def record(app: object) -> int:
        opened.append(app)
        return 0

    monkeypatch.setattr("vllm_console.console.tui.hangup.run", record)
    return opened


@pytest.mark.parametrize("words", [["statsu"], ["statsu", "gpu1"], ["stauts", "--json", "gpu1"]])
def test_a_misspelt_subcommand_gets_did_you_mean_and_opens_no_console(
        words: list[str], hosts: Path, consoles: list[object],
        capsys: pytest.CaptureFixture[str]) -> None:
    """`vllm-console statsu` opened the console on a host called `statsu`, retrying it for
    ever; `vllm-console statsu gpu1` said "unrecognized arguments: gpu1"."""
    assert main([*words, "--config", str(hosts)]) == 2
    assert consoles == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "did you mean `status`?" in err
    assert "unrecognized arguments" not in err
    if len(words) == 1:  # the way to a host of that name keeps the hosts file named
        assert f"`vllm-console tui statsu --config {hosts}` opens a host of that name" in err


def test_a_host_named_like_a_misspelling_still_opens(
        hosts: Path, consoles: list[object], capsys: pytest.CaptureFixture[str]) -> None:
    """A host that exists is a host, however close its name is to a command."""
    hosts.write_text('[hosts.statsu]\nssh = "u@127.0.0.1:1"\n')
    assert main(["statsu", "--config", str(hosts)]) == 0
    assert len(consoles) == 1
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["tui", "status", "check", "restart"])
def test_a_host_in_no_file_that_does_not_resolve_names_the_hosts_file_and_its_hosts(
        command: str, hosts: Path, consoles: list[object],
        capsys: pytest.CaptureFixture[str]) -> None:
    """It said "cannot connect: Name or service not known" (and the console retried it)."""
    extra = ["--yes"] if command == "restart" else []
    assert main([command, NOBODY, "--config", str(hosts), *extra]) == COULD_NOT_RUN[command]
    assert consoles == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"no host {NOBODY!r} in {hosts} (known: gpu1, gpu2)" in err


def test_a_host_name_that_resolves_or_that_ssh_config_knows_is_still_a_host(
        hosts: Path, consoles: list[object], tmp_path: Path) -> None:
    """HOST may be any `[user@]host[:port]` (docs/design.md): `localhost` resolves, and a name
    that ssh_config sends somewhere (`HostName`, a `Host` pattern) is not looked up here."""
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(f"Host {NOBODY}-*\n  HostName 127.0.0.1\n")
    for host in ("localhost", f"{NOBODY}-lab", f"u@{NOBODY}"):
        assert main(["tui", host, "--config", str(hosts)]) == 0, host
    assert len(consoles) == 3


@pytest.mark.parametrize("command", ["status", "check", "restart", "tui"])
@pytest.mark.parametrize(("option", "said"), [
    (["--profile", "nosuch"], "no profile named 'nosuch'"),
    (["--url", "notaurl"], "--url 'notaurl': not an http:// or https:// URL"),
    (["--reference", "/nonexistent/ref.json"], "reference /nonexistent/ref.json: not found"),
])
def test_every_command_refuses_an_option_that_cannot_work_in_the_same_words(
        command: str, option: list[str], said: str, hosts: Path, consoles: list[object],
        capsys: pytest.CaptureFixture[str]) -> None:
    """`check --profile nosuch` refused it; `status --profile nosuch` went on without a word,
    and `--url notaurl` with a HOST was taken (the console then showed four errors)."""
    extra = ["--yes"] if command == "restart" else []
    assert main([command, "gpu1", "--config", str(hosts), *option, *extra]) == \
        COULD_NOT_RUN[command]
    assert consoles == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert said in err


@pytest.mark.parametrize("command", ["status", "check", "restart", "tui"])
def test_the_hosts_files_values_follow_the_same_rule_unless_an_option_overrides_them(
        command: str, hosts: Path, consoles: list[object],
        capsys: pytest.CaptureFixture[str]) -> None:
    """`check` refused a hosts file's unknown profile; `status` and the console took it."""
    hosts.write_text('[hosts.gpu1]\nssh = "u@127.0.0.1:1"\n[hosts.gpu1.checks]\n'
                     'profile = "nosuch"\n')
    extra = ["--yes"] if command == "restart" else []
    assert main([command, "gpu1", "--config", str(hosts), *extra]) == COULD_NOT_RUN[command]
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"hosts file {hosts}: hosts.gpu1.checks.profile: no profile named 'nosuch'" in err
    main([command, "gpu1", "--config", str(hosts), "--profile", "dflash", *extra])
    assert "profile" not in capsys.readouterr().err


def test_demo_help_lists_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_console.console.sim import SCENARIOS

    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    for name, scenario in SCENARIOS.items():
        assert name in out
        assert scenario.description.split()[0] in out


def test_init_with_a_config_says_to_open_with_that_config(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`init --config X` said to run `vllm-console NAME`, which reads the default file."""
    path = tmp_path / "my hosts.toml"
    assert main(["init", "--config", str(path)]) == 0
    assert f"`vllm-console --config '{path}' NAME`" in capsys.readouterr().out
