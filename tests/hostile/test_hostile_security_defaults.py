"""The security defaults, each checked against a real sshd (docs/reliability.md lists them):
strict host keys in every front end (unknown refused with the fingerprint, changed always
refused, never retried on a timer), no agent forwarding, no password anywhere, `--readonly`,
private exports and backups whatever the umask, helper files in a private per-user directory
on the host, and nothing left running on the host after a session except a restarted server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.fault_support import Recorder
from tests.sshd import Sshd, chown_to, free_port, keygen, start_sshd
from vllm_console.console.cli.commands.demo import demo_config
from vllm_console.console.cli.parser import main
from vllm_console.console.parsers.redact import is_secret_key
from vllm_console.console.session.host_session import ActionError, HostSession
from vllm_console.console.settings import HostConfig, HostEntry
from vllm_console.console.sim import materialise, start_background, stop, wait_ready
from vllm_console.console.telemetry import HostTelemetry, TelemetryOptions
from vllm_console.console.transport.host import ConnectionState
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh


def fingerprint(sshd: Sshd) -> str:
    return subprocess.run(["ssh-keygen", "-lf", str(sshd.directory / "host_ed25519.pub")],
                          capture_output=True, text=True, check=True).stdout.split()[1]


def cli_args(sshd: Sshd, known: Path, *extra: str) -> list[str]:
    return ["status", f"{sshd.user}@127.0.0.1:{sshd.port}", "--identity", str(sshd.client_key),
            "--known-hosts", str(known), *extra]


def test_cli_refuses_an_unknown_key_with_its_fingerprint_and_a_changed_one_always(
        sshd_up: Sshd, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unknown = tmp_path / "empty_known_hosts"
    unknown.write_text("")
    assert main(cli_args(sshd_up, unknown)) == 2
    err = capsys.readouterr().err
    assert fingerprint(sshd_up) in err
    assert "--accept-new" in err
    assert unknown.read_text() == ""  # nothing recorded without --accept-new

    other = keygen(tmp_path / "other").split()
    changed = tmp_path / "changed_known_hosts"
    changed.write_text(f"[127.0.0.1]:{sshd_up.port} {other[0]} {other[1]}\n")
    for extra in ((), ("--accept-new",)):
        assert main(cli_args(sshd_up, changed, *extra)) == 2
        err = capsys.readouterr().err
        assert "HOST KEY CHANGED" in err
        assert fingerprint(sshd_up) in err
    assert changed.read_text().count("\n") == 1  # never rewritten

    recorded = tmp_path / "ssh" / "known_hosts"
    assert main(cli_args(sshd_up, recorded, "--accept-new", "--json")) == 0
    capsys.readouterr()
    assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
    assert stat.S_IMODE(recorded.parent.stat().st_mode) == 0o700
    assert main(cli_args(sshd_up, recorded, "--json")) == 0  # strict from now on


async def test_a_refused_key_is_shown_and_not_retried_on_a_timer(sshd_up: Sshd,
                                                                 tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    config = sshd_up.host_config(known_hosts=str(known))
    host = SSHHost(config)
    telemetry = HostTelemetry(host, config, TelemetryOptions(gpu_source="none"))
    rec = Recorder()
    task = asyncio.create_task(telemetry.run(rec))
    try:
        await rec.until(lambda e: telemetry.snapshot.link.state is ConnectionState.REFUSED, 10)
        assert fingerprint(sshd_up) in telemetry.snapshot.link.detail
        await asyncio.sleep(2.0)  # past two backoff steps
        states = [e.link.state for _, e in rec.events if hasattr(e, "link")]
        assert ConnectionState.RECONNECTING not in states
        assert ConnectionState.CONNECTED not in states
    finally:
        telemetry.stop()
        await task
        await host.close()


async def test_no_agent_forwarding(sshd_up: Sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    # A socket's path holds at most 107 bytes: a short directory, not pytest's (which may be
    # deep; a run under a long --basetemp failed here).
    sock_dir = Path(tempfile.mkdtemp(prefix="vc-agent-", dir="/tmp"))
    sock = str(sock_dir / "agent.sock")
    agent = subprocess.run(["ssh-agent", "-s", "-a", sock],
                           capture_output=True, text=True, check=True).stdout
    pid = int(agent.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        subprocess.run(["ssh-add", str(sshd_up.client_key)], check=True, capture_output=True,
                       env={**os.environ, "SSH_AUTH_SOCK": sock})
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        host = SSHHost(sshd_up.host_config())
        try:
            result = await host.run('echo "agent=${SSH_AUTH_SOCK:-none}"')
            assert result.text.strip() == "agent=none"
        finally:
            await host.close()
    finally:
        os.kill(pid, 15)
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_no_password_can_be_configured_or_is_ever_held() -> None:
    for model in (HostEntry, HostConfig):
        secret_fields = [name for name in model.model_fields if is_secret_key(name)]
        assert secret_fields == [], f"{model.__name__} holds {secret_fields}"
    # The connection options carry no password and no agent forwarding.
    import inspect

    source = inspect.getsource(SSHHost._open)
    assert '"agent_forwarding": False' in source
    assert "password" not in source


def test_readonly_refuses_restart_and_writes(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    tree = materialise("incident", tmp_path / "host", port=free_port(), startup_s=0.3,
                       metrics_interval_s=0.5)
    proc = start_background(tree)
    try:
        assert wait_ready(tree, proc, 20)
        draft_before = (tree.draft / "config.json").read_bytes()
        code = main(["restart", "demo", "--local", "--readonly", "--yes", "--match",
                     f"{tree.root}/venv serve"])
        assert code == 2
        assert "--readonly" in capsys.readouterr().err
        assert proc.poll() is None, "the server was touched"

        session = HostSession(demo_config(tree, readonly=True), LocalHost("demo"))

        @contextlib.contextmanager
        def caller() -> Iterator[None]:  # a caller's own `with` around the action
            yield

        async def actions() -> None:
            # The refusal crosses a caller's context manager as itself (a frozen exception
            # turned into FrozenInstanceError when contextlib set its traceback).
            with pytest.raises(ActionError, match="read-only"), caller():
                await session.plan_restart()
            with pytest.raises(ActionError, match="read-only"):
                await session.apply_reference()
            await session.close()

        asyncio.run(actions())
        assert (tree.draft / "config.json").read_bytes() == draft_before
        assert proc.poll() is None
    finally:
        stop(tree, timeout=5)


def test_exports_are_private_whatever_the_umask(tmp_path: Path) -> None:
    config = HostConfig(name="h", local=True)
    session = HostSession(config, LocalHost("h"))
    old = os.umask(0)
    try:
        path = session.export(tmp_path / "exports", ["line"])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    json.loads(path.read_text())


def remote_processes(user: str, port: int) -> dict[int, str]:
    """The user's live processes that came in through the sshd on `port` (sshd puts the server
    port in every session's SSH_CONNECTION, and children inherit it), pid to command line. One
    that ends (or turns zombie) while it is read is not running: it is left out."""
    found = {}
    for proc in psutil.process_iter(["username", "environ"]):
        try:
            if proc.info["username"] != user:
                continue
            conn = (proc.info["environ"] or {}).get("SSH_CONNECTION", "")
            if conn.endswith(f" {port}") and proc.status() != psutil.STATUS_ZOMBIE:
                found[proc.pid] = " ".join(proc.cmdline())[:120]
        except (psutil.Error, OSError):
            continue
    return found


async def test_a_session_leaves_only_the_restarted_server_and_private_helpers(
        sshd_up: Sshd) -> None:
    """A private sshd (its port tells its sessions' processes apart from any other): a
    session runs telemetry, checks, the draft diff and a restart, then closes."""
    began = time.time() - 1
    private = start_sshd()
    base = private.user_dir("leftovers")
    tree = materialise("incident", base / "incident", port=free_port(), startup_s=0.3,
                       metrics_interval_s=0.5)
    chown_to(base, private.user)
    config = private.host_config(serve={"match": f"serve {tree.root}/"},
                                 gpu={"nvidia_smi": str(tree.nvidia_smi)})
    try:
        launcher = SSHHost(config)
        await launcher.start_detached(tree.serve_argv(), log=str(tree.log), cwd=str(tree.root))
        await launcher.close()
        assert await asyncio.to_thread(wait_ready, tree, None, 20)

        session = HostSession(config, SSHHost(config, keepalive_interval=1.0))
        task = asyncio.create_task(session.run(lambda e: None))
        try:
            for _ in range(100):
                if session.snapshot.serve.pid and session.snapshot.sample is not None:
                    break
                await asyncio.sleep(0.1)
            await session.run_checks()
            await session.load_diff()
            plan = await session.plan_restart()
            result = await session.restart(plan)
            assert result.ok, result.reason
        finally:
            session.telemetry.stop()
            await task
            await session.close()

        cache = private.home / ".cache" / "vllm-console"
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700
        assert cache.owner() == private.user
        # What this session put there (the private sshd's user shares the cache with the
        # other tests: only files written since this test began count).
        for helper in cache.rglob("*"):  # the bundles and their compiled copies
            if helper.stat().st_mtime >= began:
                assert stat.S_IMODE(helper.stat().st_mode) & 0o077 == 0, helper

        server = psutil.Process(result.new_pid)
        serve_tree = {server.pid, *(c.pid for c in server.children(recursive=True))}
        for _ in range(50):
            left = {pid: cmd for pid, cmd in remote_processes(private.user, private.port).items()
                    if pid not in serve_tree}
            if not left:
                break
            await asyncio.sleep(0.1)
        assert left == {}, f"left running on the host: {left}"
        assert server.pid in remote_processes(private.user, private.port)
    finally:
        stop(tree, timeout=5)
        private.kill()
        shutil.rmtree(private.directory, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
