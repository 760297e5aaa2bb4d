"""The whole chain through a real OpenSSH sshd on loopback, against every simulated scenario.

Each scenario's tree lives under /tmp, owned by the login user, and its fake `vllm serve` runs
as that user (as on a real host: the console only ever sees its own user's processes). The
scenario's own oracle (`Scenario.expected`) says what each link must conclude. Traced runs use
the restart's real trace hook as `sitecustomize`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.sshd import Sshd, chown_to
from vllm_console.checks import Status, run_chain
from vllm_console.checks.models import LINK_IDS, ChainReport
from vllm_console.console.hostclient.launch_env import launch_env
from vllm_console.console.hostside.restart.hook_files import hook_files
from vllm_console.console.settings import ServeSettings
from vllm_console.console.sim.runner import stop, wait_ready
from vllm_console.console.sim.scenarios import SCENARIOS
from vllm_console.console.sim.tree import SimTree, materialise
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh

WATCH = ["vllm.model_executor.models.qwen3_dflash:_get_dflash_layer_types",
         "vllm.model_executor.models.qwen3_dflash:_resolve_layer_attention"]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Running:
    """A simulated host tree and its server process (None once it has exited)."""

    tree: SimTree
    proc: subprocess.Popen[bytes]
    ready: bool


def _start(tree: SimTree, user: str, env: dict[str, str] | None = None) -> Running:
    """Launch the tree's `vllm serve` as `user`, output to the tree's log, like an operator."""
    home = os.path.expanduser(f"~{user}")
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
    base.update(tree.serve_env())
    base.update(env or {})
    tree.log.parent.mkdir(parents=True, exist_ok=True)
    tree.log.touch()
    chown_to(tree.log.parent, user)
    # Uid *and* gids of the user: a process left in root's group is not the user's to inspect.
    gid = pwd.getpwnam(user).pw_gid
    kwargs = {"user": user, "group": gid, "extra_groups": []} if os.geteuid() == 0 else {}
    with open(tree.log, "ab") as log:
        proc = subprocess.Popen(tree.serve_argv(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tree.root, env=base,
                                start_new_session=True, **kwargs)  # type: ignore[call-overload]
    return Running(tree, proc, False)


def _ports(n: int) -> list[int]:
    """n distinct free ports (all held open while choosing, so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@pytest.fixture(scope="module")
def sims(sshd: Sshd) -> Iterator[dict[str, Running]]:
    """Every scenario materialised and started (in parallel), plus two traced runs."""
    base = sshd.user_dir("sims")
    running: dict[str, Running] = {}
    traced = {f"{name}-traced": name for name in ("healthy", "incident")}
    names = {**{name: name for name in SCENARIOS}, **traced}
    ports = iter(_ports(3 * len(names)))

    def launch(key: str) -> Running:
        tree = materialise(names[key], base / key, port=next(ports), startup_s=0.3,
                           metrics_interval_s=0.5)
        env = None
        if key in traced:
            hook = tree.root / "hook"
            hook.mkdir(exist_ok=True)
            for name, data in hook_files().items():
                (hook / name).write_bytes(data)
            env = launch_env({}, hook_dir=str(hook), watch=WATCH)
        chown_to(tree.root, sshd.user)
        return _start(tree, sshd.user, env)

    try:
        for key in names:
            running[key] = launch(key)
        for key in names:
            for attempt in range(3):  # a port taken meanwhile: start again on another
                item = running[key]
                item.ready = wait_ready(item.tree, item.proc, timeout=30)
                if item.ready or item.tree.spec.expected.acceptance is None or attempt == 2:
                    break
                stop(item.proc, timeout=3)
                running[key] = launch(key)
        yield running
    finally:
        for item in running.values():
            stop(item.proc, timeout=3)
        shutil.rmtree(base, ignore_errors=True)


def _settings(item: Running, **configured: str) -> ServeSettings:
    # The tree's root in `match` keeps each test on its own server (and off a colleague's).
    return ServeSettings(match=f"{item.tree.root}/ vllm serve", **configured)


async def _chain(sshd: Sshd, settings: ServeSettings) -> ChainReport:
    if sshd.proc is None:
        sshd.start()
    host = SSHHost(sshd.host_config(name="gpu1"))
    try:
        return await run_chain(host, settings, host_label="gpu1")
    finally:
        await host.close()


def _statuses(report: ChainReport) -> dict[str, str]:
    return {link.id: link.status.value for link in report.links}


def _plugin_status(links: dict[str, str]) -> int:
    """docs/design.md's exit status for these verdicts: 0 OK, 1 WARNING, 2 CRITICAL."""
    if "fail" in links.values():
        return 2
    return 0 if set(links.values()) == {"pass"} else 1


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_every_scenario_gets_its_verdict(sshd: Sshd, sims: dict[str, Running],
                                               name: str) -> None:
    item = sims[name]
    expected = item.tree.spec.expected
    configured: dict[str, str] = {}
    if expected.acceptance is None:  # the server does not come up: nothing to discover
        assert not item.ready
        tree = item.tree
        configured = {"python": str(tree.python), "log": str(tree.log),
                      "target": str(tree.target), "draft": str(tree.draft)}
    else:
        assert item.ready, f"{name}: the simulated server did not come up"
    report = await _chain(sshd, _settings(item, **configured))
    assert _statuses(report) == expected.links, {k.id: k.summary for k in report.links}
    assert report.broken_link == expected.broken_link
    assert report.root_cause == expected.root_cause
    assert report.exit_code == _plugin_status(expected.links)
    for link in report.links:
        assert link.summary
        assert link.evidence, link.id
        assert link.status is Status.PASS or link.hint, link.id
    discovery = report.link("code-present").evidence[0].excerpt
    if configured:
        assert "no process matching" in discovery
        assert "using the configured settings" in discovery
    else:
        assert "python: " + str(item.tree.python) in discovery
        assert "discovered (pid" in discovery


async def test_incident_evidence_names_the_wrong_fields_and_offers_a_trace(
        sshd: Sshd, sims: dict[str, Running]) -> None:
    report = await _chain(sshd, _settings(sims["incident"]))
    config = report.link("config-correct")
    assert "mask_token_id 248064" in config.summary
    assert "z-lab/Qwen3.6-27B-DFlash" in config.summary
    runtime = report.link("runtime-activation")
    assert "vllm-console restart gpu1 --trace" in runtime.hint
    assert "aux layers (2, 18, 34, 50, 64) = target_layer_ids + 1" in runtime.summary
    assert "names no sliding layers" in runtime.summary
    code = report.link("code-present")
    assert "commit 3cfc8f8b7d1e" in code.summary
    probe = code.evidence[1]
    assert probe.probe == "code-probe"
    assert probe.exit == 0
    assert "probe-code" in probe.command
    assert "RECORD:" in probe.excerpt
    log_scan = runtime.evidence[1]
    assert "Initializing a V1 LLM engine" in log_scan.excerpt


async def test_traced_runs_turn_unknown_into_pass_or_fail(sshd: Sshd,
                                                          sims: dict[str, Running]) -> None:
    healthy = await _chain(sshd, _settings(sims["healthy-traced"]))
    runtime = healthy.link("runtime-activation")
    assert runtime.status is Status.PASS, runtime.summary
    assert "layers [0, 1, 2, 3] as sliding (window 2048)" in runtime.summary
    assert healthy.broken_link is None
    assert healthy.root_cause is None
    assert healthy.exit_code == 0
    incident = await _chain(sshd, _settings(sims["incident-traced"]))
    runtime = incident.link("runtime-activation")
    assert runtime.status is Status.FAIL
    assert "every drafter layer as full attention" in runtime.summary
    assert incident.broken_link == "runtime-activation"
    assert incident.root_cause == "config-correct"


async def test_bad_inputs_are_error_links_naming_the_file(sshd: Sshd,
                                                          sims: dict[str, Running]) -> None:
    item = sims["healthy"]
    empty = sshd.user_dir("nodraftcfg")
    bad = sshd.user_dir("badjson")
    (bad / "config.json").write_text('{"dflash_config": {"mask_token_id": 248070,}')
    chown_to(bad, sshd.user)
    report = await _chain(sshd, _settings(item, draft=str(empty)))
    config = report.link("config-correct")
    assert config.status is Status.ERROR
    assert f"draft directory {empty} has no config.json" in config.summary
    assert report.link("fields-extracted").status is Status.ERROR
    report = await _chain(sshd, _settings(item, draft=str(bad),
                                          log=str(item.tree.root / "rotated.log")))
    config = report.link("config-correct")
    assert config.status is Status.ERROR
    assert "is not valid JSON: line 1 column" in config.summary
    runtime = report.link("runtime-activation")
    assert runtime.status is Status.ERROR
    assert "rotated away or deleted" in runtime.summary
    assert "--log" in runtime.hint
    report = await _chain(sshd, _settings(item, python="/nonexistent/bin/python"))
    code = report.link("code-present")
    assert code.status is Status.ERROR
    assert "/nonexistent/bin/python" in code.summary
    assert report.exit_code == 1


async def test_a_log_rotated_away_is_read_through_the_running_process(
        sshd: Sshd, sims: dict[str, Running]) -> None:
    item = sims["offset-bug"]
    rotated = item.tree.log.with_suffix(".log.1")
    os.rename(item.tree.log, rotated)
    try:
        os.unlink(rotated)  # deleted: only /proc/PID/fd/1 still reaches the current run
        report = await _chain(sshd, _settings(item))
        runtime = report.link("runtime-activation")
        assert runtime.status is Status.FAIL, runtime.summary
        assert "the #40727 offset (+1) did not run" in runtime.summary
        assert "rotated away" in runtime.evidence[1].excerpt
    finally:
        Path(item.tree.log).touch()


# -- the command line through sshd ---------------------------------------------------------------

def _cli(sshd: Sshd, item: Running, *extra: str) -> list[str]:
    return ["check", f"{sshd.user}@127.0.0.1:{sshd.port}", "--identity", str(sshd.client_key),
            "--known-hosts", str(sshd.known_hosts), "--match",
            f"{item.tree.root}/ vllm serve", *extra]


def test_check_json_is_the_documented_object(sshd: Sshd, sims: dict[str, Running],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_console.console.cli.parser import main

    if sshd.proc is None:
        sshd.start()
    assert main(_cli(sshd, sims["incident"], "--json")) == 2  # CRITICAL: config-correct failed
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["host", "profile", "links", "broken_link", "root_cause"]
    assert out["profile"] == "dflash-swa"
    assert [link["id"] for link in out["links"]] == list(LINK_IDS)
    for link in out["links"]:
        assert list(link) == ["id", "title", "status", "summary", "hint", "evidence"]
        for evidence in link["evidence"]:
            assert list(evidence) == ["probe", "command", "exit", "excerpt"]
    assert out["broken_link"] == "runtime-activation"
    assert out["root_cause"] == "config-correct"
    assert main(_cli(sshd, sims["healthy-traced"], "--json")) == 0
    assert json.loads(capsys.readouterr().out)["broken_link"] is None


def test_check_human_output_and_an_explicit_reference(
        sshd: Sshd, sims: dict[str, Running], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_console.console.cli.parser import main

    if sshd.proc is None:
        sshd.start()
    assert main(_cli(sshd, sims["incident"])) == 2
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["PASS", "code-present"]
    assert lines[3].split()[:2] == ["UNKNOWN", "runtime-activation"]
    assert lines[4].split()[:2] == ["FAIL", "config-correct"]
    assert "broken link: runtime-activation    root cause: config-correct" in out
    assert "hints:" in out
    assert "\x1b[" not in out  # no colour off a terminal
    # The incident's own config as the reference: it matches itself field by field, and with
    # no sliding layer in either, DFlash without SWA judges (the aux-layer line proves it).
    reference = tmp_path / "reference.json"
    reference.write_bytes((sims["incident"].tree.draft / "config.json").read_bytes())
    assert main(_cli(sshd, sims["incident"], "--reference", str(reference))) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(": dflash chain")
    assert "every link passed" in out
    assert "matches reference.json" in out
    # Forced to the SWA profile, the same run has no SWA evidence: unknown, exit 1.
    assert main(_cli(sshd, sims["incident"], "--reference", str(reference),
                     "--profile", "dflash-swa")) == 1
    out = capsys.readouterr().out
    assert "root cause: none proven" in out


def test_could_not_run_is_exit_3_with_one_line(sshd: Sshd, sims: dict[str, Running],
                                               tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_console.console.cli.parser import main

    item = sims["healthy"]
    assert main(_cli(sshd, item, "--profile", "no-such-profile")) == 3
    assert "no profile named 'no-such-profile'" in capsys.readouterr().err
    assert main(_cli(sshd, item, "--reference", str(tmp_path / "none.json"))) == 3
    assert "reference" in capsys.readouterr().err
    bad_profile = tmp_path / "p.toml"
    bad_profile.write_text('name = "x"\nbogus = 1\n')
    assert main(_cli(sshd, item, "--profile", str(bad_profile))) == 3
    assert "unknown key 'bogus'" in capsys.readouterr().err
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("[hosts.gpu1]\nssh = 'x'\nsurprise = 1\n")
    assert main(["check", "gpu1", "--config", str(hosts)]) == 3
    assert "unknown key" in capsys.readouterr().err
    closed = _port()
    assert main(["check", f"127.0.0.1:{closed}", "--known-hosts", str(sshd.known_hosts)]) == 3
    err = capsys.readouterr().err
    assert "cannot connect" in err
    assert "Traceback" not in err
    empty_known = tmp_path / "known_hosts"
    empty_known.write_text("")
    assert main(["check", f"{sshd.user}@127.0.0.1:{sshd.port}", "--identity",
                 str(sshd.client_key), "--known-hosts", str(empty_known)]) == 3
    assert "unknown host key" in capsys.readouterr().err


def _run_check(*argv: str) -> subprocess.CompletedProcess[str]:
    """`vllm-console check ...` as a monitoring system runs it: a process, its exit status."""
    return subprocess.run([sys.executable, "-m", "vllm_console", *argv], capture_output=True,
                          text=True, timeout=120, check=False)


def test_check_exit_status_is_the_monitoring_plugin_convention(
        sshd: Sshd, sims: dict[str, Running], tmp_path: Path) -> None:
    """0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (docs/design.md), each as a separate process."""
    if sshd.proc is None:
        sshd.start()
    verdicts = {}
    for key, code in (("healthy-traced", 0), ("healthy", 1), ("incident", 2)):
        result = _run_check(*_cli(sshd, sims[key], "--json"))
        links = {link["id"]: link["status"] for link in json.loads(result.stdout)["links"]}
        verdicts[key] = (result.returncode, links)
        assert result.returncode == code, (key, links, result.stderr)
    assert set(verdicts["healthy-traced"][1].values()) == {"pass"}
    assert "fail" not in verdicts["healthy"][1].values()
    assert verdicts["healthy"][1]["runtime-activation"] == "unknown"
    assert verdicts["incident"][1]["config-correct"] == "fail"
    assert _run_check(*_cli(sshd, sims["incident"])).returncode == 2  # the human form too

    hosts = tmp_path / "hosts.toml"
    hosts.write_text("[hosts.gpu1]\nssh = 'x'\nsurprise = 1\n")
    could_not_run = {
        "unreachable host": ["check", f"127.0.0.1:{_port()}", "--known-hosts",
                             str(sshd.known_hosts)],
        "no HOST": ["check", "--json"],
        "unknown option": [*_cli(sshd, sims["healthy"]), "--no-such-option"],
        "bad hosts file": ["check", "gpu1", "--config", str(hosts)],
        "unknown profile": _cli(sshd, sims["healthy"], "--profile", "no-such-profile"),
    }
    for what, argv in could_not_run.items():
        result = _run_check(*argv)
        assert result.returncode == 3, (what, result.stderr)
        assert result.stdout == "", what
        assert "Traceback" not in result.stderr, what
        assert result.stderr.strip(), what


# -- a host that drops mid-check -----------------------------------------------------------------

class _Proxy:
    """A TCP proxy to sshd that can cut every connection and stop listening (a dead link)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in self.writers:
            writer.transport.abort()


async def test_a_host_that_drops_mid_check_gives_error_links(
        sshd: Sshd, sims: dict[str, Running], tmp_path: Path) -> None:
    if sshd.proc is None:
        sshd.start()
    proxy = _Proxy(sshd.port)
    port = await proxy.start()
    known = tmp_path / "known_hosts"
    key_type, key_b64 = sshd.host_key_pub.split()[:2]
    known.write_text(f"[127.0.0.1]:{port} {key_type} {key_b64}\n")

    class Dropping(SSHHost):
        async def run(self, argv: Any, **kwargs: Any) -> Any:
            if "probe-code" in str(argv):
                proxy.cut()  # the link dies as the probes start
            return await super().run(argv, **kwargs)

    host = Dropping(sshd.host_config(name="gpu1", port=port, known_hosts=str(known)),
                    connect_timeout=2)
    try:
        report = await asyncio.wait_for(
            run_chain(host, _settings(sims["healthy"]), host_label="gpu1"), 60)
    finally:
        proxy.cut()
        await host.close()
    code = report.link("code-present")
    assert code.status is Status.ERROR
    assert "gpu1" in code.summary
    assert report.exit_code == 1
    assert report.root_cause is None
    assert "the link to gpu1 failed during the check" in code.hint
    assert "did not run on gpu1" in code.summary
    assert all(link.status is not Status.PASS for link in report.links
               if link.id in ("code-present", "fields-extracted", "runtime-activation"))
