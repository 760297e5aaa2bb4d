"""The chain on this machine (LocalHost) against crafted hosts: the serving interpreter's own
view of vLLM — its PYTHONPATH, and a `python -m` launch from a checkout that shadows the
installed package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from checks import Status, run_chain
from console.local_host import LocalHost
from console.settings import ServeSettings
from tests.test_checks_crafted import (
    FAKE_SERVE,
    HOST_PYTHON,
    NO_SWA_SOURCE,
    engine_lines,
    make_install,
    make_models,
    write_fake_serve,
)


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vc-local-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _serve(argv: list[str], root: Path, lines: list[str], env: dict[str, str],
           cwd: Path) -> subprocess.Popen[bytes]:
    lines_file = root / "serve-lines.txt"
    lines_file.write_text("\n".join(lines) + "\n")
    log = root / "serve.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env={"PATH": "/usr/bin:/bin", "FAKE_SERVE_LINES": str(lines_file),
                                     **env}, start_new_session=True)
    deadline = time.monotonic() + 10
    while b"startup complete" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, 9)
    proc.wait()


async def test_the_serve_processes_pythonpath_reaches_the_probes(root: Path) -> None:
    install = make_install(root)
    target, draft = make_models(root, "healthy")
    script, _ = write_fake_serve(root, [])
    token = f"local-{os.getpid()}-a"
    spec = json.dumps({"method": "dflash", "model": str(draft)})
    proc = _serve([HOST_PYTHON, str(script), "serve", str(target), "--speculative-config", spec,
                   "--served-model-name", token], root, engine_lines(target, draft),
                  {"PYTHONPATH": str(install.site)}, root)
    try:
        report = await run_chain(LocalHost(), ServeSettings(match=f"vllm serve {token}"))
    finally:
        _stop(proc)
    statuses = {link.id: link.status for link in report.links}
    assert statuses == {"code-present": Status.PASS, "fields-extracted": Status.PASS,
                        "runtime-activation": Status.UNKNOWN, "config-correct": Status.PASS}
    assert str(install.pkg) in report.link("code-present").evidence[1].excerpt


async def test_a_checkout_in_the_working_directory_shadows_the_install(root: Path) -> None:
    install = make_install(root / "installed")  # the PR branch, whole
    checkout = root / "checkout"
    models = checkout / "vllm" / "model_executor" / "models"
    cli = checkout / "vllm" / "entrypoints" / "cli"
    models.mkdir(parents=True)
    cli.mkdir(parents=True)
    for folder in (checkout / "vllm", checkout / "vllm" / "model_executor", models,
                   checkout / "vllm" / "entrypoints", cli):
        (folder / "__init__.py").write_text("")
    (models / "qwen3_dflash.py").write_text(NO_SWA_SOURCE)
    # `python -m vllm.entrypoints.cli.main serve`: a server entry point, from the checkout.
    (cli / "main.py").write_text(FAKE_SERVE)
    target, draft = make_models(root, "healthy")
    token = f"local-{os.getpid()}-b"
    proc = _serve([HOST_PYTHON, "-m", "vllm.entrypoints.cli.main", "serve", str(target),
                   "--speculative-config", json.dumps({"model": str(draft)}),
                   "--served-model-name", token], root, engine_lines(target, draft),
                  {"PYTHONPATH": str(install.site)}, checkout)
    try:
        report = await run_chain(LocalHost(), ServeSettings(match=f"vllm serve {token}"))
    finally:
        _stop(proc)
    code = report.link("code-present")
    assert code.status is Status.FAIL, code.summary
    assert "no DFlash SWA support" in code.summary
    assert f"the source read ({checkout}/vllm) is not the tree RECORD describes" in code.hint
