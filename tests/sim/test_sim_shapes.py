"""The simulated host prints what the real engine prints: each line of the sim's log, classified by
the parsers, is of a kind (event, phase or error kind, process, level) that the real release's
own logging code prints (tests/data/real_formats), and the real kinds all appear in the sim's."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from vllm_console.console.parsers import LineKind, classify_text, split_lines
from vllm_console.console.sim import materialise, start_background, stop, wait_ready
from vllm_console.console.sim.tree import SimTree

pytestmark = pytest.mark.programs  # each test starts a simulated server

DATA = Path(__file__).parents[1] / "data" / "real_formats"
FAST = {"startup_s": 0.5, "metrics_interval_s": 0.3}
Shape = tuple[LineKind, str | None, str | None, str | None]
# The V1 model runner's own start-up lines (`Starting to load model`, `Loading weights took`,
# `Loading drafter model...`), which the samples (V2 runner, the default since 0.30) lack.
V1_RUNNER = {(LineKind.STARTUP, "loading-drafter", "EngineCore", "INFO"),
             (LineKind.STARTUP, "loading-weights", "EngineCore", "INFO")}
# A stop's lines (real 0.32's launcher: `[shutdown] API server: shutdown triggered`, before it
# stops the engine; uvicorn's `Shutting down`), which the samples lack: they end while their
# server runs. The real engine's are read in tests/real_vllm/test_real_vllm_restart.py.
STOP = {(LineKind.SHUTDOWN, None, "APIServer", "INFO"), (LineKind.SHUTDOWN, None, None, "INFO")}


def shapes(lines: Iterable[str]) -> set[Shape]:
    """What kinds of lines these are: every line the parsers read as more than OTHER/WARNING."""
    out = set()
    for line in lines:
        ev = classify_text(line)
        if ev.kind in (LineKind.OTHER, LineKind.WARNING):
            continue
        sub = getattr(ev.payload, "phase", None) or getattr(ev.payload, "kind", None)
        out.add((ev.kind, None if sub is None else str(sub), ev.line.proc, ev.line.level))
    return out


def real(version: str, name: str) -> set[Shape]:
    return shapes(split_lines((DATA / version / name).read_bytes()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(tree: SimTree, env: dict[str, str] | None = None, ready: bool = True) -> list[str]:
    proc = start_background(tree, env=env)
    try:
        if ready:
            assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
            deadline = time.monotonic() + 15
            while "SpecDecoding metrics" not in tree.log.read_text():
                assert time.monotonic() < deadline, "no SpecDecoding line"
                time.sleep(0.05)
        else:
            assert proc.wait(timeout=30) == 1
    finally:
        stop(proc, timeout=5)
        stop(tree, timeout=5)
    return split_lines(tree.log.read_bytes())


def describe(found: set[Shape]) -> str:
    return "\n".join(sorted(map(str, found)))


def test_033_serving_prints_what_real_033_prints(tmp_path: Path) -> None:
    tree = materialise("upstream-mixed-swa-v1-runner", tmp_path / "h", port=free_port(), **FAST)
    sim = shapes(run(tree, env={"VLLM_USE_V2_MODEL_RUNNER": "1"}))
    want = real("0.33.0", "serve.log")
    assert sim - want - STOP == set(), "the sim prints kinds of lines real 0.33 does not:\n" + \
        describe(sim - want - STOP)
    assert want - sim == set(), "real 0.33 prints kinds of lines the sim does not:\n" + \
        describe(want - sim)


def test_033_refusal_prints_what_real_033_prints(tmp_path: Path) -> None:
    tree = materialise("upstream-mixed-swa-v1-runner", tmp_path / "h", port=free_port(), **FAST)
    lines = run(tree, ready=False)
    sim = shapes(lines)
    failure = real("0.33.0", "failure.log")
    allowed = failure | real("0.33.0", "serve.log") | V1_RUNNER
    assert sim - allowed == set(), describe(sim - allowed)
    assert failure - sim == set(), describe(failure - sim)
    assert not any("does not yet support" in ln for ln in lines)  # V1 chosen, no fallback


@pytest.mark.parametrize("scenario", ["healthy", "incident"])
def test_pre_031_builds_prefix_every_line_like_030(tmp_path: Path, scenario: str) -> None:
    """The PR-branch build predates 0.31: a stdout wrapper prefixes every line, uvicorn's too."""
    tree = materialise(scenario, tmp_path / "h", port=free_port(), **FAST)
    sim = shapes(run(tree))
    want = real("0.30.0", "serve.log")
    assert sim - want - V1_RUNNER - STOP == set(), describe(sim - want - V1_RUNNER - STOP)
    banner = {s for s in want if s[0] is LineKind.VERSION}
    assert want - banner - sim == set(), describe(want - banner - sim)


def _launch_without_runner_choice(tree: SimTree, argv: list[str]) -> subprocess.Popen[bytes]:
    """The server as an operator starts it who never set VLLM_USE_V2_MODEL_RUNNER."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_USE_V2_MODEL_RUNNER"}
    with open(tree.log, "ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=tree.root,
                                env=env, start_new_session=True)


def test_033_runner_choice_follows_the_real_rules(tmp_path: Path) -> None:
    """0.33 runs the V2 runner unless told not to (VLLM_USE_V2_MODEL_RUNNER=0) or asked for what
    V2 lacks (--enable-dbo, with a warning): only on V1 is a mixed sliding/full DFlash drafter
    refused, by the engine config in the API server."""
    tree = materialise("upstream-mixed-swa-v1-runner", tmp_path / "h", port=free_port(), **FAST)
    argv = tree.serve_argv()
    proc = _launch_without_runner_choice(tree, argv)
    try:
        assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
    finally:
        stop(proc, timeout=5)
    text = tree.log.read_text()
    assert "Loading model from scratch..." in text
    assert "Starting to load model" not in text
    assert "Using Eagle3 auxiliary layers from config: (2, 17, 32, 47, 62)" in text
    assert "does not yet support" not in text
    tree.log.write_text("")
    proc = _launch_without_runner_choice(tree, [*argv, "--enable-dbo"])
    try:
        assert proc.wait(timeout=30) == 1
    finally:
        stop(proc, timeout=5)
        stop(tree, timeout=5)
    lines = split_lines(tree.log.read_bytes())
    fallback = [ln for ln in lines if "does not yet support" in ln]
    assert [(classify_text(ln).line.proc, classify_text(ln).line.level) for ln in fallback] \
        == [("APIServer", "WARNING")]
    assert fallback[0].endswith("Model Runner V2 does not yet support dual batch overlap; "
                                "using the V1 model runner instead.")
    refusal = [classify_text(ln) for ln in lines if "Model Runner V1 does not support" in ln]
    assert [e.kind for e in refusal] == [LineKind.ERROR]
    assert "Initializing a V1 LLM engine" not in "\n".join(lines)  # no engine started


@pytest.mark.parametrize("scenario", ["healthy", "upstream-mixed-swa-v1-runner"])
def test_colour_only_when_asked_for(tmp_path: Path, scenario: str) -> None:
    plain = materialise(scenario, tmp_path / "plain", port=free_port(), **FAST)
    lines = run(plain, ready=scenario == "healthy")
    assert not any("\x1b" in line for line in lines)
    plain_shapes = shapes(lines)
    coloured = materialise(scenario, tmp_path / "colour", port=free_port(), color=True, **FAST)
    assert coloured.serve_env()["VLLM_LOGGING_COLOR"] == "1"
    lines = run(coloured, ready=scenario == "healthy")
    tagged = [line for line in lines if line.startswith("\x1b[0;36m(APIServer pid=")]
    assert tagged
    if scenario != "healthy":  # 0.31+: the formatter paints the level and the time too
        assert any("\x1b[32mINFO\x1b[0m \x1b[90m" in line for line in tagged)
    assert shapes(lines) == plain_shapes  # colour changes how lines look, not what they are


def test_spec_flags_on_a_030_plus_build(tmp_path: Path) -> None:
    """`--spec-method/--spec-model/--spec-tokens` (0.30+): logged as such in `non-default args`,
    and the console reads the speculative config from them as from the engine line."""
    tree = materialise("upstream-mixed-swa-v1-runner", tmp_path / "h", port=free_port(), **FAST)
    argv = tree.serve_argv()
    at = argv.index("--speculative-config")
    argv[at:at + 2] = ["--spec-method", "dflash", "--spec-model", str(tree.draft),
                       "--spec-tokens", "15"]
    proc = start_background(tree, argv=argv, env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    try:
        assert wait_ready(tree, proc, timeout=30), tree.log.read_text()[-3000:]
    finally:
        stop(proc, timeout=5)
        stop(tree, timeout=5)
    events = [classify_text(line) for line in split_lines(tree.log.read_bytes())]
    args = next(e.payload for e in events if e.kind is LineKind.NON_DEFAULT_ARGS)
    engine = next(e.payload for e in events if e.kind is LineKind.ENGINE_START)
    assert args.args["spec_method"] == "dflash"
    assert "speculative_config" not in args.args
    assert args.speculative == engine.speculative
    assert (engine.speculative.method, engine.speculative.model,
            engine.speculative.num_spec_tokens) == ("dflash", str(tree.draft), 15)
