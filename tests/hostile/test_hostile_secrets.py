"""Secrets never reach the screen or an export: a server launched with `--api-key` (the older
vLLM builds print it again in their `non-default args` line) and with `--hf-token=...`. Pilot
looks at every widget's text (every log line kept, every tree node, collapsed ones too, every
screen the keys open), the `x` bundle, and the CLI's `status --json` and `check --json`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widget import Widget
from textual.widgets import DataTable, Input, Log, Static, Tree

from tests.app_support import wait_until
from vllm_console.console.cli.commands.demo import demo_config, free_port
from vllm_console.console.cli.parser import main
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.sim import SimTree, materialise, start_background, stop, wait_ready
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.evidence import EvidenceScreen

pytestmark = pytest.mark.programs  # each test starts a simulated server

SECRET = "sk-vc-SECRET-4242424242"
TOKEN = "hf_VCSECRETTOKEN0000"
# Secrets the server has in its environment, as a person's shell would give it.
ENV_SECRETS = {"HF_TOKEN": "hf_VCENVTOKEN1111", "VLLM_API_KEY": "sk-vc-ENVKEY-3333",
               "GRAFANA_CLOUD_SECRET": "vc-env-secret-5555", "S3_ACCESS_KEY": "vc-env-key-6666"}


@pytest.fixture
def secret_tree(tmp_path: Path) -> Iterator[SimTree]:
    tree = materialise("incident", tmp_path / "host", port=free_port(), startup_s=0.5,
                       metrics_interval_s=0.3)
    argv = [*tree.serve_argv(), "--api-key", SECRET, f"--hf-token={TOKEN}"]
    proc = start_background(tree, argv=argv, env=ENV_SECRETS)
    with open(tree.log, "ab") as log:  # as an older build words it, and a token flag
        log.write(f"(APIServer pid=1) INFO 05-14 10:00:00 [api_server.py:1] non-default args: "
                  f"{{'model': 'm', 'api_key': ['{SECRET}'], 'hf_token': '{TOKEN}'}}\n"
                  f"(APIServer pid=1) INFO 05-14 10:00:00 [cli.py:1] argv: --api-key "
                  f"{SECRET} --hf-token={TOKEN}\n".encode())
    try:
        assert wait_ready(tree, proc, 30)
        yield tree
    finally:
        stop(tree, timeout=5)


def widget_texts(widget: Widget) -> Iterator[str]:
    for node in widget.walk_children(with_self=True):
        if isinstance(node, Log):
            yield from node.lines
        elif isinstance(node, Tree):
            stack = [node.root]
            while stack:
                item = stack.pop()
                yield str(item.label)
                stack.extend(item.children)
        elif isinstance(node, DataTable):
            for row in range(node.row_count):
                yield " ".join(str(c) for c in node.get_row_at(row))
        elif isinstance(node, Static):
            yield str(node.render())
        elif isinstance(node, Input):
            yield node.value
        yield str(getattr(node, "border_title", "") or "")


def assert_no_secret(texts: Iterator[str] | list[str], where: str) -> int:
    count = 0
    for text in texts:
        count += 1
        assert SECRET not in text, f"the API key is shown in {where}: {text[:300]!r}"
        assert TOKEN not in text, f"the token is shown in {where}: {text[:300]!r}"
        for name, value in ENV_SECRETS.items():
            assert value not in text, f"{name}'s value is shown in {where}: {text[:300]!r}"
    return count


async def test_no_secret_in_any_widget_nor_in_the_export(secret_tree: SimTree, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    session = HostSession(demo_config(secret_tree), LocalHost("demo"), scenario="incident")
    app = ConsoleApp([session], export_dir=tmp_path / "exports")
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen_for("demo")
        assert screen is not None
        await wait_until(pilot, lambda: any("non-default args" in line
                                            for line in screen.log_pane.visible_lines()), 30,
                         "the non-default args line")
        await wait_until(pilot, lambda: screen.engine.view.args is not None, 20,
                         "the engine tree's args")
        await wait_until(pilot, lambda: screen.checklist.state.report is not None
                         and not screen.checklist.state.running, 40, "the checklist")
        assert any("<redacted>" in line for line in screen.log_pane.visible_lines())
        seen = assert_no_secret(widget_texts(screen), "the host screen")
        assert seen > 50
        assert_no_secret(screen.log_pane.visible_lines(), "the log pane")
        assert_no_secret([app.export_screenshot()], "the screenshot")
        # Every link's evidence screen (the probes' commands and excerpts).
        report = screen.checklist.state.report
        assert report is not None
        for link in report.links:
            app.push_screen(EvidenceScreen(link))
            await pilot.pause()
            assert_no_secret(widget_texts(app.screen), f"the evidence of {link.id}")
            assert_no_secret([app.export_screenshot()], f"the evidence of {link.id}")
            app.pop_screen()
            await pilot.pause()
        # The restart dialog, and its edit fields once `e` opens them; cancelled.
        await pilot.press("r")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "RestartScreen", 20,
                         "the restart dialog")
        assert "--api-key" in app.screen.planned.command
        assert_no_secret(widget_texts(app.screen), "the restart dialog")
        await pilot.press("e")
        await pilot.pause()
        assert_no_secret(widget_texts(app.screen), "the restart dialog's edit fields")
        assert_no_secret([app.export_screenshot()], "the restart dialog")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, 10, "the host screen again")
        await pilot.press("x")
        exports = tmp_path / "exports"
        await wait_until(pilot, lambda: exports.exists() and any(exports.iterdir()), 10,
                         "the export")
    bundle = next(exports.iterdir())
    text = bundle.read_text()
    assert "non-default args" in text
    assert_no_secret([text], "the exported bundle")
    assert bundle.stat().st_mode & 0o777 == 0o600
    assert exports.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("command", ["status", "check"])
def test_no_secret_in_the_cli_output(secret_tree: SimTree, command: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ([], ["--json"]):
        main([command, "demo", "--local", "--match", f"{secret_tree.root}/venv serve",
              "--nvidia-smi", str(secret_tree.nvidia_smi), "--python",
              str(secret_tree.python), *extra])
        out = capsys.readouterr()
        assert "Traceback" not in out.err
        assert_no_secret([out.out, out.err], f"{command} {' '.join(extra)}")
        if extra and command == "status":
            cmdline = json.loads(out.out)["serve"]["cmdline"]
            assert "--api-key '<redacted>'" in cmdline or "--api-key <redacted>" in cmdline


def test_no_secret_in_a_restart_nor_in_the_files_it_leaves(
        secret_tree: SimTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`restart` asked (the confirm prompt), then `restart --yes` (its `restarting on` and
    `launching` lines): the key is in neither, nor in any file the console leaves on the host
    but the last-launch record, which must keep it for the next relaunch (private, 0600)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    words = ["restart", "demo", "--local", "--match", f"{secret_tree.root}/venv serve",
             "--nvidia-smi", str(secret_tree.nvidia_smi), "--python", str(secret_tree.python),
             "--log", str(secret_tree.log)]
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    assert main(words) == 2
    out = capsys.readouterr()
    assert "--api-key" in out.out
    assert "cancelled" in out.err
    assert_no_secret([out.out, out.err], "restart's confirm prompt")
    assert main([*words, "--yes"]) == 0, capsys.readouterr()
    out = capsys.readouterr()
    assert "relaunching" in out.out
    assert_no_secret([out.out, out.err], "restart --yes")
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    records = [p for p in files if p.name.startswith("last-launch-")]
    assert len(records) == 1
    assert records[0].stat().st_mode & 0o777 == 0o600
    assert SECRET in records[0].read_text()  # what the next relaunch needs
    for path in files:
        if path in records or path.suffix in (".pyz", ".lock"):
            continue
        assert_no_secret([path.read_text(errors="replace")], str(path))
