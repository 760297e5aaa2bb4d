"""The tolerant Python-repr reader."""

from __future__ import annotations

import json
import math

import pytest

from vllm_console.console.parsers import parse_kwargs, parse_repr, to_jsonable
from vllm_console.console.parsers.pyrepr import ARGS_KEY, TYPE_KEY, UNPARSED_KEY


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'a'", "a"),
        ('"a b"', "a b"),
        (r"'it\'s'", "it's"),
        (r"'tab\there'", "tab\there"),
        (r"'\u00e9'", "é"),
        ("b'raw'", "raw"),
        ("42", 42),
        ("-7", -7),
        ("0.9", 0.9),
        ("1e-05", 1e-05),
        ("None", None),
        ("True", True),
        ("False", False),
        ("null", None),
        ("true", True),
        ("[]", []),
        ("()", ()),
        ("(1,)", (1,)),
        ("(1)", 1),
        ("(2, 17, 32)", (2, 17, 32)),
        ("{}", {}),
        ("{1, 2}", [1, 2]),
        ("{'a': [1, (2, 3)], 'b': {'c': None}}", {"a": [1, (2, 3)], "b": {"c": None}}),
        (
            '{"level":3,"x":[512,504],"y":null,"z":false}',
            {"level": 3, "x": [512, 504], "y": None, "z": False},
        ),
        ("torch.bfloat16", "torch.bfloat16"),
        ("<CompilationMode.VLLM_COMPILE: 3>", "<CompilationMode.VLLM_COMPILE: 3>"),
        (
            "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>",
            "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>",
        ),
        ("<function f.<locals>.g at 0x7f00>", "<function f.<locals>.g at 0x7f00>"),
        ("0.1.dev16016+g3cfc8f8b7", "0.1.dev16016+g3cfc8f8b7"),
        ("/root/models/Qwen3.6-27B", "/root/models/Qwen3.6-27B"),
        ("...", "..."),
    ],
)
def test_values(text: str, value: object) -> None:
    assert parse_repr(text) == value


def test_nested_calls_become_typed_dicts() -> None:
    value = parse_repr(
        "SpeculativeConfig(method='dflash', model='/m', num_spec_tokens=15, "
        "inner=Inner(x=torch.Size([1, 2]), y=None), 'positional')"
    )
    assert value == {
        TYPE_KEY: "SpeculativeConfig",
        "method": "dflash",
        "model": "/m",
        "num_spec_tokens": 15,
        "inner": {
            TYPE_KEY: "Inner",
            "x": {TYPE_KEY: "torch.Size", ARGS_KEY: [[1, 2]]},
            "y": None,
        },
        ARGS_KEY: ["positional"],
    }
    json.dumps(value)


def test_not_one_value_is_returned_as_text() -> None:
    assert parse_repr("  abc def  ") == "abc def"
    assert parse_repr("[1, 2] trailing") == "[1, 2] trailing"


def test_unterminated_containers_are_closed() -> None:
    assert parse_repr("[1, [2, 3") == [1, [2, 3]]
    assert parse_repr("{'a': (1, 2") == {"a": (1, 2)}


def test_kwargs_flat_list() -> None:
    out = parse_kwargs(
        "model='/root/m', dtype=torch.bfloat16, max_seq_len=262144, served_model_name=/root/m, "
        "seed=0, enable_prefix_caching=True, pooler_config=None, "
        'compilation_config={"level":3,"cudagraph_capture_sizes":[4,2,1]}'
    )
    assert out == {
        "model": "/root/m",
        "dtype": "torch.bfloat16",
        "max_seq_len": 262144,
        "served_model_name": "/root/m",
        "seed": 0,
        "enable_prefix_caching": True,
        "pooler_config": None,
        "compilation_config": {"level": 3, "cudagraph_capture_sizes": [4, 2, 1]},
    }


def test_kwargs_keep_an_unparseable_tail() -> None:
    out = parse_kwargs("a=1, b='x', then some words, c=3")
    assert out == {"a": 1, "b": "x", UNPARSED_KEY: "then some words, c=3"}
    assert parse_kwargs("a=1) junk") == {"a": 1, UNPARSED_KEY: ") junk"}
    assert parse_kwargs("") == {}


def test_very_deep_nesting_is_kept_as_text_not_a_crash() -> None:
    deep = "[" * 5000 + "]" * 5000
    value = parse_repr(deep)
    depth = 0
    while isinstance(value, list) and value:
        value, depth = value[0], depth + 1
    assert depth > 10
    assert isinstance(value, str | list)


def test_huge_integer_stays_text() -> None:
    assert parse_repr("9" * 10_000) == "9" * 10_000


def test_to_jsonable() -> None:
    value = {(1, 2): {1, 2}, "f": math.inf, "n": math.nan, "t": (1, [2]), "b": b"x", "o": object}
    out = to_jsonable(value)
    assert out["(1, 2)"] == [1, 2]
    assert out["f"] == "inf"
    assert out["n"] == "nan"
    assert out["t"] == [1, [2]]
    assert out["b"] == "x"
    json.dumps(out, allow_nan=False)


def test_missing_values_are_empty_text_not_none() -> None:
    assert parse_repr("") == ""
    assert parse_kwargs("a=, b=") == {"a": "", "b": ""}
