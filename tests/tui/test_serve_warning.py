"""The one precedence rule's warning in the TUI: a hosts file whose `log` is not where the
server writes is said on screen, names both files, and its text stays data (a `[` in a path
is no markup)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app_support import make_tree, wait_until
from tests.tui.test_app_pilot import SIZE
from vllm_console.console.cli.commands.demo import demo_config
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.sim import start_background, stop
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.tui.app import ConsoleApp

pytestmark = pytest.mark.programs  # each test starts a simulated server


@pytest.mark.usefixtures("state_home")
async def test_a_stale_configured_log_is_a_warning_on_screen(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "host")
    start_background(tree)
    stale = tmp_path / "old [setup].log"
    stale.write_text("INFO an old run's line\n")
    config = demo_config(tree)
    config = config.model_copy(update={"serve": config.serve.model_copy(
        update={"log": str(stale)})})
    app = ConsoleApp([HostSession(config, LocalHost("demo"))], autostart_checks=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            def said() -> list[str]:  # the notifications Textual shows as toasts
                return [str(n.message) for n in app._notifications]
            await wait_until(pilot, lambda: any("warning: configured log" in m for m in said()),
                             30, "the warning")
            (warning,) = [m for m in said() if "warning: configured log" in m]
            assert warning.startswith(f"demo: warning: configured log {stale} is not what pid")
            assert f"(it writes its output to {tree.log})" in warning
            notification = next(n for n in app._notifications if n.message == warning)
            assert notification.severity == "warning"
            assert notification.markup is False  # a `[` in a host's path is no markup
    finally:
        stop(tree, timeout=5)
