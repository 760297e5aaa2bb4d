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

from tests.checks.test_checks_crafted import (
    FAKE_SERVE,
    HOST_PYTHON,
    NO_SWA_SOURCE,
    engine_lines,
    make_install,
    make_models,
    write_fake_serve,
)
from vllm_console.checks import Status, run_chain
from vllm_console.console.settings import ServeSettings
from vllm_console.console.transport.local_host import LocalHost


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vc-local-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _serve(argv: list[str], root: Path, lines: list[str], env: dict[str, str],
           cwd: Path, *, wait: bool = True) -> subprocess.Popen[bytes]:
    lines_file = root / "serve-lines.txt"
    lines_file.write_text("".join(f"{line}\n" for line in lines))
    log = root / "serve.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env={"PATH": "/usr/bin:/bin", "FAKE_SERVE_LINES": str(lines_file),
                                     **env}, start_new_session=True)
    deadline = time.monotonic() + (10 if wait else 0)
    while b"startup complete" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, 9)
    proc.wait()


@pytest.mark.programs
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


@pytest.mark.programs
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


@pytest.mark.programs
async def test_with_no_server_the_chain_judges_the_entrys_last_launch(root: Path) -> None:
    """A relaunch the engine refused leaves no process to discover: the chain reads the log,
    interpreter and models of this host entry's last launch by the console (the restart's
    record), and judges that failed run, instead of asking for --log."""
    from vllm_console.console.hostclient.launch_record import last_key
    from vllm_console.console.transport.remote_scripts import RemoteScripts

    install = make_install(root / "installed", variant="upstream")
    target, draft = make_models(root, "healthy")
    log = root / "serve.log"
    refusal = ("  Value error, Model Runner V1 does not support: mixed sliding/full dflash "
               "drafts [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]")
    log.write_text("\n".join([
        "[vllm-console] restart at 2026-12-03T06:00:00+00:00 by test (trace=off)",
        "(APIServer pid=7) INFO 12-03 06:00:01 [api_utils.py:347] vLLM server version 0.32.0, "
        f"serving model {target}",
        "Traceback (most recent call last):",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
        refusal, ""]))
    name = f"last-launch-test-{os.getpid()}"
    host = LocalHost(name)
    private = Path(await RemoteScripts(host).bundle()).parent
    record = private / f"last-launch-{last_key(name)}.json"
    record.write_text(json.dumps({
        "entry": name, "argv": [str(install.python), "-m", "vllm.entrypoints.cli.main",
                                "serve", str(target), "--speculative-config",
                                json.dumps({"method": "dflash", "model": str(draft)})],
        "cwd": str(root), "env": {}, "log": str(log), "url": "", "port": None, "pid": 1,
        "at": time.time(), "by": "test"}))
    try:
        report = await run_chain(host, ServeSettings(match=f"vllm serve {target}"))
    finally:
        record.unlink()
    runtime = report.link("runtime-activation")
    assert runtime.status is Status.FAIL, runtime.summary
    assert "Model Runner V1 does not support" in runtime.summary
    assert report.link("code-present").status is Status.PASS
    assert str(draft) in report.link("config-correct").evidence[0].excerpt or \
        any(str(draft) in e.excerpt for e in report.link("config-correct").evidence)


@pytest.mark.programs
async def test_a_server_that_has_logged_nothing_yet_is_starting_not_an_error(
        root: Path) -> None:
    """Issue 40 (`make demo-real`): a real vLLM spends its first seconds importing, its log
    empty, its port closed. Runtime activation said `error` ("no run start in .../serve.log")
    until it was ready: a live process whose URL does not answer yet is starting, `unknown`."""
    from tests.prometheus import free_port

    install = make_install(root)
    target, draft = make_models(root, "healthy")
    script, _ = write_fake_serve(root, [])  # it logs nothing: importing
    token = f"local-{os.getpid()}-starting"
    spec = json.dumps({"method": "dflash", "model": str(draft)})
    log = root / "serve.log"
    port = free_port()  # its port, closed: nothing listens there yet
    proc = _serve([HOST_PYTHON, str(script), "serve", str(target), "--speculative-config", spec,
                   "--served-model-name", token, "--port", str(port)], root, [],
                  {"PYTHONPATH": str(install.site)}, root, wait=False)
    try:
        settings = ServeSettings(match=f"vllm serve {token}")
        report = await run_chain(LocalHost(), settings)
    finally:
        _stop(proc)
    runtime = report.link("runtime-activation")
    assert runtime.status is Status.UNKNOWN, runtime.summary
    assert runtime.summary.startswith(f"the server is starting: {log} has no run start yet")
    assert report.link("code-present").status is Status.PASS  # the rest is judged as ever
