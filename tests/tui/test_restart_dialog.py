"""The restart dialog driven with Textual's Pilot against a real simulated host on this
machine: the relaunch's environment and command line edited and shown as a diff against the
last run, an edit that does not parse never confirmed, the edit kept for the next restart, and
a server that exited at start-up started again from its last launch, with the variable its hint
asks for."""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil
import pytest

from tests.app_support import SimApp, wait_until
from tests.tui.test_app_pilot import SIZE
from vllm_console.console.cli.commands.demo import demo_config, free_port, record
from vllm_console.console.restart import RestartError, RestartPlan
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.sim import materialise, start_background, stop
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.restart import RestartScreen


def environ(pid: int) -> dict[str, str]:
    return psutil.Process(pid).environ()


def body(app: ConsoleApp) -> str:
    return str(app.screen.query_one("#confirm-body").render())


async def open_dialog(pilot, app: ConsoleApp) -> RestartScreen:  # type: ignore[no-untyped-def]
    """`r`, again while the last restart is still being verified ("already under way")."""
    for _ in range(60):
        await pilot.press("r")
        with contextlib.suppress(AssertionError):
            await wait_until(pilot, lambda: isinstance(app.screen, RestartScreen)
                             and app.screen.focused is not None, 1, "the restart dialog")
        if isinstance(app.screen, RestartScreen):
            return app.screen
    raise AssertionError("no restart dialog after 60 presses of r")


@pytest.mark.programs
@pytest.mark.usefixtures("state_home")
async def test_the_relaunch_env_is_edited_shown_as_a_diff_and_kept(tmp_path: Path) -> None:
    sim = SimApp(tmp_path / "host")
    try:
        async with sim.app.run_test(size=SIZE) as pilot:
            session = sim.session
            await wait_until(pilot, lambda: session.snapshot.readiness.ready, 30, "ready")
            dialog = await open_dialog(pilot, sim.app)
            assert dialog.focused is dialog.query_one("#cancel")  # Cancel stays the default
            await pilot.press("e")
            await pilot.press(*"VLLM_CONSOLE_PILOT=on")
            await wait_until(pilot, lambda: "+ env: VLLM_CONSOLE_PILOT=on" in body(sim.app),
                             10, "the diff")
            assert "- env: VLLM_CONSOLE_PILOT unset" in body(sim.app)
            # An edit that does not parse is said, and never confirmed.
            await pilot.press("space", *"=oops")
            await wait_until(pilot, lambda: "'=oops' is neither NAME=value nor -NAME"
                             in dialog.error, 10, "the error")
            await pilot.click("#confirm")
            await pilot.pause(0.2)
            assert sim.app.screen is dialog
            dialog.query_one("#restart-env").focus()
            await pilot.press("end", *["backspace"] * len(" =oops"))
            await wait_until(pilot, lambda: dialog.error == "", 10, "the error to clear")
            old = session.snapshot.serve.pid
            await pilot.click("#confirm")

            def relaunched() -> bool:
                pid = session.snapshot.serve.pid
                return pid not in (None, old) and session.snapshot.readiness.ready
            await wait_until(pilot, relaunched, 60, "the relaunched server")
            new = session.snapshot.serve.pid
            assert new is not None
            assert environ(new)["VLLM_CONSOLE_PILOT"] == "on"
            # The next restart starts from the edited launch: no diff, the variable kept.
            dialog = await open_dialog(pilot, sim.app)
            assert "VLLM_CONSOLE_PILOT" not in body(sim.app)
            assert dialog.plan.launch_env["VLLM_CONSOLE_PILOT"] == "on"
            await pilot.press("escape")
    finally:
        sim.close()


@pytest.mark.programs
@pytest.mark.usefixtures("state_home")
async def test_a_server_that_exited_restarts_from_its_last_launch_with_the_edited_env(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`demo upstream-mixed-swa-v1-runner`: the server starts with VLLM_USE_V2_MODEL_RUNNER=0,
    the engine config refuses the drafter and serve exits 1 at once. The hint says to
    relaunch with the variable at 1, but `r` said there was nothing to restart. Now the demo's
    launch is on record: the dialog offers it, the variable is edited (a diff against the last
    run), and the server comes up."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the helpers' directory
    tree = materialise("upstream-mixed-swa-v1-runner", tmp_path / "host", port=free_port(),
                       gpus=2, startup_s=0.5, metrics_interval_s=0.3)
    proc = start_background(tree)
    await record(LocalHost("demo"), tree, proc.pid)  # as `vllm-console demo` does
    assert proc.wait(timeout=30) == 1
    session = HostSession(demo_config(tree), LocalHost("demo"),
                          scenario="upstream-mixed-swa-v1-runner")
    app = ConsoleApp([session], autostart_checks=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            dialog = await open_dialog(pilot, app)
            assert dialog.plan.pid is None
            shown = body(app)
            assert "stop: nothing runs (the last launch is started again)" in shown
            assert "by vllm-console demo" in shown
            await pilot.press("e")
            await pilot.press(*"VLLM_USE_V2_MODEL_RUNNER=1")
            await wait_until(pilot, lambda: "+ env: VLLM_USE_V2_MODEL_RUNNER=1" in body(app),
                             10, f"the diff ({dialog.error or 'no error'})")
            assert "- env: VLLM_USE_V2_MODEL_RUNNER=0" in body(app)
            await pilot.click("#confirm")
            # Ready (/health) and found (the next discovery) come in either order.
            await wait_until(pilot, lambda: session.snapshot.readiness.ready
                             and session.snapshot.serve.pid is not None, 60,
                             "the relaunched server to be ready and found")
            pid = session.snapshot.serve.pid
            assert pid is not None
            assert environ(pid)["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    finally:
        stop(tree, timeout=5)


def _container_plan(**extra: object) -> RestartPlan:
    from vllm_console.console.restart import RestartPlan

    argv = ("/venv/bin/vllm", "serve", "/models/target", "--port", "8000")
    fields: dict[str, object] = dict(
        host="box", mode="container", command="docker restart vllm-box", pid=4242,
        members=((4242, 1, "vllm"),), port=8000, url="http://127.0.0.1:8000", argv=argv,
        container_argv=argv, original_env={"HF_TOKEN": "hf_secret", "LANG": "C.UTF-8"},
        launch_env={"HF_TOKEN": "hf_secret", "LANG": "C.UTF-8"},
        container=("docker", "vllm-box", "abc123", "always"),
        notes=("restart policy always: the daemon starts it again whenever it stops",))
    fields.update(extra)
    return RestartPlan(**fields)  # type: ignore[arg-type]


def _editor(plan: RestartPlan, *, env: str = "", argv: str = "") -> RestartPlan:
    # As the session's: the dialog's fields parsed, then console.restart.edit.
    from vllm_console.console.restart.edit import edit_plan, parse_argv, parse_env
    from vllm_console.console.session.host_session import ActionError

    try:
        return edit_plan(plan, env=parse_env(env), argv=parse_argv(argv) if argv else ())
    except RestartError as exc:
        raise ActionError(str(exc)) from None


async def test_a_containers_edited_launch_recreates_it_and_the_dialog_says_so() -> None:
    """`r` on a containerised server: the dialog says `docker restart NAME` and what it does;
    `e` and an edit turn it into a recreation (the container made again with the change),
    shown as a diff, secrets never shown."""
    from textual.app import App

    dialog = RestartScreen("Restart vllm serve on box", _container_plan(), _editor)
    app: App[None] = App()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(dialog)
        await pilot.pause(0.2)
        text = body(app)  # type: ignore[arg-type]
        assert "docker restart vllm-box: the container stops" in text
        assert "ready: its new server owns port 8000 and answers" in text
        assert "note: restart policy always" in text
        await pilot.press("e")
        await pilot.pause(0.1)
        assert dialog.error == ""
        await pilot.press(*"VLLM_USE_V2_MODEL_RUNNER=1")
        await pilot.pause(0.2)
        text = body(app)  # type: ignore[arg-type]
        assert "recreate: docker create, then stop vllm-box" in text
        assert "+ env: VLLM_USE_V2_MODEL_RUNNER=1" in text
        assert "command: /venv/bin/vllm serve /models/target --port 8000" in text
        assert "hf_secret" not in text
        assert dialog.plan.recreate
        assert dialog.plan.launch_env["VLLM_USE_V2_MODEL_RUNNER"] == "1"
        assert dialog.plan.launch_env["HF_TOKEN"] == "hf_secret"  # kept, never shown
        await pilot.click("#confirm")
        await pilot.pause(0.1)
        assert app.screen is not dialog


async def test_a_compose_services_edited_launch_goes_through_compose() -> None:
    """A compose service's edit recreates it through compose (its own files and an override
    with the change), and the dialog says so before anything is confirmed."""
    from textual.app import App

    plan = _container_plan(compose=("llm", "vllm"))
    dialog = RestartScreen("Restart vllm serve on box", plan, _editor)
    app: App[None] = App()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(dialog)
        await pilot.pause(0.2)
        await pilot.press("e")
        await pilot.pause(0.1)
        assert dialog.error == ""
        await pilot.press(*"VLLM_USE_V2_MODEL_RUNNER=1")
        await pilot.pause(0.2)
        text = body(app)  # type: ignore[arg-type]
        assert "docker compose up --force-recreate vllm (project llm" in text
        assert "compose files say (they are not edited" in text
        assert "+ env: VLLM_USE_V2_MODEL_RUNNER=1" in text
        assert "hf_secret" not in text
        assert "docker create" not in text
        await pilot.click("#confirm")
        await pilot.pause(0.1)
        assert app.screen is not dialog


async def test_a_containers_command_line_field_holds_its_servers_command_line() -> None:
    """The dialog describes a container's restart as `docker restart NAME`; its edit field
    holds the server's command line to edit (not that description), and an edit of it makes
    the recreation with the edited command line."""
    from textual.app import App
    from textual.widgets import Input

    dialog = RestartScreen("Restart vllm serve on box", _container_plan(), _editor)
    app: App[None] = App()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(dialog)
        await pilot.pause(0.2)
        field = dialog.query_one("#restart-argv", Input)
        assert field.value == "/venv/bin/vllm serve /models/target --port 8000"
        await pilot.press("e")
        await pilot.pause(0.1)
        field.focus()
        await pilot.pause(0.1)
        await pilot.press("end", *" --max-model-len 512")
        await pilot.pause(0.2)
        assert dialog.error == ""
        assert dialog.plan.recreate
        assert list(dialog.plan.argv)[-2:] == ["--max-model-len", "512"]
