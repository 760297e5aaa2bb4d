"""No shell injection anywhere: configuration values, command-line overrides, file and directory
names, and the argv of a running serve process that carry quotes, spaces, `;`, `$()`, backticks
and newlines stay data all the way to the host, through a real OpenSSH sshd.

Each hostile string, run by a shell, would create a marker file (`cd; touch vc-pwned-...`: in
the login user's home, the one place every shell can write). After every flow (check, status,
restart, the TUI's session actions) no marker may exist anywhere under /tmp, /home or here.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.sshd import Sshd, chown_to, free_port
from vllm_console.console.cli.parser import main
from vllm_console.console.session.host_session import ActionError, HostSession
from vllm_console.console.sim import SimTree, materialise, stop, wait_ready
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh

TOKEN = f"vcpw{uuid.uuid4().hex[:6]}"


def nasty(tag: str, *, slash: bool = True) -> str:
    """A string that creates markers when a shell evaluates it, whether it is pasted bare,
    inside '...' or inside "..." (quotes balanced, so a naive interpolation runs rather than
    failing on a syntax error). No `/` when it must be one path component (< 256 bytes)."""
    m = f"{TOKEN}{tag}"
    home = f" touch ~/{m}hm;" if slash else ""
    return (f"x';cd;touch {m}sq;'\" ;cd;touch {m}dq;\" $(cd;touch {m}sb) `cd;touch {m}bq` "
            f";cd;touch {m}ba;{home} \\ $HOME ${{IFS}} * ?\ncd;touch {m}nl\n")


def markers(sshd: Sshd) -> list[str]:
    found = subprocess.run(["find", "/tmp", "/home", str(sshd.home), str(Path.cwd()), "-xdev",
                            "-maxdepth", "6", "-name", f"{TOKEN}*"], capture_output=True,
                           text=True).stdout.split("\n")
    found += [str(p) for p in Path.home().glob(f"{TOKEN}*")]
    return sorted({f for f in found if f})


def toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def hosts_file(path: Path, sshd: Sshd, name: str, serve: dict[str, str],
               extra: str = "") -> Path:
    lines = [f"[hosts.{name}]", f"ssh = {toml_str(f'{sshd.user}@127.0.0.1:{sshd.port}')}",
             f"identity = {toml_str(str(sshd.client_key))}",
             f"known_hosts = {toml_str(str(sshd.known_hosts))}", f"[hosts.{name}.serve]"]
    lines += [f"{k} = {toml_str(v)}" for k, v in serve.items()]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


@pytest.fixture(scope="module")
def clean(sshd: Sshd) -> Iterator[Sshd]:
    if sshd.proc is None:
        sshd.start()
    yield sshd
    assert markers(sshd) == [], "a hostile string was run by a shell"


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def test_hostile_hosts_file_values(clean: Sshd, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    serve = {key: nasty(key) for key in ("python", "log", "target", "draft", "match", "url")}
    extra = (f"[hosts.evil.gpu]\nnvidia_smi = {toml_str(nasty('smi'))}\n"
             f"[hosts.evil.checks]\nreference = {toml_str(nasty('ref'))}\n")
    config = str(hosts_file(tmp_path / "hosts.toml", clean, "evil", serve, extra))
    # A URL that is none and a reference file that does not exist are refused before anything
    # connects (one rule for every command), in one line that names the key.
    for command, code_expected in (("status", 2), ("check", 3)):
        code, _, err = cli([command, "evil", "--config", config], capsys)
        assert code == code_expected, err
        assert err.count("\n") == 1
        assert "hosts.evil." in err
    # Without them every other hostile value travels to the host as data.
    del serve["url"]
    config = str(hosts_file(tmp_path / "hosts2.toml", clean, "evil", serve,
                            f"[hosts.evil.gpu]\nnvidia_smi = {toml_str(nasty('smi'))}\n"))
    code, out, err = cli(["status", "evil", "--config", config, "--json"], capsys)
    assert code == 0, err
    status = json.loads(out)
    assert status["serve"]["running"] is False
    code, out, err = cli(["check", "evil", "--config", config, "--json"], capsys)
    assert code == 1, err
    report = json.loads(out)
    assert [link["status"] for link in report["links"]] != ["pass"] * 4
    code, _, err = cli(["restart", "evil", "--config", config, "--yes"], capsys)
    assert code == 2, err
    assert markers(clean) == []


def test_hostile_command_line_overrides(clean: Sshd, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    dest = f"{clean.user}@127.0.0.1:{clean.port}"
    common = ["--identity", str(clean.client_key), "--known-hosts", str(clean.known_hosts)]
    overrides: list[str] = []
    for option in ("python", "log", "target", "draft", "match", "nvidia-smi"):
        overrides += [f"--{option}", nasty(option)]
    # A --url that is none is refused by every command before anything connects.
    for command in ("status", "check"):
        code, _, err = cli([command, dest, *common, *overrides, "--url", nasty("url")], capsys)
        assert code in (2, 3), err
        assert err.count("\n") == 1
    code, out, err = cli(["status", dest, *common, *overrides, "--json"], capsys)
    assert code == 0, err
    code, out, err = cli(["check", dest, *common, *overrides, "--json"], capsys)
    assert code == 1, err
    code, _, err = cli(["check", dest, *common, *overrides, "--profile", nasty("profile"),
                        "--reference", nasty("ref")], capsys)
    assert code == 3
    assert err.count("\n") == 1
    assert markers(clean) == []


@pytest.fixture
def hostile_server(clean: Sshd) -> Iterator[tuple[SimTree, int]]:
    """The simulated server in a directory whose name is hostile, launched (as the login user,
    over SSH) with a hostile argument and a hostile log file name."""
    base = clean.user_dir("inject")
    tree = materialise("incident", base / nasty("d", slash=False), port=free_port(),
                       startup_s=0.3, metrics_interval_s=0.5)
    log = tree.log.parent / nasty("l", slash=False)
    chown_to(base, clean.user)
    argv = [*tree.serve_argv(), "--served-model-name", nasty("argv")]

    async def launch() -> int:
        host = SSHHost(clean.host_config())
        try:
            return await host.start_detached(argv, log=str(log), cwd=str(tree.root))
        finally:
            await host.close()

    pid = asyncio.run(launch())
    try:
        assert wait_ready(tree, None, 20), "the hostile server did not come up"
        assert psutil.Process(pid).cmdline() == argv
        yield tree, pid
    finally:
        stop(tree, timeout=3)
        for proc in psutil.process_iter(["cmdline"]):
            if str(tree.root) in " ".join(proc.info["cmdline"] or []):
                proc.kill()
        shutil.rmtree(base, ignore_errors=True)


def test_discovery_status_check_and_restart_of_a_hostile_serve_process(
        clean: Sshd, hostile_server: tuple[SimTree, int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    tree, pid = hostile_server
    argv = psutil.Process(pid).cmdline()
    cwd = psutil.Process(pid).cwd()
    config = str(hosts_file(tmp_path / "hosts.toml", clean, "nasty",
                            {"match": f"serve {tree.root.parent}/"},
                            f"[hosts.nasty.gpu]\nnvidia_smi = {toml_str(str(tree.nvidia_smi))}\n"))
    code, out, err = cli(["status", "nasty", "--config", config, "--json"], capsys)
    assert code == 0, err
    status = json.loads(out)
    assert status["serve"]["pid"] == pid
    assert shlex.split(status["serve"]["cmdline"]) == argv  # shown exactly, as data
    code, out, err = cli(["check", "nasty", "--config", config, "--json"], capsys)
    assert code == 2, err  # CRITICAL: the incident's config fails config-correct
    links = {link["id"]: link["status"] for link in json.loads(out)["links"]}
    assert links["code-present"] == "pass"  # probes ran with the hostile interpreter path
    assert links["config-correct"] == "fail"  # the incident's draft config, read from there
    code, out, err = cli(["restart", "nasty", "--config", config, "--yes"], capsys)
    assert code == 0, err + out
    new = [p for p in psutil.process_iter(["pid", "cmdline"])
           if p.info["cmdline"] == argv and p.info["pid"] != pid]
    assert len(new) == 1, "the relaunch is not the same argv"
    assert new[0].cwd() == cwd
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert markers(clean) == []


async def test_session_actions_on_a_hostile_serve_process(
        clean: Sshd, hostile_server: tuple[SimTree, int], tmp_path: Path) -> None:
    """What the TUI's keys do (checks, draft diff, apply reference, export), headless."""
    tree, pid = hostile_server
    config = clean.host_config(serve={"match": f"serve {tree.root.parent}/"},
                               gpu={"nvidia_smi": str(tree.nvidia_smi)})
    session = HostSession(config, SSHHost(config))
    events: list[object] = []
    task = asyncio.create_task(session.run(events.append))
    try:
        for _ in range(100):
            if session.snapshot.serve.pid == pid and session.snapshot.serve.draft:
                break
            await asyncio.sleep(0.1)
        assert session.snapshot.serve.draft == str(tree.draft)
        report = await session.run_checks()
        assert report.root_cause == "config-correct"
        diff = await session.load_diff()
        assert diff.error == ""
        assert {r.field for r in diff.wrong} >= {"mask_token_id"}
        backup = await session.apply_reference()
        assert Path(backup).parent == tree.draft
        assert Path(backup).stat().st_mode & 0o777 == 0o600
        assert not (await session.load_diff()).wrong
        exported = session.export(tmp_path / "exports", ["a line"])
        assert exported.stat().st_mode & 0o777 == 0o600
        with pytest.raises(ActionError):
            await session.apply_reference()  # nothing left to apply
    finally:
        session.telemetry.stop()
        await task
        await session.close()
    assert os.path.exists(tree.draft / "config.json")
    assert markers(clean) == []
