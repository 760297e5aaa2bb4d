"""The log-line prefix, escape stripping and line splitting."""

from __future__ import annotations

import pytest

from vllm_console.console.parsers import LineAssembler, parse_line, split_lines, strip_ansi

PROCS = [
    "APIServer",
    "EngineCore",
    "EngineCore_DP0",
    "EngineCore_DP1",
    "Worker_TP0",
    "Worker_TP1",
    "Worker_TP0_EP0",
    "VllmWorker rank=1",
    "VllmWorker TP0 rank=0",
]


@pytest.mark.parametrize("proc", PROCS)
def test_every_process_tag(proc: str) -> None:
    line = parse_line(f"({proc} pid=2817) INFO 05-14 10:02:03 [core.py:93] Waiting for work.")
    assert line.proc == proc
    assert line.pid == 2817
    assert line.level == "INFO"
    assert line.timestamp == "05-14 10:02:03"
    assert line.source == "core.py:93"
    assert line.message == "Waiting for work."


def test_ansi_coloured_tag_is_stripped() -> None:
    raw = (
        "\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m \x1b[32mINFO\x1b[0m 05-14 10:02:03 "
        "[gpu_model_runner.py:2602] Model loading took 21.91 GiB memory and 152.09 seconds"
    )
    line = parse_line(raw)
    assert line.raw == raw
    assert "\x1b" not in line.text
    assert (line.proc, line.pid, line.level) == ("EngineCore_DP0", 7, "INFO")
    assert line.source == "gpu_model_runner.py:2602"
    assert line.message.startswith("Model loading took")


def test_debug_relative_path_with_ellipsis() -> None:
    line = parse_line(
        "(EngineCore_DP0 pid=7) DEBUG 05-14 10:02:03 [...vllm/v1/engine/core.py:512] "
        "EngineCore waiting for work."
    )
    assert line.level == "DEBUG"
    assert line.source == "...vllm/v1/engine/core.py:512"
    assert line.message == "EngineCore waiting for work."


def test_uvicorn_form() -> None:
    line = parse_line("(APIServer pid=1) INFO:     Application startup complete.")
    assert (line.proc, line.pid, line.level) == ("APIServer", 1, "INFO")
    assert line.timestamp is None
    assert line.source is None
    assert line.message == "Application startup complete."


def test_uvicorn_access_line_without_tag() -> None:
    line = parse_line('INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK')
    assert line.proc is None
    assert line.level == "INFO"
    assert line.message == '127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK'


def test_tqdm_line_has_tag_but_no_level() -> None:
    line = parse_line(
        "(EngineCore_DP0 pid=7) Loading safetensors checkpoint shards:  45% Completed | 5/11"
    )
    assert (line.proc, line.pid, line.level) == ("EngineCore_DP0", 7, None)
    assert line.message == "Loading safetensors checkpoint shards:  45% Completed | 5/11"


def test_no_tag_but_logger_prefix() -> None:
    line = parse_line("WARNING 05-14 10:02:03 [config.py:1234] Casting torch.float32 to bf16.")
    assert line.proc is None
    assert line.level == "WARNING"
    assert line.message == "Casting torch.float32 to bf16."


def test_unprefixed_line() -> None:
    line = parse_line("Traceback (most recent call last):")
    assert line == parse_line("Traceback (most recent call last):")
    assert (line.proc, line.level, line.timestamp, line.source) == (None, None, None, None)
    assert line.message == "Traceback (most recent call last):"


def test_ray_style_tag_with_ip() -> None:
    line = parse_line("(RayWorkerWrapper pid=55, ip=10.0.0.2) INFO 05-14 10:02:03 [w.py:1] hi")
    assert (line.proc, line.pid, line.message) == ("RayWorkerWrapper", 55, "hi")


def test_milliseconds_and_warn_alias_are_tolerated() -> None:
    line = parse_line("(APIServer pid=1) WARN 05-14 10:02:03.123 [api.py:9] careful")
    assert line.level == "WARNING"
    assert line.timestamp == "05-14 10:02:03"
    assert line.message == "careful"


def test_bytes_input_with_invalid_utf8() -> None:
    line = parse_line(b"(APIServer pid=1) INFO 05-14 10:02:03 [a.py:1] bad \xff\xfe byte")
    assert line.level == "INFO"
    assert line.message == "bad \ufffd\ufffd byte"


def test_a_traceback_line_keeps_its_indentation() -> None:
    line = parse_line(
        '(EngineCore_DP0 pid=7) ERROR 05-14 10:02:03 [core.py:708]   File "/x/y.py", line 3, in f'
    )
    assert line.message == '  File "/x/y.py", line 3, in f'


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[1;36mcyan\x1b[0m", "cyan"),
        ("\x1b[2K\x1b[1Gbar", "bar"),  # other CSI: erase line, move cursor
        ("\x1b]0;title\x07text", "text"),  # OSC with BEL
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC 8 hyperlink
        ("a\x00b\x07c\x7fd", "abcd"),  # C0 controls and DEL
        ("a\x9b31mb\x85c", "abc"),  # 8-bit CSI and a C1 control
        ("tab\tkept", "tab\tkept"),
        ("plain", "plain"),
    ],
)
def test_strip_ansi(raw: str, clean: str) -> None:
    assert strip_ansi(raw) == clean


def test_split_lines_handles_every_ending() -> None:
    assert split_lines("a\r\nb\nc\rd") == ["a", "b", "c", "d"]
    assert split_lines(b"a\r\nb\r\n") == ["a", "b"]
    assert split_lines("") == []
    assert split_lines("\n") == [""]
    # Only real line endings split: a form feed or NEL inside a message stays.
    assert split_lines("a\x0cb\x85c") == ["a\x0cb\x85c"]


def test_split_lines_on_a_multiline_vllm_message() -> None:
    chunk = (
        b"(EngineCore_DP0 pid=7) ERROR 05-14 10:02:03 [core.py:708] EngineCore failed to start.\r\n"
        b"(EngineCore_DP0 pid=7) ERROR 05-14 10:02:03 [core.py:708] Traceback (most recent call"
        b" last):\r\n"
    )
    lines = [parse_line(x) for x in split_lines(chunk)]
    assert [x.message for x in lines] == [
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
    ]


def test_assembler_holds_partial_lines_crlf_and_utf8() -> None:
    asm = LineAssembler()
    assert asm.feed(b"first\r") == []  # the \n may follow
    assert asm.feed(b"\nsec") == ["first"]
    assert asm.feed(b"ond\n") == ["second"]
    euro = "€".encode()
    assert asm.feed(b"price " + euro[:1]) == []
    assert asm.feed(euro[1:] + b"\rprogress 2\r") == ["price €"]
    assert asm.feed(b"done") == ["progress 2"]
    assert asm.flush() == ["done"]
    assert asm.flush() == []


def test_assembler_flushes_a_truncated_utf8_sequence() -> None:
    asm = LineAssembler()
    assert asm.feed(b"x\xe2\x82") == []
    assert asm.flush() == ["x\ufffd"]
