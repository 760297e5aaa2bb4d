"""The headless core never imports textual: checked by import-linter's contracts (static) and by
importing the core in a fresh interpreter (dynamic). The core is listed once, in pyproject.toml's
first import-linter contract; every module of console/ and checks/ is either in it or in the TUI.
"""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
    "contracts"]
CORE: list[str] = next(c for c in CONTRACTS if c["forbidden_modules"] == ["textual"])[
    "source_modules"]
TUI = ("vllm_console.console.tui",)


def _modules(package: str) -> list[str]:
    path = ROOT.joinpath(*package.split("."))
    return [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(path)])]


def test_every_module_is_in_the_core_or_the_tui() -> None:
    def covered(name: str) -> bool:
        return any(name == c or name.startswith(c + ".") for c in (*CORE, *TUI))

    loose = [m for m in _modules("vllm_console.console") + _modules("vllm_console.checks")
             if not covered(m) and m != "vllm_console.console.__main__"]
    assert not loose, f"add these to the core list in pyproject.toml (or to TUI): {loose}"


@pytest.mark.programs
def test_core_modules_do_not_import_textual() -> None:
    code = ("import importlib, pkgutil, sys\n"
            f"for name in {CORE!r}:\n"
            "    module = importlib.import_module(name)\n"
            "    for info in pkgutil.walk_packages(getattr(module, '__path__', []), name + '.'):\n"
            "        importlib.import_module(info.name)\n"
            "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
            "print(','.join(bad))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert result.stdout.strip() == ""


@pytest.mark.programs
def test_import_linter_contract_holds() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports is missing: install the dev extra (make test does)")
    result = subprocess.run([lint], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CONTRACTS)} kept, 0 broken" in result.stdout
