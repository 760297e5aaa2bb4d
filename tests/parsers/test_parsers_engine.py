"""Engine start line, non-default args (with secrets), version banners, redaction."""

from __future__ import annotations

import json

import pytest

from vllm_console.console.parsers import (
    REDACTED,
    SpeculativeSettings,
    VersionBanner,
    parse_engine_start,
    parse_line,
    parse_non_default_args,
    parse_version_banner,
    redact,
    to_jsonable,
)
from vllm_console.console.parsers.pyrepr import TYPE_KEY, UNPARSED_KEY

CAPTURE_SIZES = ", ".join(str(n) for n in range(512, 0, -8))
# Modelled on vLLM 0.11+'s VllmConfig.__str__: reprs, bare words, nested Name(...), a dict
# with enums and a long list; several KB, as on a real host.
ENGINE_LINE = (
    "(EngineCore_DP0 pid=2817) INFO 05-14 10:02:03 [core.py:93] Initializing a V1 LLM engine "
    "(v0.1.dev16016+g3cfc8f8b7) with config: model='/root/models/Qwen3.6-27B', "
    "speculative_config=SpeculativeConfig(method='dflash', model='/root/models/Qwen3.6-27B-DFlash',"
    " num_spec_tokens=15), tokenizer='/root/models/Qwen3.6-27B', skip_tokenizer_init=False, "
    "tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, "
    "dtype=torch.bfloat16, max_seq_len=262144, download_dir=None, load_format=auto, "
    "tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1, "
    "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, "
    "kv_cache_dtype=auto, device_config=cuda, "
    "structured_outputs_config=StructuredOutputsConfig(backend='auto', disable_fallback=False, "
    "reasoning_parser='', enable_in_reasoning=False), "
    "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None, "
    "otlp_traces_endpoint=None, collect_detailed_traces=None), seed=0, "
    "served_model_name=/root/models/Qwen3.6-27B, enable_prefix_caching=True, "
    "enable_chunked_prefill=True, pooler_config=None, compilation_config={'level': None, "
    "'mode': <CompilationMode.VLLM_COMPILE: 3>, 'debug_dump_path': None, 'cache_dir': '', "
    "'backend': 'inductor', 'custom_ops': ['none'], 'splitting_ops': "
    "['vllm::unified_attention', 'vllm::unified_attention_with_output', 'vllm::mamba_mixer2', "
    "'vllm::gdn_attention_core'], 'use_inductor': None, 'compile_sizes': [], "
    "'inductor_compile_config': {'enable_auto_functionalized_v2': False, 'combo_kernels': True},"
    " 'inductor_passes': {}, 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
    f"'cudagraph_capture_sizes': [{CAPTURE_SIZES}], "
    f"'max_capture_size_repeat': [{CAPTURE_SIZES}], "
    "'pass_config': {'enable_noop': True, 'enable_fusion': False}, "
    "'max_cudagraph_capture_size': 512, 'local_cache_dir': None}"
)


def test_engine_line_is_several_kb() -> None:
    assert len(ENGINE_LINE) > 2000


def test_engine_start_line() -> None:
    config = parse_engine_start(parse_line(ENGINE_LINE).message)
    assert config is not None
    assert config.version == "0.1.dev16016+g3cfc8f8b7"
    assert config.engine_kind == "V1"
    assert config.model == "/root/models/Qwen3.6-27B"
    assert config.speculative == SpeculativeSettings(
        method="dflash", model="/root/models/Qwen3.6-27B-DFlash", num_spec_tokens=15
    )
    fields = config.fields
    assert UNPARSED_KEY not in fields
    assert fields["dtype"] == "torch.bfloat16"
    assert fields["max_seq_len"] == 262144
    assert fields["served_model_name"] == "/root/models/Qwen3.6-27B"
    assert fields["structured_outputs_config"][TYPE_KEY] == "StructuredOutputsConfig"
    compilation = fields["compilation_config"]
    assert compilation["cudagraph_mode"] == "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>"
    assert compilation["cudagraph_capture_sizes"][:3] == [512, 504, 496]
    assert compilation["local_cache_dir"] is None
    assert config.to_json() == {
        "version": "0.1.dev16016+g3cfc8f8b7",
        "model": "/root/models/Qwen3.6-27B",
        "speculative_config": {
            "method": "dflash",
            "model": "/root/models/Qwen3.6-27B-DFlash",
            "num_spec_tokens": 15,
        },
    }
    json.dumps(to_jsonable(dict(fields)), allow_nan=False)


def test_engine_line_without_speculation_and_older_wording() -> None:
    config = parse_engine_start(
        "Initializing an LLM engine (v0.6.3.post1) with config: model='/m', "
        "speculative_config=None, tokenizer='/m', dtype=torch.float16"
    )
    assert config is not None
    assert (config.version, config.engine_kind, config.model) == ("0.6.3.post1", None, "/m")
    assert config.speculative is None
    assert config.to_json()["speculative_config"] is None


def test_engine_line_with_extra_fields_and_a_garbled_tail() -> None:
    config = parse_engine_start(
        "Initializing a V1 LLM engine (v0.33.0) with config: model='/m', "
        "speculative_config=SpeculativeConfig(method='dflash', model='/d', num_spec_tokens=8, "
        "new_field=NewThing(a=1)), future_flag=<Some.VALUE: 2>, @@@ not kwargs"
    )
    assert config is not None
    assert config.speculative == SpeculativeSettings("dflash", "/d", 8)
    assert config.fields["future_flag"] == "<Some.VALUE: 2>"
    assert config.fields[UNPARSED_KEY] == "@@@ not kwargs"


@pytest.mark.parametrize(
    "message",
    [
        "Initializing a V1 LLM engine",
        "Initializing a V1 LLM engine (v0.1) without config",
        "something else entirely",
        "",
    ],
)
def test_not_an_engine_line(message: str) -> None:
    assert parse_engine_start(message) is None


NON_DEFAULT = (
    "non-default args: {'model_tag': '/root/models/Qwen3.6-27B', 'api_key': ['sk-live-123'], "
    "'hf_token': 'hf_abcdef', 'model': '/root/models/Qwen3.6-27B', "
    "'max_num_batched_tokens': 32768, 'tokenizer': '/root/models/Qwen3.6-27B', "
    "'speculative_config': {'method': 'dflash', 'model': '/root/models/Qwen3.6-27B-DFlash', "
    "'num_speculative_tokens': 15}, 'attention_backend': 'flash_attn', "
    "'middleware': {'headers': {'Authorization': 'Bearer xyz', 'X-Api-Key': 'k'}}}"
)


def test_non_default_args_with_secrets_redacted() -> None:
    args = parse_non_default_args(NON_DEFAULT)
    assert args is not None
    assert args.model == "/root/models/Qwen3.6-27B"
    assert args.speculative == SpeculativeSettings("dflash", "/root/models/Qwen3.6-27B-DFlash", 15)
    assert args.args["api_key"] == REDACTED
    assert args.args["hf_token"] == REDACTED
    headers = args.args["middleware"]["headers"]
    assert headers == {"Authorization": REDACTED, "X-Api-Key": REDACTED}
    # Look-alikes that are not secrets stay visible.
    assert args.args["max_num_batched_tokens"] == 32768
    assert args.args["tokenizer"] == "/root/models/Qwen3.6-27B"
    assert "sk-live-123" not in json.dumps(dict(args.args))
    assert "hf_abcdef" not in json.dumps(dict(args.args))


def test_non_default_args_that_are_not_literals_fall_back_to_repr_reading() -> None:
    args = parse_non_default_args(
        "non-default args: {'model_tag': '/m', 'attention_backend': <Backend.FLASH_ATTN: 1>, "
        "'api_key': 'secret', 'speculative_config': "
        '\'{"method": "dflash", "model": "/d", "num_speculative_tokens": 7}\'}'
    )
    assert args is not None
    assert args.model == "/m"  # from model_tag
    assert args.args["attention_backend"] == "<Backend.FLASH_ATTN: 1>"
    assert args.args["api_key"] == REDACTED
    # Older builds keep the speculative config as the JSON string given on the command line.
    assert args.speculative == SpeculativeSettings("dflash", "/d", 7)


@pytest.mark.parametrize(
    "message",
    ["non-default args: [1, 2]", "non-default args:", "no args here", "non-default args: {"],
)
def test_not_non_default_args(message: str) -> None:
    result = parse_non_default_args(message)
    assert result is None or dict(result.args) == {}


def test_redact_keys_recursively_and_command_lines() -> None:
    data = {
        "api_key": "k",
        "apiKey": "k",
        "db_password": "p",
        "client_secret": "s",
        "unset_token": None,
        "nested": [{"token": "t", "num_spec_tokens": 15}],
        "allowed_token_ids": [1, 2],
        "tokenizer_mode": "auto",
        "ssl_keyfile": "/etc/key.pem",
        "argv": ["vllm", "serve", "/m", "--api-key", "sk-1", "--hf-token=hf_2", "--port", "8000"],
    }
    assert redact(data) == {
        "api_key": REDACTED,
        "apiKey": REDACTED,
        "db_password": REDACTED,
        "client_secret": REDACTED,
        "unset_token": None,
        "nested": [{"token": REDACTED, "num_spec_tokens": 15}],
        "allowed_token_ids": [1, 2],
        "tokenizer_mode": "auto",
        "ssl_keyfile": "/etc/key.pem",
        "argv": ["vllm", "serve", "/m", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--port",
                 "8000"],
    }  # fmt: skip
    assert data["api_key"] == "k"  # a copy: the input is untouched


@pytest.mark.parametrize(
    ("message", "banner"),
    [
        (
            "vLLM server version 0.11.0, serving model /root/models/Qwen3.6-27B",
            VersionBanner("0.11.0", "/root/models/Qwen3.6-27B"),
        ),
        (
            "vLLM server version 0.1.dev16016+g3cfc8f8b7, serving model /m",
            VersionBanner("0.1.dev16016+g3cfc8f8b7", "/m"),
        ),
        ("vLLM API server version 0.6.3.post1", VersionBanner("0.6.3.post1")),
        (" ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.11.1rc2", VersionBanner("0.11.1rc2")),
        (
            "  █▄█▀ █     █     █     █  model   /root/models/Qwen3.6-27B",
            VersionBanner(None, "/root/models/Qwen3.6-27B"),
        ),
    ],
)
def test_version_banners(message: str, banner: VersionBanner) -> None:
    assert parse_version_banner(message) == banner


@pytest.mark.parametrize(
    "message",
    [
        "Using the model version 3",  # ends in "version N" but is not the logo
        "Resolved architecture: Qwen3ForCausalLM",
        "",
    ],
)
def test_not_a_version_banner(message: str) -> None:
    assert parse_version_banner(message) is None


@pytest.mark.parametrize(
    "message",
    [
        "Loading model weights: 100%|\u2588\u2588\u2588\u2588\u2588| 5/5 [00:03<00:00]",
        "Capturing CUDA graphs: 100%|\u2588\u2588\u2588| 67/67 version 2",
    ],
)
def test_tqdm_bars_are_not_the_logo(message: str) -> None:
    assert parse_version_banner(message) is None


def test_redact_hides_what_is_too_deep_to_inspect() -> None:
    deep: object = {"api_key": "sk-deep"}
    for _ in range(150):
        deep = [deep]
    assert "sk-deep" not in repr(redact(deep))
