"""With no py-spy on the host, the stacks screen offers to install it: `i` asks first, naming the
exact command (`PYTHON -m pip install py-spy` with the serving interpreter) and that
interpreter's environment, and nothing else; once installed, the stacks come. Read-only mode
never offers it.

The install is a real `pip install py-spy` (pip from the interpreter's own ensurepip, offline)
into the simulated host's serving venv, from a local wheel of the simulated host's py-spy
stand-in (`PIP_NO_INDEX` and `PIP_FIND_LINKS` in the environment, as a host with a private
index would configure pip): no network.
"""

from __future__ import annotations

import base64
import hashlib
import stat
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app_support import screen_text, wait_until
from tests.tui.test_serving_strip import Served
from vllm_console.console.hostclient.stacks import StacksReport
from vllm_console.console.session.host_session import HostSession
from vllm_console.console.sim import stop
from vllm_console.console.sim.tree import FUTURE, PY_SPY_SOURCE
from vllm_console.console.tui.app import ConsoleApp
from vllm_console.console.tui.screens.confirm import ConfirmScreen
from vllm_console.console.tui.screens.stacks import StacksScreen

pytestmark = pytest.mark.timeout(180)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def stand_in_wheel(folder: Path) -> Path:
    """`py_spy-0.4.3-py3-none-any.whl` whose `py-spy` script is the simulated host's stand-in."""
    source = PY_SPY_SOURCE.read_text()
    script = "#!python\n" + FUTURE + source.replace(FUTURE, "", 1)
    name = "py_spy-0.4.3"
    files = {f"{name}.data/scripts/py-spy": script.encode(),
             f"{name}.dist-info/METADATA": b"Metadata-Version: 2.1\nName: py-spy\n"
                                           b"Version: 0.4.3\n",
             f"{name}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: vllm-console-tests\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    files[f"{name}.dist-info/RECORD"] = ("\n".join([*record, f"{name}.dist-info/RECORD,,"])
                                         + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            info = zipfile.ZipInfo(path)
            # A regular file's mode with its x bits: pip makes such a script executable.
            info.external_attr = (stat.S_IFREG | (0o755 if "/scripts/" in path else 0o644)) << 16
            zf.writestr(info, data)
    return wheel


@pytest.fixture
def without_py_spy(tmp_path: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch
                   ) -> Iterator[Served]:
    served = Served(tmp_path / "host", "healthy")
    try:
        (served.tree.python.parent / "py-spy").unlink()
        subprocess.run([str(served.tree.python), "-m", "ensurepip"], check=True,
                       capture_output=True, timeout=120)
        wheels = stand_in_wheel(tmp_path / "wheels").parent
        monkeypatch.setenv("PIP_NO_INDEX", "1")
        monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
        monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        yield served
    finally:
        stop(served.tree, timeout=5)


def words(app: ConsoleApp) -> str:
    """The screen's text as words (long lines wrap inside the dialog's border)."""
    return " ".join(screen_text(app).replace("\u2588", " ").split())


async def open_stacks(app: ConsoleApp, pilot: object, session: HostSession) -> StacksScreen:
    await wait_until(pilot, lambda: session.snapshot.readiness.ready, 40, "the server ready")
    await pilot.press("s")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: isinstance(app.screen, StacksScreen)
                     and app.screen.report is not None, 40, "the stacks screen's answer")
    screen = app.screen
    assert isinstance(screen, StacksScreen)
    return screen


@pytest.mark.programs
async def test_the_stacks_screen_installs_py_spy_into_the_serving_environment(
        without_py_spy: Served) -> None:
    served = without_py_spy
    python = str(served.tree.python)
    command = f"{python} -m pip install py-spy"
    async with served.app.run_test(size=(160, 60)) as pilot:
        screen = await open_stacks(served.app, pilot, served.session)
        report: StacksReport | None = screen.report
        assert report is not None
        assert "py-spy is not installed" in report.problem
        assert report.install == (python, "-m", "pip", "install", "py-spy")
        assert f"press i to install it: {command} (asks first)" in words(served.app)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(served.app.screen, ConfirmScreen), 10,
                         "the confirmation")
        body = str(served.app.screen.query_one("#confirm-body").render())
        assert command in body
        assert f"into the serving interpreter's environment ({python})" in body
        assert served.app.screen.focused is served.app.screen.query_one("#cancel")
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: screen.installed and screen.report is not None
                         and screen.report.tool is not None, 120, "py-spy installed, dumped")
        assert screen.report is not None
        assert screen.report.tool is not None
        assert screen.report.tool["path"] == str(served.tree.python.parent / "py-spy")
        assert {p.role for p in screen.report.processes} >= {"api-server", "engine-core"}
        assert "press i to install" not in words(served.app)
    installed = list(served.tree.site_packages.glob("py_spy-0.4.3.dist-info"))
    assert installed, "pip recorded the install in the serving environment"


@pytest.mark.programs
async def test_read_only_never_offers_the_install(without_py_spy: Served) -> None:
    served = without_py_spy
    served.session.config = served.session.config.model_copy(update={"readonly": True})
    async with served.app.run_test(size=(160, 60)) as pilot:
        screen = await open_stacks(served.app, pilot, served.session)
        assert screen.report is not None
        assert "py-spy is not installed" in screen.report.problem
        assert "press i" not in words(served.app)
        await pilot.press("i")
        await pilot.pause(0.3)
        assert isinstance(served.app.screen, StacksScreen)  # no confirmation, nothing run
    assert not (served.tree.python.parent / "py-spy").exists()
