"""The host-side log, configs and fields probes on crafted files: the current run only (however
the log is cut into chunks), a log rotated away under a running process, hub-cache models, and
the host's own extraction with an interpreter that can or cannot import vLLM."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.checks.test_checks_crafted import (
    HOST_PYTHON,
    draft_config,
    engine_lines,
    make_install,
    run_script,
)
from vllm_console.checks.links import current_run, fields_extracted, runtime_activation
from vllm_console.checks.profile import load_profile
from vllm_console.console.hostside.probes import configs_probe, fields_probe, log_probe

PROFILE = load_profile()
RUNTIME = PROFILE.links.runtime_activation


def _params(path: Path, pid: int | None = None, **extra: Any) -> dict[str, Any]:
    return {**runtime_activation.payload(RUNTIME, str(path), pid), **extra}


def _texts(facts: dict[str, Any]) -> list[str]:
    return [text for _offset, text in facts["lines"]]


def _write_runs(path: Path, runs: list[list[str]], noise: int = 0) -> None:
    with open(path, "w") as fh:
        for i, run in enumerate(runs):
            for line in run:
                fh.write(line + "\n")
            for n in range(noise):
                fh.write(f"(APIServer pid=1) INFO 05-14 10:0{i}:00 [loggers.py:1] Engine 000: "
                         f"Avg prompt throughput: {n}.0 tokens/s, Running: 1 reqs\n")


def _from_last_mark(facts: dict[str, Any]) -> list[str]:
    return [text for offset, text in facts["lines"] if offset >= facts["last_mark"]]


def test_the_current_run_comes_back_and_the_link_reads_only_it(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    old = engine_lines("/m/t", "/m/old", aux=(1, 2, 3, 4, 5), pid=1)
    new = engine_lines("/m/t", "/m/new", extra=["(EngineCore pid=2) ERROR 05-14 10:00:41 "
                                                 "[core.py:1] ValueError: boom"])
    _write_runs(log, [old, new], noise=50)
    facts = log_probe.probe(_params(log))
    data = log.read_bytes()
    assert facts["last_mark"] == data.rfind(b"(EngineCore_DP0 pid=4242) INFO 05-14 10:00:01")
    assert facts["ready_at"] == data.rfind(b"(APIServer pid=4241) INFO:     Application")
    run = current_run.read_run(facts["lines"], RUNTIME)
    assert run.start_offset == data.rfind(b"(APIServer pid=4241) INFO 05-14 10:00:00")
    assert run.engine_draft == "/m/new"
    assert run.aux == (2, 17, 32, 47, 62)
    assert run.exceptions == ("ValueError: boom",)
    assert run.ready


@pytest.mark.parametrize("chunk", [7, 64, 1000, 8 * 1024 * 1024])
def test_chunk_boundaries_never_lose_a_marker_or_a_line(tmp_path: Path, chunk: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_probe, "CHUNK", chunk)
    log = tmp_path / "serve.log"
    _write_runs(log, [engine_lines("/m/t", "/m/a", pid=1), engine_lines("/m/t", "/m/b")],
                noise=20)
    facts = log_probe.probe(_params(log))
    texts = _from_last_mark(facts)
    assert "model='/m/b'" in texts[0]
    assert texts[-1].endswith("Application startup complete.")
    assert len(texts) == 3  # engine start, aux layers, ready
    assert _texts(facts)[-4].startswith("(APIServer pid=4241) INFO 05-14 10:00:00 [utils.py:233] "
                                        "non-default args:")  # the run's first mark, read back


def test_scanning_stops_at_the_end_of_start_up_and_is_bounded(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    after = ["(EngineCore pid=2) ERROR later ValueError: after start-up"] * 5
    _write_runs(log, [engine_lines("/m/t", "/m/d") + after])
    facts = log_probe.probe(_params(log))
    assert not any("after start-up" in t for t in _texts(facts))
    crowded = tmp_path / "crowded.log"
    noise = [f"(EngineCore pid=2) WARNING DFlash note {i}" for i in range(50)]
    _write_runs(crowded, [engine_lines("/m/t", "/m/d", extra=noise)])
    facts = log_probe.probe(_params(crowded, max_lines=10))
    assert len(_from_last_mark(facts)) == 10
    assert facts["dropped"] > 0
    assert facts["ready_at"] is not None
    huge = tmp_path / "huge.log"
    _write_runs(huge, [engine_lines("/m/t", "/m/d", extra=["DFlash " + "x" * 200_000])])
    facts = log_probe.probe(_params(huge, max_line=1000))
    assert max(len(t) for t in _texts(facts)) <= 1000
    # The lines read back before the last mark are bounded too (the newest kept).
    many = tmp_path / "many.log"
    _write_runs(many, [[f"(APIServer pid=1) ERROR ValueError: old {i}" for i in range(50)],
                       engine_lines("/m/t", "/m/d")])
    facts = log_probe.probe(_params(many, max_lines=10))
    before = [t for o, t in facts["lines"] if o < facts["last_mark"]]
    assert len(before) == 10
    assert before[-1].startswith("(APIServer pid=4241) INFO 05-14 10:00:00 [utils.py:233]")


def test_a_restart_marker_after_the_last_engine_start_begins_the_run(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    marker = "[vllm-console] restart at 2026-05-14T10:05:00+00:00 by me@laptop; trace=off"
    _write_runs(log, [engine_lines("/m/t", "/m/old"),
                      [marker, "ModuleNotFoundError: No module named 'torch'"]])
    facts = log_probe.probe(_params(log))
    assert _from_last_mark(facts) == [marker, "ModuleNotFoundError: No module named 'torch'"]
    run = current_run.read_run(facts["lines"], RUNTIME)
    assert run.marker == marker
    assert run.engine_line is None
    assert not run.ready  # the old run's ready line is not this run's
    assert run.exceptions == ("ModuleNotFoundError: No module named 'torch'",)


# vLLM 0.32: a configuration error raised in the API server, after its banner and arguments and
# before any engine line; the uncaught traceback carries no prefix (0.31+).
CONFIG_ERROR_RUN = [
    "(APIServer pid=4300) INFO 12-03 06:01:01 [api_utils.py:70] vLLM server version 0.32.0, "
    "serving model /m/t",
    "(APIServer pid=4300) INFO 12-03 06:01:02 [utils.py:253] non-default args: {'model_tag': "
    "'/m/t', 'model': '/m/t', 'speculative_config': {'method': 'dflash', 'model': '/m/d', "
    "'num_speculative_tokens': 4}, 'max_model_len': 512}",
    "(APIServer pid=4300) INFO 12-03 06:01:03 [model.py:530] Resolved architecture: "
    "Qwen3ForCausalLM",
    "Traceback (most recent call last):",
    '  File "/v/bin/vllm", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/v/lib/python3.12/site-packages/vllm/config/speculative.py", line 400, in '
    "__post_init__",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
    "  Value error, DFlash drafter /m/d has 5 layers but layer_types lists 4 "
    "[type=value_error, input_value=ArgsKwargs((), {'model': '/m/d'}), input_type=ArgsKwargs]",
    "    For further information visit https://errors.pydantic.dev/2.11/v/value_error",
]


def test_a_start_up_that_dies_before_its_engine_line_is_the_current_run(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    _write_runs(log, [engine_lines("/m/t", "/m/old", aux=(1, 2, 3, 4, 5)), CONFIG_ERROR_RUN])
    facts = log_probe.probe(_params(log))
    run = current_run.read_run(facts["lines"], RUNTIME)
    assert run.start_offset == log.read_bytes().find(b"(APIServer pid=4300)")
    assert run.version == "0.32.0"
    assert (run.engine_line, run.aux, run.ready) == (None, None, False)
    assert run.exceptions == (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for "
        "SpeculativeConfig — Value error, DFlash drafter /m/d has 5 layers but layer_types "
        "lists 4",)


LOGO = ["       █     █     █▄   ▄█",
        " ▄▄ ▄█ █     █     █ ▀▄▀ █  version \x1b[97m0.33.0\x1b[0m",
        "  █▄█▀ █     █     █     █  model   \x1b[97m/m/t\x1b[0m",
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀"]


def test_a_run_announced_by_the_logo_banner(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    tag = "\x1b[0;36m(APIServer pid=4400)\x1b[0;0m INFO 12-03 06:02:01 [startup.py:38] "
    run = [tag + row for row in LOGO] + ["ValueError: the logo's run failed"]
    _write_runs(log, [engine_lines("/m/t", "/m/old"), run])
    facts = log_probe.probe(_params(log))
    read = current_run.read_run(facts["lines"], RUNTIME)
    # The run begins at the logo's `version` row (the row above it is drawing only).
    assert read.start_offset == log.read_bytes().find((tag + LOGO[1]).encode())
    assert read.version == "0.33.0"
    assert (read.engine_line, read.exceptions) == (None, ("ValueError: the logo's run failed",))


def test_no_start_marker_brings_back_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("usage: vllm serve [-h]\nvllm: error: unrecognized arguments\n"
                   "ValueError: bad flag\n")
    facts = log_probe.probe(_params(log))
    assert facts["last_mark"] is None
    assert facts["tail_only"] is True
    assert _texts(facts) == ["ValueError: bad flag"]


def test_missing_directory_and_empty_logs(tmp_path: Path) -> None:
    assert log_probe.probe(_params(tmp_path / "nope.log"))["log"]["state"] == "missing"
    assert log_probe.probe(_params(tmp_path))["log"]["state"] == "is-a-directory"
    empty = tmp_path / "empty.log"
    empty.write_text("")
    facts = log_probe.probe(_params(empty))
    assert facts["last_mark"] is None
    assert facts["lines"] == []


@pytest.mark.programs
def test_a_log_rotated_away_is_read_through_the_process(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    lines = tmp_path / "lines.txt"
    lines.write_text("\n".join(engine_lines("/m/t", "/m/current")) + "\n")
    with open(log, "wb") as out:
        proc = subprocess.Popen([HOST_PYTHON, "-c", "import sys, time; "
                                 f"sys.stdout.write(open({str(lines)!r}).read()); "
                                 "sys.stdout.flush(); time.sleep(60)"], stdout=out)
    try:
        deadline = time.monotonic() + 10
        while b"startup complete" not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        log.unlink()
        log.write_text("a new, empty file took the name\n")  # logrotate's `create`
        facts = log_probe.probe(_params(log, pid=proc.pid))
    finally:
        proc.kill()
        proc.wait()
    assert facts["log"]["via"] == f"/proc/{proc.pid}/fd/1"
    assert any("model='/m/current'" in text for text in _texts(facts))


# -- configs probe -------------------------------------------------------------------------------

def test_configs_from_dirs_files_the_hub_cache_and_the_serve_cwd(tmp_path: Path) -> None:
    model = tmp_path / "models" / "draft"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"a": 1}')
    hub = tmp_path / "hf" / "hub" / "models--z-lab--Qwen3.6-27B-DFlash"
    (hub / "refs").mkdir(parents=True)
    (hub / "refs" / "main").write_text("abc123")
    (hub / "snapshots" / "abc123").mkdir(parents=True)
    (hub / "snapshots" / "abc123" / "config.json").write_text('{"hub": true}')
    (tmp_path / "emptydir").mkdir()
    env = {"HF_HOME": str(tmp_path / "hf")}
    answer = configs_probe.probe({"items": {
        "dir": {"model": str(model)},
        "file": {"model": str(model / "config.json")},
        "hub": {"model": "z-lab/Qwen3.6-27B-DFlash", "env": env},
        "relative": {"model": "models/draft", "cwd": str(tmp_path)},
        "noconfig": {"model": str(tmp_path / "emptydir")},
        "absent": {"model": str(tmp_path / "absent")},
        "nohub": {"model": "z-lab/Unknown", "env": env},
    }})
    assert answer["dir"]["state"] == "ok"
    assert answer["dir"]["text"] == '{"a": 1}'
    assert answer["file"]["source"] == "file"
    assert answer["hub"]["source"] == "hub cache"
    assert json.loads(answer["hub"]["text"]) == {"hub": True}
    assert answer["relative"]["path"] == str(model / "config.json")
    assert answer["noconfig"]["state"] == "no-config"
    assert answer["absent"]["state"] == "not-found"
    assert answer["nohub"]["state"] == "not-found"
    assert answer["nohub"]["looked"].endswith("models--z-lab--Unknown")
    big = configs_probe.read_model_config(str(model), {}, max_bytes=3)
    assert big["state"] == "too-big"


# -- fields probe --------------------------------------------------------------------------------

def _fields(python: Path | str, config: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "draft" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(config))
    spec = PROFILE.links.fields_extracted
    return run_script("probe-fields", python,
                      fields_extracted.payload(spec, str(path), "vllm"))


@pytest.mark.programs
def test_speculators_extraction_that_keeps_or_drops_the_fields(tmp_path: Path) -> None:
    keeps = make_install(tmp_path / "keeps")
    facts = _fields(keeps.python, draft_config("speculators"), tmp_path)
    assert facts["format"] == "speculators"
    assert facts["extraction"]["values"]["sliding_window"] == 2048
    assert facts["extraction"]["absent"] == ["max_window_layers"]
    assert facts["static"]["mentions"]["layer_types"] is True
    drops = make_install(tmp_path / "drops", algos_keeps=False)
    facts = _fields(drops.python, draft_config("speculators"), tmp_path)
    assert facts["extraction"]["values"] == {}
    assert set(facts["source"]) == {"layer_types", "use_sliding_window", "sliding_window"}


@pytest.mark.programs
def test_an_interpreter_that_cannot_import_vllm(tmp_path: Path) -> None:
    broken = make_install(tmp_path, import_breaks=True)
    facts = _fields(broken.python, draft_config("speculators"), tmp_path)
    error = facts["extraction"]["error"]
    assert error["kind"] == "import"
    assert error["type"] == "ImportError"
    assert "torch" in error["message"]
    facts = _fields(HOST_PYTHON, draft_config("speculators"), tmp_path)
    assert facts["extraction"]["error"]["type"] == "ModuleNotFoundError"


@pytest.mark.programs
def test_native_configs_are_rebuilt_with_the_hosts_transformers(tmp_path: Path) -> None:
    install = make_install(tmp_path)
    fake = install.site / "transformers"
    fake.mkdir(exist_ok=True)
    # An HF-like AutoConfig that drops sliding_window unless use_sliding_window, as
    # Qwen3Config does.
    (fake / "__init__.py").write_text(
        "import json, os\n__version__ = '4.57.1'\n"
        "class _Config:\n"
        "    def __init__(self, d): self.d = d\n"
        "    def to_dict(self): return dict(self.d)\n"
        "class AutoConfig:\n"
        "    @staticmethod\n"
        "    def from_pretrained(path):\n"
        "        d = json.load(open(os.path.join(path, 'config.json')))\n"
        "        if not d.get('use_sliding_window'): d['sliding_window'] = None\n"
        "        return _Config(d)\n")
    keeps = _fields(install.python, draft_config("healthy"), tmp_path)
    assert keeps["extraction"]["transformers"] == "4.57.1"
    assert keeps["extraction"]["values"]["sliding_window"] == 2048
    no_flag = {**draft_config("healthy"), "use_sliding_window": False}
    drops = _fields(install.python, no_flag, tmp_path)
    assert drops["extraction"]["values"]["sliding_window"] is None


def test_the_fields_probe_reports_a_bad_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    assert fields_probe.read_config(str(path))[1]["state"] == "invalid"
    assert fields_probe.read_config(str(tmp_path / "no.json"))[1]["state"] == "missing"
    path.write_text("[1, 2]")
    assert fields_probe.read_config(str(path))[1]["state"] == "not-an-object"


@pytest.mark.programs
def test_output_printed_by_imports_does_not_corrupt_the_answer(tmp_path: Path) -> None:
    install = make_install(tmp_path)
    base = install.pkg / "transformers_utils/configs/speculators/base.py"
    base.write_text("import os\nos.write(1, b'INFO vllm says hello\\n')\nprint('{\"x\": 1}')\n"
                    + base.read_text())
    facts = _fields(install.python, draft_config("speculators"), tmp_path)
    assert facts["extraction"]["values"]["sliding_window"] == 2048  # parsed despite the noise


def test_a_config_nested_too_deep_is_invalid_with_the_depth_named(tmp_path: Path) -> None:
    """200k levels of nesting: Python's JSON reader raises RecursionError, which two links
    reported as an internal error. It is an invalid config, and the message says why."""
    import sys

    from vllm_console.checks.configs import parse_read
    from vllm_console.console.transport.remote_scripts import ScriptRun

    path = tmp_path / "config.json"
    path.write_text('{"a":' * 200_000 + "1" + "}" * 200_000)
    data, info = fields_probe.read_config(str(path))
    assert data is None
    assert info["state"] == "invalid"
    limit = sys.getrecursionlimit()
    assert info["error"] == f"nested deeper than {limit} levels"
    read = parse_read("draft", {"state": "ok", "model": str(tmp_path), "path": str(path),
                                "text": path.read_text()}, ScriptRun("probe", 0), "gpu1")
    assert read.data is None
    assert read.problem == f"{path} is not valid JSON: nested deeper than {limit} levels"
