"""The whole chain on this machine (LocalHost: the probes run as on a host) against crafted serve
logs, for issue 19: a start-up that dies before its engine line is the current run and its
failure, and a traced run whose watched functions this vLLM does not have proves nothing."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.checks.test_checks_crafted import engine_lines, make_install, make_models
from vllm_console.checks import Status, run_chain
from vllm_console.checks.configs import ConfigRead
from vllm_console.checks.links import current_run, runtime_activation
from vllm_console.checks.models import Evidence
from vllm_console.checks.profile import load_profile
from vllm_console.checks.trace import format_trace_line
from vllm_console.console.hostside.probes import log_probe
from vllm_console.console.settings import HostConfig, ServeSettings
from vllm_console.console.sim.runner import start_background, stop, wait_ready
from vllm_console.console.sim.tree import materialise
from vllm_console.console.telemetry.oneshot import collect_status
from vllm_console.console.telemetry.run_log import RunLog
from vllm_console.console.telemetry.startup import StartupState
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.transport.remote_scripts import ScriptRun

PROFILE = load_profile()
RUNTIME = PROFILE.links.runtime_activation
MATCH = "vllm serve no-such-process-issue-19"  # the server is gone, or never matched
BANNER = ("(APIServer pid=4300) INFO 12-03 06:01:01 [api_utils.py:70] vLLM server version "
          "0.32.0, serving model /m/t")
ARGS = ("(APIServer pid=4300) INFO 12-03 06:01:02 [utils.py:253] non-default args: "
        "{'model_tag': '/m/t', 'model': '/m/t', 'speculative_config': {'method': 'dflash', "
        "'model': '/m/d', 'num_speculative_tokens': 4}, 'max_model_len': 512}")
# vLLM 0.31+: the API server's uncaught traceback has no `(APIServer pid=N)` prefix.
CONFIG_ERROR = [
    "Traceback (most recent call last):",
    '  File "/v/bin/vllm", line 8, in <module>',
    "    sys.exit(main())",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
    "  Value error, num_speculative_tokens 40 exceeds the drafter's block_size 16 "
    "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
]
RESTART = "[vllm-console] restart at 2026-12-03T06:00:00+00:00 by me@laptop; trace=on"


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vc-run-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def _check(root: Path, log_lines: list[str]) -> tuple[object, dict[str, Status]]:
    install = make_install(root)
    target, draft = make_models(root, "healthy")
    log = root / "serve.log"
    log.write_text("\n".join(log_lines) + "\n")
    report = await run_chain(LocalHost(), ServeSettings(
        python=str(install.python), log=str(log), target=str(target), draft=str(draft),
        match=MATCH))
    return report, {link.id: link.status for link in report.links}


@pytest.mark.programs
async def test_a_start_up_that_died_before_its_engine_line_is_what_check_reports(
        root: Path) -> None:
    old = engine_lines("/m/t", "/m/d")  # the last run: started, ready
    report, statuses = await _check(root, [*old, BANNER, ARGS, *CONFIG_ERROR])
    assert statuses == {"code-present": Status.PASS, "fields-extracted": Status.PASS,
                        "runtime-activation": Status.FAIL, "config-correct": Status.PASS}
    runtime = report.link("runtime-activation")  # type: ignore[attr-defined]
    assert runtime.summary == (
        "the server failed at start-up, before its engine started: pydantic_core."
        "_pydantic_core.ValidationError: 1 validation error for SpeculativeConfig — Value "
        "error, num_speculative_tokens 40 exceeds the drafter's block_size 16")
    assert report.root_cause == "runtime-activation"  # type: ignore[attr-defined]
    assert report.broken_link == "runtime-activation"  # type: ignore[attr-defined]
    excerpt = runtime.evidence[-1].excerpt
    assert "vLLM version: 0.32.0" in excerpt
    assert "aux layers" not in excerpt  # the old run's aux line is not this run's


@pytest.mark.programs
async def test_a_traced_run_that_hooked_nothing_is_unknown_and_no_root_cause(
        root: Path) -> None:
    missing = [f"(EngineCore pid={pid}) " + format_trace_line(
        "missing", f"vllm.model_executor.models.qwen3_dflash:{fn}", pid=pid)
        for pid in (4301, 4302) for fn in ("_get_dflash_layer_types", "_resolve_layer_attention")]
    report, statuses = await _check(root, [RESTART, BANNER, ARGS,
                                           *engine_lines("/m/t", "/m/d", extra=missing)])
    assert statuses["runtime-activation"] is Status.UNKNOWN
    runtime = report.link("runtime-activation")  # type: ignore[attr-defined]
    assert "missing from this vLLM: _get_dflash_layer_types in pids 4301, 4302" in runtime.summary
    assert "run marker: [vllm-console] restart at" in runtime.evidence[-1].excerpt
    assert "checks/profiles" in runtime.hint
    assert report.root_cause is None  # type: ignore[attr-defined]


# -- the simulated host: a real process tree that dies in its API server -------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.programs
async def test_a_relaunch_refused_at_configuration_time_on_the_simulated_host(
        root: Path) -> None:
    """A 0.33 simulated host served, was stopped, then relaunched with a speculative config
    that the API server refuses (no num_speculative_tokens): `check` and `status` both say the
    current run is that failed start-up, with its exception."""
    tree = materialise("upstream-mixed-swa-v1-runner", root / "sim", port=_free_port(),
                       startup_s=0.5, metrics_interval_s=0.3)
    proc = start_background(tree, env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    try:
        assert wait_ready(tree, proc, timeout=60)
    finally:
        stop(proc, timeout=10)
        stop(tree, timeout=10)
    argv = tree.serve_argv()
    argv[argv.index("--speculative-config") + 1] = json.dumps(
        {"method": "dflash", "model": str(tree.draft)})
    refused = start_background(tree, argv=argv)
    try:
        assert refused.wait(timeout=60) != 0
    finally:
        stop(refused, timeout=10)
    serve = ServeSettings(python=str(tree.python), log=str(tree.log), target=str(tree.target),
                          draft=str(tree.draft), match=MATCH, url=tree.url)
    report = await run_chain(LocalHost(), serve)
    runtime = report.link("runtime-activation")
    assert runtime.status is Status.FAIL, runtime.summary
    assert runtime.summary == ("the server failed at start-up, before its engine started: "
                               "ValueError: num_speculative_tokens must be provided with "
                               "speculative model")
    assert report.root_cause == "runtime-activation"
    assert "vLLM version: 0.33.0" in runtime.evidence[-1].excerpt
    snapshot = await collect_status(LocalHost(), HostConfig(name="sim", local=True, serve=serve))
    assert snapshot.serve_state.value == "failed"
    assert snapshot.startup.failure == ("ValueError: num_speculative_tokens must be provided "
                                        "with speculative model")


# -- both sides of the one rule, on lines made by real vLLM's own logging code -------------------

REAL = Path(__file__).parents[1] / "data" / "real_formats"
PYDANTIC = [  # 0.31+: the API server's uncaught traceback carries no prefix
    "Traceback (most recent call last):",
    '  File "/v/bin/vllm", line 8, in <module>',
    "    sys.exit(main())",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
    "  Value error, spec_tokens 40 is more than the drafter's block_size 16 [type=value_error, "
    "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
]


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0", "0.34.0"])
@pytest.mark.parametrize("failed", ["config-error", "engine-refusal"])
def test_the_chain_and_the_status_agree_on_the_current_run_of_real_logs(
        tmp_path: Path, version: str, failed: str) -> None:
    served = (REAL / version / "serve.log").read_text().splitlines()
    if failed == "config-error":  # the next launch: banner and arguments, then the traceback
        preamble = served[:served.index(next(t for t in served if "non-default args" in t)) + 1]
        current = [*preamble, *PYDANTIC]
        expected = ("the server failed at start-up, before its engine started: pydantic_core."
                    "_pydantic_core.ValidationError: 1 validation error for SpeculativeConfig — "
                    "Value error, spec_tokens 40 is more than the drafter's block_size 16")
        failure = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for "
                   "SpeculativeConfig")
    else:
        current = (REAL / version / "failure.log").read_text().splitlines()
        if version == "0.34.0":  # no V1 runner left to refuse the drafter: an OOM instead
            expected = "the engine failed to start: ValueError: Free memory on device cuda:0"
            failure = "EngineCore failed to start."
        elif version in ("0.32.0", "0.33.0"):  # the engine config refuses it, in the API server
            expected = ("vLLM refused the drafter before its engine started: Value error, Model "
                        "Runner V1 does not support: mixed sliding/full dflash drafts")
            failure = "Value error, Model Runner V1 does not support: mixed sliding/full dflash"
        else:
            expected = "vLLM refused the drafter: NotImplementedError: DFlash drafters with mixed"
            failure = "NotImplementedError: DFlash drafters with mixed sliding/full attention"
    log = tmp_path / "serve.log"
    log.write_text("\n".join([*served, *current]) + "\n")
    facts = log_probe.probe(runtime_activation.payload(RUNTIME, str(log), None))
    run = current_run.read_run(facts["lines"], RUNTIME)
    assert run.version == version
    data = log.read_bytes()  # the run begins at the last logo record's `version` row
    version_row = data.rfind(f"version {version}".encode())
    assert run.start_offset == data.rfind(b"\n", 0, version_row) + 1
    result = runtime_activation.evaluate(
        RUNTIME, str(log), ScriptRun("log-scan", 0, facts), ConfigRead("draft", "/d"),
        Evidence.make("settings"), watch=PROFILE.watch, host_label="h")
    assert result.status is Status.FAIL
    assert result.summary.startswith(expected), result.summary
    telemetry = RunLog()
    telemetry.feed_texts(log.read_text().splitlines())
    status = telemetry.startup.status(2e9, running=None)
    assert status.state is StartupState.FAILED
    assert status.failure is not None
    assert status.failure.startswith(failure)
