"""The headless core never imports textual: checked by import-linter's contract (static) and by
importing the core in a fresh interpreter (dynamic)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CORE = [
    "checks", "checks.chain", "console.settings", "console.host", "console.ssh_host",
    "console.local_host", "console.sim", "console.parsers", "console.telemetry.host_telemetry",
    "console.follower", "console.agent", "console.discovery", "console.restart",
    "console.session", "console.draft_diff", "console.cli", "console.connect",
]


def test_core_modules_do_not_import_textual() -> None:
    code = ("import importlib, sys\n"
            f"for name in {CORE!r}:\n"
            "    importlib.import_module(name)\n"
            "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
            "print(','.join(bad))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert result.stdout.strip() == ""


def test_import_linter_contract_holds() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports is missing: install the dev extra (make test does)")
    result = subprocess.run([lint], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
