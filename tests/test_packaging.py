"""The wheel installs one import name, `vllm_console`, and nothing else at the top of
site-packages: installed into an environment that has PyPI's `console` package (where operators
keep their tools: the serving venv), both keep working."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("console", "widgets", "checks", "themes")


def _pip(*args: str, cwd: Path = ROOT) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                   cwd=cwd, check=True, timeout=300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), ".")
    return next(out.glob("vllm_console-*.whl"))


@pytest.mark.programs
def test_the_wheel_holds_the_four_folders_under_one_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"vllm_console"}
    tracked = subprocess.run(["git", "ls-files", *FOLDERS], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert {f"vllm_console/{p}" for p in tracked} <= set(names)


@pytest.mark.programs
def test_installed_beside_pypis_console_both_work(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                                "'purelib'))"], capture_output=True, text=True,
                               check=True).stdout.strip())
    # The console's dependencies come from the suite's own environment (a path, not its .pth
    # files: the checkout's editable install must not leak in).
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _pip("--python", str(python), "install", "console")
    _pip("--python", str(python), "install", "--no-deps", str(wheel))

    def run(code: str) -> str:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                              cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("import console; print(console.__file__)") == str(site / "console" / "__init__.py")
    assert run("import console.core, console.detection; print('ok')") == "ok"
    assert not any((site / name).exists() for name in ("checks", "widgets", "themes"))
    assert run("import vllm_console.console.cli.parser as p; print(p.__file__)").startswith(
        str(site / "vllm_console" / "console"))
    help_text = subprocess.run([str(venv / "bin" / "vllm-console"), "--help"],
                               capture_output=True, text=True, timeout=60)
    assert help_text.returncode == 0, help_text.stderr
    assert "usage: vllm-console" in help_text.stdout
    shipped = run("from vllm_console.checks import shipped_profiles; "
                  "print(' '.join(sorted(shipped_profiles())))")
    assert "dflash-swa" in shipped.split()
