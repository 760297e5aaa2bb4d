"""`HostSession` on its own (no TUI), on a real simulated host on this machine: the actions the
TUI's keys and the CLI call, each with what a person would check afterwards, and every failure
an `ActionError` with one line to show."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_console.console.cli.commands.demo import demo_config, free_port
from vllm_console.console.restart import Outcome, RestartError, RestartOptions, plan_restart
from vllm_console.console.session.host_session import ActionError, HostSession
from vllm_console.console.settings import HostConfig
from vllm_console.console.sim import SimTree, materialise, start_background, stop, wait_ready
from vllm_console.console.telemetry import ServeTreeChanged, TelemetryEvent
from vllm_console.console.transport.local_host import LocalHost

FAST = RestartOptions(term_timeout_s=5, kill_timeout_s=5, free_timeout_s=10,
                      startup_timeout_s=30)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The helpers' private directory (and the last-launch records) of this test only."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def tree(tmp_path: Path, cache: Path) -> Iterator[SimTree]:
    made = materialise("incident", tmp_path / "host", port=free_port(), startup_s=0.3,
                       metrics_interval_s=0.3)
    proc = start_background(made)
    assert wait_ready(made, proc, 30)
    yield made
    stop(made, timeout=5)


def session_on(tree: SimTree, **changes: object) -> HostSession:
    config = demo_config(tree)
    return HostSession(config.model_copy(update=changes) if changes else config,
                       LocalHost("demo"), scenario="incident")


@pytest.mark.programs
async def test_checks_and_the_draft_diff_name_the_incident(tree: SimTree) -> None:
    session = session_on(tree)
    report = await session.run_checks()
    assert report.root_cause == "config-correct"
    assert session.last_report is report
    diff = await session.load_diff()
    assert {row.field for row in diff.wrong} >= {"mask_token_id", "target_layer_ids"}
    assert session.expected_acceptance().high == 6.4


@pytest.mark.programs
async def test_apply_reference_writes_a_private_backup_once(tree: SimTree) -> None:
    session = session_on(tree)
    before = (tree.draft / "config.json").read_text()
    backup = await session.apply_reference()
    assert Path(backup).read_text() == before
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    assert session.last_diff is not None
    assert not session.last_diff.wrong
    with pytest.raises(ActionError, match="already matches the reference"):
        await session.apply_reference()


@pytest.mark.programs
async def test_readonly_refuses_every_change(tree: SimTree) -> None:
    session = session_on(tree, readonly=True)
    with pytest.raises(ActionError, match=r"^read-only: restart refused \(--readonly\)$"):
        await session.plan_restart()
    with pytest.raises(ActionError, match=r"^read-only: writing the draft config refused"):
        await session.apply_reference()


@pytest.mark.programs
async def test_a_bad_profile_is_one_line(tree: SimTree) -> None:
    config = demo_config(tree)
    session = HostSession(config.model_copy(update={"checks": config.checks.model_copy(
        update={"profile": "no-such-profile"})}), LocalHost("demo"))
    with pytest.raises(ActionError) as caught:
        await session.run_checks()
    assert "no-such-profile" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.programs
async def test_export_is_private_and_redacted(tree: SimTree, tmp_path: Path) -> None:
    session = session_on(tree)
    await session.run_checks()
    out = tmp_path / "exports"
    path = session.export(out, ["INFO --api-key sk-very-secret started", "INFO plain"])
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["host"] == "demo"
    assert data["checks"]["root_cause"] == "config-correct"
    assert "sk-very-secret" not in path.read_text()
    assert data["log_window"][1] == "INFO plain"


@pytest.mark.programs
async def test_the_expected_acceptance_is_the_configured_profiles(tree: SimTree) -> None:
    """The spec pane's expected figure ignored the hosts file's `checks.profile` (it took the
    running method's) while `check` judged with the configured one (issue 25): one rule."""
    from vllm_console.console.settings import ChecksSettings

    configured = session_on(tree, checks=ChecksSettings(profile="eagle3"))
    expected = configured.expected_acceptance()
    assert expected is not None
    assert (expected.low, expected.high) == (2.0, 4.0)
    by_method = session_on(tree).expected_acceptance()
    assert by_method is not None
    assert by_method.high == 6.4


@pytest.mark.programs
async def test_two_exports_within_a_second_are_two_files(tree: SimTree, tmp_path: Path) -> None:
    """`x` twice in a second failed the second time ("File exists"): the name was stamped to
    the second and opened exclusively. Each export is its own file, nothing overwritten."""
    session = session_on(tree)
    out = tmp_path / "exports"
    paths = [session.export(out, [f"INFO line {n}"]) for n in range(3)]
    assert len(set(paths)) == 3
    assert [json.loads(p.read_text())["log_window"] for p in paths] == [
        ["INFO line 0"], ["INFO line 1"], ["INFO line 2"]]


@pytest.mark.programs
async def test_restart_edits_are_checked_and_applied(tree: SimTree) -> None:
    session = session_on(tree)
    plan = await session.plan_restart()
    assert plan.pid is not None
    with pytest.raises(ActionError, match="'NOPE' is neither NAME=value nor -NAME"):
        session.edit_plan(plan, env="NOPE")
    with pytest.raises(ActionError, match="command line: No closing quotation"):
        session.edit_plan(plan, argv="vllm serve 'open")
    with pytest.raises(ActionError, match="does not match the host entry's match"):
        session.edit_plan(plan, argv="/usr/bin/python3 -m http.server")
    edited = session.edit_plan(plan, env="VLLM_CONSOLE_X=1 -VLLM_LOGGING_COLOR",
                               argv=plan.command + " --max-num-seqs 8")
    assert edited.launch_env["VLLM_CONSOLE_X"] == "1"
    assert edited.argv[-2:] == ("--max-num-seqs", "8")
    assert edited.last_argv == plan.argv
    assert "+ env: VLLM_CONSOLE_X=1" in edited.describe()
    assert session.edit_plan(plan) == plan.model_copy(update={"env_edits": ()})


@pytest.mark.programs
async def test_after_the_server_exited_r_starts_what_the_session_saw(tree: SimTree) -> None:
    """No restart by the console ever ran: only the session's telemetry knows the launch."""
    session = session_on(tree)
    events: list[TelemetryEvent] = []
    task = asyncio.create_task(session.run(events.append))
    try:
        async with asyncio.timeout(20):
            while session.telemetry.last_process is None:
                await asyncio.sleep(0.1)
        seen = session.telemetry.last_process
        stop(tree, timeout=5)
        async with asyncio.timeout(20):
            while not any(isinstance(e, ServeTreeChanged) and e.tree.root is None
                          for e in events):
                await asyncio.sleep(0.1)
        with pytest.raises(RestartError, match="no earlier launch by the console"):
            await plan_restart(session.host, session.config)  # what `r` said before
        plan = await session.plan_restart()
        assert plan.pid is None
        assert plan.argv == seen.argv
        assert plan.cwd == str(tree.root)
        assert plan.log == str(tree.log)
        assert any(f"pid {seen.pid}" in n and "seen running by this console" in n
                   for n in plan.notes), plan.notes
        result = await session.restart(plan)
        assert result.outcome is Outcome.READY, (result.reason, result.steps)
        assert result.new_pid != seen.pid
    finally:
        await session.close()
        await task


@pytest.mark.programs
async def test_nothing_to_restart_is_one_line(tmp_path: Path, cache: Path) -> None:
    tree = materialise("incident", tmp_path / "host", port=free_port())  # never started
    session = HostSession(demo_config(tree), LocalHost("demo"))
    with pytest.raises(ActionError) as caught:
        await session.plan_restart()
    message = str(caught.value)
    assert message.startswith("cannot plan the restart: demo: no serve process found")
    assert "no earlier launch by the console for this host entry" in message
    assert "\n" not in message


def test_a_session_is_the_config_s_host() -> None:
    config = HostConfig(name="gpu9", local=True, readonly=True)
    session = HostSession(config, LocalHost("gpu9"))
    assert session.name == "gpu9"
    assert session.readonly
    assert session.snapshot.host == "gpu9"


@pytest.mark.programs
async def test_the_demos_hints_say_a_key_not_a_command_that_cannot_work(tree: SimTree) -> None:
    """`demo` is no host outside the console: its hint said `vllm-console restart demo
    --trace`, which fails when pasted (issue 40). In the demo a hint says the key."""
    report = await session_on(tree).run_checks()
    runtime = {link.id: link for link in report.links}["runtime-activation"]
    assert runtime.status.value == "unknown"
    assert runtime.hint.startswith("press R: the traced run logs how each drafter layer")
    assert "vllm-console" not in " ".join(link.hint for link in report.links)


@pytest.mark.programs
async def test_a_hosts_hint_keeps_the_options_that_chose_its_settings(tree: SimTree) -> None:
    """A host opened as `vllm-console h --local --log L ...`: its hint's command carries the
    same options (it dropped them, and restarted another server or none)."""
    config = demo_config(tree)
    words = ["h", "--local", "--log", str(tree.log), "--match", f"{tree.root}/venv serve"]
    session = HostSession(config, LocalHost("h"), restart_words=words)
    report = await session.run_checks()
    runtime = {link.id: link for link in report.links}["runtime-activation"]
    assert runtime.hint.startswith(
        f"press R, or run `vllm-console restart h --local --log {tree.log} --match "
        f"'{tree.root}/venv serve' --trace`: the traced run")


@pytest.mark.programs
def test_checks_hint_from_the_command_line_keeps_its_options(
        tree: SimTree, capsys: pytest.CaptureFixture[str]) -> None:
    """`vllm-console check h --local --log L --match M`: the hint's restart is pasted as is."""
    from vllm_console.console.cli.parser import main

    options = ["--local", "--log", str(tree.log), "--match", f"{tree.root}/venv serve"]
    assert main(["check", "h", *options]) == 2  # CRITICAL: the incident's config
    out = capsys.readouterr().out
    assert (f"runtime-activation: run `vllm-console restart h --local --log {tree.log} "
            f"--match '{tree.root}/venv serve' --trace`") in out
