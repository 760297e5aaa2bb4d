"""The parsers wired into telemetry, on real-format vLLM lines (docs/vllm-facts.md): the current
run's engine config, spec decode in its three states (zeros never shown as data), start-up phases
timed by the log's own stamps, failures, and a new run resetting it all."""

from __future__ import annotations

import calendar
import time

import pytest

from vllm_console.console.parsers.metrics import SpecDecodeCounters, diff_counters
from vllm_console.console.parsers.redact import REDACTED
from vllm_console.console.parsers.startup import StartupPhase
from vllm_console.console.telemetry.logclock import LogClock
from vllm_console.console.telemetry.run_log import Changed, RunLog
from vllm_console.console.telemetry.spec_decode import SpecDecodeStatus, SpecSource
from vllm_console.console.telemetry.startup import StartupState, format_duration

API = "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 05-14 10:{}:{} [api_server.py:1] "
CORE = "(EngineCore_DP0 pid=7) INFO 05-14 10:{}:{} [core.py:2] "
BANNER = "vLLM API server version 0.1.dev16016+g3cfc8f8b7"
ARGS = ("non-default args: {'model': '/root/models/Qwen3.6-27B', 'speculative_config': "
        "{'method': 'dflash', 'model': '/root/models/Qwen3.6-27B-DFlash', "
        "'num_speculative_tokens': 15}, 'api_key': ['sk-secret']}")
ENGINE = ("Initializing a V1 LLM engine (v0.1.dev16016+g3cfc8f8b7) with config: "
          "model='/root/models/Qwen3.6-27B', speculative_config=SpeculativeConfig("
          "method='dflash', model='/root/models/Qwen3.6-27B-DFlash', num_spec_tokens=15), "
          "tokenizer='/root/models/Qwen3.6-27B', dtype=torch.bfloat16, seed=None, "
          "enforce_eager=False")
ENGINE_NO_SPEC = ENGINE.split("speculative_config=")[0] + "speculative_config=None, seed=0"
SPEC = ("SpecDecoding metrics: Mean acceptance length: 2.63, Accepted throughput: 76.80 "
        "tokens/s, Drafted throughput: 235.49 tokens/s, Accepted: 768 tokens, Drafted: 2355 "
        "tokens, Per-position acceptance rate: 0.726, 0.467, 0.240, 0.134, 0.064, Avg Draft "
        "acceptance rate: 32.6%")
SPEC_OLD = ("SpecDecoding metrics: Draft acceptance rate: 38.8%, Mean acceptance length: 2.16, "
            "Accepted: 150 tokens, Drafted: 387 tokens, Per-position acceptance rate: 0.543, "
            "0.357, 0.264")
SPEC_V0 = ("Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.598, "
           "Number of speculative tokens: 5, Number of accepted tokens: 321, Number of draft "
           "tokens: 500, Number of emitted tokens: 600.")
SPEC_IDLE = ("SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 "
             "tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 "
             "tokens, Per-position acceptance rate: 0.000, 0.000, Avg Draft acceptance rate: 0.0%")
THROUGHPUT = ("Engine 000: Avg prompt throughput: 131.0 tokens/s, Avg generation throughput: "
              "19.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
              "Prefix cache hit rate: 36.2%")
T0 = calendar.timegm((2026, 5, 14, 10, 0, 0, 0, 0, 0))


def at(minute: int, second: int) -> tuple[str, str]:
    return f"{minute:02d}", f"{second:02d}"


def api(m: int, s: int, text: str) -> str:
    return API.format(*at(m, s)) + text


def core(m: int, s: int, text: str) -> str:
    return CORE.format(*at(m, s)) + text


def run_log() -> RunLog:
    return RunLog(LogClock(tz_offset_s=0, skew_s=T0 + 3600 - time.time()), stall_after_s=150)


def feed(log: RunLog, *lines: str) -> Changed:
    return log.feed_texts(list(lines))[1]


def test_engine_config_version_and_secrets() -> None:
    log = run_log()
    changed = feed(log, api(0, 0, BANNER), api(0, 0, ARGS), core(0, 5, ENGINE),
                   core(1, 0, "Using auxiliary layers from speculative config: (2, 17, 32, 47, "
                              "62)"))
    assert changed & Changed.NEW_RUN
    info = log.info
    assert info.version == "0.1.dev16016+g3cfc8f8b7"
    assert info.model == "/root/models/Qwen3.6-27B"
    assert info.engine_json()["speculative_config"] == {
        "method": "dflash", "model": "/root/models/Qwen3.6-27B-DFlash", "num_spec_tokens": 15}
    assert info.args is not None
    assert info.args.args["api_key"] == REDACTED
    assert info.aux_layers == (2, 17, 32, 47, 62)
    assert info.started_at == T0


def test_not_configured_then_no_evidence_then_active() -> None:
    log = run_log()
    feed(log, core(0, 5, ENGINE_NO_SPEC))
    state = log.spec.state()
    assert state.status is SpecDecodeStatus.NOT_CONFIGURED
    assert state.to_json() is None
    log = run_log()
    feed(log, api(0, 0, ARGS), core(0, 5, ENGINE), api(1, 0, SPEC_IDLE))
    state = log.spec.state()
    assert state.status is SpecDecodeStatus.NO_EVIDENCE
    assert state.latest is None
    assert state.history == ()
    assert state.to_json() is None
    assert "no drafts seen yet" in state.summary
    feed(log, api(1, 10, SPEC))
    state = log.spec.state()
    assert state.status is SpecDecodeStatus.ACTIVE
    assert state.to_json() == {"mean_acceptance_length": 2.63,
                               "draft_acceptance_rate_pct": 32.6,
                               "per_position": [0.726, 0.467, 0.24, 0.134, 0.064],
                               "accepted_tokens": 768, "drafted_tokens": 2355}
    assert state.latest_source is SpecSource.LOG
    assert state.latest_at == T0 + 70
    feed(log, api(1, 20, SPEC_IDLE))  # idle again: the last real figures stay
    assert log.spec.state().latest == state.latest


@pytest.mark.parametrize(("line", "length", "rate"), [
    (SPEC_OLD, 2.16, 38.8),
    (SPEC_V0, None, 64.2),
])
def test_older_spec_decode_formats(line: str, length: float | None, rate: float) -> None:
    log = run_log()
    feed(log, api(0, 0, ARGS), api(0, 10, line))
    state = log.spec.state()
    assert state.status is SpecDecodeStatus.ACTIVE
    assert state.latest is not None
    assert state.latest.mean_acceptance_length == length
    assert state.latest.draft_acceptance_rate_pct == pytest.approx(rate)


def test_metrics_deltas_feed_the_same_state() -> None:
    log = run_log()
    feed(log, core(0, 5, ENGINE))
    before = SpecDecodeCounters(100, 1500, 17, (15, 2))
    after = SpecDecodeCounters(200, 3000, 34, (29, 5))
    sample = diff_counters(before, after, 5.0)
    assert sample is not None
    assert log.spec.feed(sample, T0 + 100, SpecSource.METRICS)
    state = log.spec.state()
    assert state.latest is not None
    assert state.latest.mean_acceptance_length == pytest.approx(1.17)
    assert [p.source for p in state.history] == [SpecSource.METRICS]
    assert diff_counters(after, after, 5.0) is None  # idle between scrapes: nothing to show


def test_a_new_run_resets_the_picture() -> None:
    log = run_log()
    feed(log, api(0, 0, ARGS), core(0, 5, ENGINE), api(1, 0, SPEC), api(1, 5, THROUGHPUT))
    assert log.spec.state().status is SpecDecodeStatus.ACTIVE
    assert log.info.throughput is not None
    changed = feed(log, api(9, 0, BANNER), api(9, 0, ARGS))
    assert changed & Changed.NEW_RUN
    assert log.info.started_at == T0 + 540
    assert log.info.throughput is None
    assert log.info.engine is None
    state = log.spec.state()
    assert state.status is SpecDecodeStatus.NO_EVIDENCE
    assert state.history == ()
    # A second engine core of the same run (data parallel) is not a new run.
    feed(log, core(9, 5, ENGINE))
    assert not feed(log, core(9, 5, ENGINE.replace("pid=7", "pid=8"))) & Changed.NEW_RUN


def test_throughput_is_load_not_a_run_change() -> None:
    log = run_log()
    feed(log, core(0, 5, ENGINE))
    assert feed(log, api(1, 0, THROUGHPUT)) == Changed.LOAD


def test_startup_phases_timed_by_the_log() -> None:
    log = run_log()
    feed(log, api(0, 0, ARGS), core(0, 5, ENGINE),
         core(0, 10, "Starting to load model /root/models/Qwen3.6-27B..."),
         core(0, 20, "Loading safetensors checkpoint shards:  50% Completed | 7/14 "
                     "[00:10<00:10, 1.43s/it]"))
    status = log.startup.status(T0 + 140, running=True)
    assert status.state is StartupState.STARTING
    assert status.phase is StartupPhase.LOADING_WEIGHTS
    assert status.text == "loading weights 2m10s"
    assert status.stalled_s is None
    stalled = log.startup.status(T0 + 20 + 150, running=True)
    assert stalled.text == "loading weights 2m40s · stalled 150 s"
    feed(log, core(2, 30, "Loading weights took 138.88 seconds"),
         core(2, 31, "Loading drafter model..."),
         core(2, 45, "Model loading took 21.91 GiB memory and 152.09 seconds"),
         core(3, 0, "GPU KV cache size: 1,470,588 tokens"),
         core(3, 7, "Graph capturing finished in 7 secs, took 0.64 GiB"),
         core(3, 8, "init engine (profile, create kv cache, warmup model) took 205.24 s"),
         api(3, 9, "Starting vLLM server on http://0.0.0.0:8000"))
    status = log.startup.status(T0 + 190, running=True)
    assert status.text == "starting API server 2s"  # since the engine was ready
    # One step a phase, counted by the restart report's rule: the weights' first line names
    # the model, vLLM's own duration lands on that step, not on a second one.
    steps = status.steps
    assert [s.phase for s in steps][:3] == [StartupPhase.ENGINE_START,
                                            StartupPhase.LOADING_WEIGHTS,
                                            StartupPhase.LOADING_DRAFTER]
    assert (steps[1].detail, steps[1].seconds) == ("/root/models/Qwen3.6-27B", 138.88)
    feed(log, "(APIServer pid=1) INFO:     Application startup complete.")
    status = log.startup.status(T0 + 400, running=True)
    assert status.state is StartupState.READY
    assert status.text == "ready (started in 3m09s)"
    assert log.startup.status(T0 + 400, running=False).state is StartupState.EXITED


def test_a_dflash_refusal_is_the_failure_kept() -> None:
    log = run_log()
    feed(log, api(0, 0, ARGS), core(0, 5, ENGINE),
         core(0, 9, "Traceback (most recent call last):"),
         core(0, 9, "NotImplementedError: DFlash drafters with mixed sliding/full attention "
                    "require the V2 model runner; relaunch with VLLM_USE_V2_MODEL_RUNNER=1."),
         core(0, 9, "EngineCore failed to start."),
         api(0, 10, "RuntimeError: Engine core initialization failed. See root cause above."))
    status = log.startup.status(T0 + 12, running=True)
    assert status.state is StartupState.FAILED
    assert status.failure is not None
    assert "V2 model runner" in status.failure
    assert log.startup.status(T0 + 30, running=False).text.startswith("exited: ")
    assert any(e.dflash for e in log.info.errors)


def test_log_clock_stamps_on_the_hosts_clock() -> None:
    clock = LogClock(tz_offset_s=2 * 3600)  # the host runs at UTC+2
    now = calendar.timegm((2026, 1, 1, 0, 0, 30, 0, 0, 0))
    assert clock.epoch("01-01 02:00:00", now) == now - 30
    # Just after new year on the host, a December stamp is last year's.
    assert clock.epoch("12-31 23:59:00", now) == calendar.timegm(
        (2025, 12, 31, 21, 59, 0, 0, 0, 0))
    assert clock.epoch("13-45 99:00:00", now) is None
    assert clock.epoch(None, now) is None


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (45.9, "45s"), (130, "2m10s"),
                                               (3725, "1h02m")])
def test_durations(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_per_request_lines_are_never_evidence() -> None:
    log = run_log()
    feed(log, core(0, 5, ENGINE))
    prompt = api(1, 0, "Received request chatcmpl-1: prompt: '" + SPEC.replace(
        "2.63", "9.99") + "', params: SamplingParams(n=1)")
    access = ('(APIServer pid=1) INFO:     127.0.0.1:4242 - "GET /Initializing%20a%20V1%20LLM'
              '%20engine HTTP/1.1" 404 Not Found')
    notable, changed = log.feed_texts([prompt, access, api(1, 1, SPEC)])
    assert [i for i, _ in notable] == [2]
    assert changed & Changed.SPEC
    state = log.spec.state()
    assert state.latest is not None
    assert state.latest.mean_acceptance_length == 2.63
    assert len(state.history) == 1


def test_only_the_newest_throughput_line_of_a_batch_is_read() -> None:
    log = run_log()
    lines = [api(1, i, THROUGHPUT.replace("Running: 1 reqs", f"Running: {i} reqs"))
             for i in range(5)]
    lines.insert(2, api(1, 2, SPEC))  # speaks of throughput too, and counts
    notable, changed = log.feed_texts(lines)
    assert changed & Changed.LOAD
    assert changed & Changed.SPEC
    assert log.info.throughput is not None
    assert log.info.throughput.running == 4
    assert [i for i, _ in notable] == [2, 5]


# -- the current run: one rule with the chain (issue 19) ------------------------------------------

API_NOPREFIX = "(APIServer pid=4242) INFO 05-14 10:{}:{} [utils.py:253] "
# vLLM 0.31+: the API server's uncaught traceback carries no prefix (docs/vllm-facts.md).
CONFIG_ERROR = [
    "Traceback (most recent call last):",
    '  File "/v/bin/vllm", line 8, in <module>',
    "    sys.exit(main())",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
    "  Value error, DFlash needs num_speculative_tokens <= 16 [type=value_error, "
    "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
]
RESTART = "[vllm-console] restart at 2026-05-14T10:20:00+00:00 by me@laptop; trace=off"


def test_a_start_up_that_dies_before_its_engine_line_is_the_current_run_and_failed() -> None:
    log = run_log()
    feed(log, api(0, 0, BANNER), api(0, 0, ARGS), core(0, 5, ENGINE),
         "(APIServer pid=1) INFO:     Application startup complete.")
    assert log.startup.status(T0 + 60, running=True).state is StartupState.READY
    changed = feed(log, api(9, 0, BANNER), api(9, 0, ARGS), *CONFIG_ERROR)
    assert changed & Changed.NEW_RUN
    assert log.info.started_at == T0 + 540
    assert log.info.engine is None
    status = log.startup.status(T0 + 545, running=True)
    assert status.state is StartupState.FAILED
    assert status.failure == ("pydantic_core._pydantic_core.ValidationError: 1 validation error "
                              "for SpeculativeConfig")
    # The ValidationError, then its reason (`  Value error, ...`), each an error of the run.
    assert [e.exception_type for e in log.info.errors][-2:] == [
        "pydantic_core._pydantic_core.ValidationError", "ValueError"]


def test_each_failed_start_up_is_a_run_of_its_own() -> None:
    log = run_log()
    feed(log, api(0, 0, BANNER), api(0, 0, ARGS), "ValueError: first attempt")
    assert feed(log, api(1, 0, BANNER), api(1, 0, ARGS), "RuntimeError: second attempt") \
        & Changed.NEW_RUN
    assert log.info.started_at == T0 + 60
    assert [e.message for e in log.info.errors] == ["RuntimeError: second attempt"]
    assert log.startup.status(T0 + 61, running=True).failure == "RuntimeError: second attempt"
    # A relaunch that dies before vLLM writes a line: the restart marker alone is a run.
    assert feed(log, RESTART) & Changed.NEW_RUN
    assert feed(log, RESTART.replace("10:20", "10:21")) & Changed.NEW_RUN
    assert log.startup.status(T0 + 1261, running=True).state is StartupState.STARTING


def test_the_consoles_restart_marker_starts_a_run() -> None:
    log = run_log()
    feed(log, api(0, 0, ARGS), core(0, 5, ENGINE),
         "(APIServer pid=1) INFO:     Application startup complete.")
    changed = feed(log, RESTART, "ModuleNotFoundError: No module named 'torch'")
    assert changed & Changed.NEW_RUN
    assert log.info.started_at == T0 + 1200  # the marker's own time
    assert log.startup.status(T0 + 1201, running=False).failure == (
        "ModuleNotFoundError: No module named 'torch'")
    # The relaunch's banner, arguments and engine line go on with the run the marker began.
    log = run_log()
    feed(log, RESTART)
    for line in (api(20, 1, BANNER), api(20, 1, ARGS), core(20, 5, ENGINE)):
        assert not feed(log, line) & Changed.NEW_RUN
    assert log.info.started_at == T0 + 1200
    assert log.info.engine is not None


def test_an_exception_the_api_server_went_on_from_is_no_failure() -> None:
    log = run_log()
    feed(log, api(0, 0, BANNER), api(0, 0, ARGS), "ValueError: logged and handled")
    assert log.startup.status(T0 + 1, running=True).state is StartupState.FAILED
    assert not feed(log, core(0, 5, ENGINE)) & Changed.NEW_RUN
    assert log.startup.status(T0 + 6, running=True).state is StartupState.STARTING
    # Once the engine runs, an exception alone (a request's) does not end the start-up.
    feed(log, core(0, 9, "ValueError: a bad request"))
    assert log.startup.status(T0 + 10, running=True).state is StartupState.STARTING
