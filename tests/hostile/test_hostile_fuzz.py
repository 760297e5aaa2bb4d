"""Property tests (hypothesis) for what reads host output and user files, beyond the log
parsers (tests/parsers/test_parsers_properties.py): the follower's frame decoder and frame handling,
the agent's JSON lines, discovery's facts and argv, the probes' answers, the draft-config
readers and invariants, the hosts file, and the display/redaction of text. Each either returns
or raises the one error type its caller handles (HostError, ConfigError); nothing else."""

from __future__ import annotations

import contextlib
import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.examples import examples
from vllm_console.checks import draftconfig as dc
from vllm_console.checks.draft_diff import compare, json_diff, with_reference_values
from vllm_console.checks.links.config_correct import check_invariants
from vllm_console.checks.profile import load_profile
from vllm_console.console.hostclient.agent.samples import AgentHello, AgentSample, split_json_lines
from vllm_console.console.hostclient.discovery import (
    parse_serve_argv,
    serve_from_facts,
    server_rows,
)
from vllm_console.console.hostclient.follower import FrameDecoder, LogFollower
from vllm_console.console.hostside.discover import argv_port
from vllm_console.console.output.display import safe_text
from vllm_console.console.parsers.redact import REDACTED, is_secret_key, redact_text
from vllm_console.console.settings import ConfigError, load_hosts_file
from vllm_console.console.transport.host import HostError
from vllm_console.console.transport.local_host import LocalHost
from vllm_console.console.transport.remote_scripts import parse_answer

FAST = settings(max_examples=examples(100), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                         st.floats(allow_nan=True, allow_infinity=True))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=8)
KEYS = ["t", "n", "off", "dev", "ino", "why", "msg", "size", "pid", "ppid", "ts", "gpus",
        "serve", "procs", "root", "host", "argv", "cwd", "stdout", "environ", "children",
        "serves", "servers", "port", "chosen", "tree", "uid", "user", "start_time",
        "layer_types", "target_layer_ids",
        "num_hidden_layers", "mask_token_id", "dflash_config", "sliding_window",
        "use_sliding_window", "max_window_layers", "hidden_size", "vocab_size",
        "speculators_model_type", "transformer_layer_config", "aux_hidden_state_layer_ids",
        "text_config", "swa_window_size", "use_swa"]
# Values the readers branch on, among arbitrary JSON.
special = st.sampled_from(["data", "open", "eof", "missing", "error", "hello", "sample",
                           "start", "resume", "head", "skip", "truncated", "rotated",
                           "recreated", "created", "", "12", "x", -1, 0, 2**70, [], {}])
objects = st.dictionaries(st.sampled_from(KEYS), st.one_of(special, json_values), max_size=8)


@given(chunks=st.lists(st.binary(max_size=200) | objects.map(
    lambda o: json.dumps(o).encode() + b"\n"), max_size=12))
@FAST
def test_frame_decoder_raises_only_frame_errors(chunks: list[bytes]) -> None:
    decoder = FrameDecoder()
    for chunk in chunks:
        try:
            decoder.feed(chunk)
        except HostError:
            decoder = FrameDecoder()


@given(frames=st.lists(st.tuples(objects, st.binary(max_size=64)), max_size=10))
@FAST
def test_follower_frames_raise_only_host_errors(frames: list[tuple[dict[str, Any], bytes]]
                                                ) -> None:
    follower = LogFollower(LocalHost(), "/x.log")
    for header, payload in frames:
        with contextlib.suppress(HostError):
            follower._frame(header, payload)
    follower.recent()


@given(obj=objects, gpu=st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6))
@FAST
def test_agent_json_never_raises(obj: dict[str, Any], gpu: dict[str, Any]) -> None:
    AgentHello.from_json(obj)
    obj2 = {**obj, "gpus": [gpu, obj], "serve": obj, "procs": [obj, gpu]}
    sample = AgentSample.from_json(obj2, 0.0)
    sample.gpus_json()
    _ = sample.serve.root_proc
    _ = sample.serve.shape


@given(pending=st.binary(max_size=50), chunk=st.binary(max_size=200))
@FAST
def test_split_json_lines_keeps_every_byte(pending: bytes, chunk: bytes) -> None:
    lines, rest = split_json_lines(pending, chunk)
    assert b"\n".join([*lines, rest]) == pending + chunk


argv_words = st.sampled_from(["vllm", "serve", "--model", "--speculative-config",
                              "--speculative_config", "--speculative-config.model",
                              "--speculative-config.num_speculative_tokens", "--port",
                              "--host", "-m", '{"method": "dflash"', "{'model': 1}", "[]",
                              "--api-key", "=", "::", "[::1]", "99999999999999999", "-1",
                              "--port=x", "--host=", "nan"]) | st.text(max_size=12)


@given(argv=st.lists(argv_words, max_size=14))
# Found by this property in a CI run: '²'.isdigit() is true, yet int('²') raises.
@example(argv=["--speculative-config.num_speculative_tokens", "²"])
@example(argv=["vllm", "serve", "m", "--port", "8²"])
@FAST
def test_serve_argv_parsing_never_raises(argv: list[str]) -> None:
    args = parse_serve_argv(argv)
    _ = args.url
    assert isinstance(argv_port(argv), int)  # the restart's and the probe's reading too


@given(facts=objects, serve=objects, child=objects)
@FAST
def test_discovery_facts_never_raise(facts: dict[str, Any], serve: dict[str, Any],
                                     child: dict[str, Any]) -> None:
    for shape in (facts, {**facts, "serves": [serve]},
                  {**facts, "serves": [{**serve, "children": [child, 1]}, None]},
                  {**facts, "serves": [serve], "servers": [serve, child, None, 1]}):
        with contextlib.suppress(HostError):
            serve_from_facts(shape)
        server_rows(shape)  # `servers` of any shape: the rows that make sense, never raise


@given(text=st.text(max_size=300) | objects.map(
    lambda o: "noise\n@@vllm-console-json@@\n" + json.dumps(o)))
@FAST
def test_probe_answers_never_raise(text: str) -> None:
    parse_answer(text)


PROFILE = load_profile()
SPEC = PROFILE.links.config_correct
draft_like = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=12)


@given(draft=draft_like, target=st.none() | draft_like, reference=draft_like)
@FAST
def test_draft_config_readers_and_invariants_never_raise(
        draft: dict[str, Any], target: dict[str, Any] | None, reference: dict[str, Any]
) -> None:
    dc.normalised(draft)
    dc.target_layer_ids(draft)
    dc.layer_types(draft)
    dc.swa_window(draft)
    dc.sliding_layers(draft)
    dc.text_value(draft, "num_hidden_layers")
    check_invariants(draft, target, SPEC)
    rows = compare(draft, reference, SPEC.compare)
    for row in rows:
        _ = row.ok
    json_diff(draft, reference)
    fixed = with_reference_values(draft, reference, SPEC.compare)
    json.dumps(fixed, default=repr)


@given(n=st.integers(-5, 10**6), k=st.integers(-5, 10**4))
@FAST
def test_default_spacing_never_raises(n: int, k: int) -> None:
    dc.default_spacing(n, min(k, 64))


toml_fragments = st.sampled_from([
    "[hosts.a]\n", "[hosts.a.serve]\n", "[hosts.a.gpu]\n", "[hosts.a.checks]\n", "[hosts]\n",
    'ssh = "x"\n', "port = 22\n", 'port = "22"\n', "local = true\n", 'log = "/x"\n',
    "log = 5\n", "serve = 1\n", "unknown = 1\n", "hosts = []\n", '"\n', "[\n", "]\n", "=\n",
    'ssh = "-o"\n', "x = {a = 1}\n", "\x00", "\ufeff", "[[hosts.a]]\n"])


@given(parts=st.lists(toml_fragments | st.text(max_size=10), max_size=10))
@settings(max_examples=examples(200), deadline=None)
def test_hosts_file_raises_only_config_errors(parts: list[str], tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("hosts") / "hosts.toml"
    path.write_bytes("".join(parts).encode("utf-8", "surrogatepass"))
    error = ""
    try:
        load_hosts_file(path, required=True)
    except ConfigError as exc:
        error = str(exc)
    assert not error or str(path) in error


_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@given(text=st.text(alphabet=st.characters(exclude_categories=()), max_size=300),
       width=st.integers(1, 400))
@FAST
def test_safe_text_leaves_nothing_a_terminal_would_act_on(text: str, width: int) -> None:
    shown = safe_text(text, width)
    assert _UNSAFE.search(shown) is None
    assert len(shown) <= width + len(f"… [+{len(text) * 8} chars]")


secret_keys = st.sampled_from(["api_key", "apiKey", "hf_token", "HF_TOKEN", "VLLM_API_KEY",
                               "password", "db_password", "secret", "auth", "Authorization",
                               "access_token", "cookie", "credentials"])
secret_values = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEF0123456789-_",
                        min_size=6, max_size=30).map(lambda v: "S3CR" + v)
forms = st.sampled_from(["'{k}': '{v}'", '"{k}": "{v}"', "'{k}': ['{v}']", "{k}={v}",
                         "{k}='{v}'", "--{f} {v}", "--{f}={v}", '{k}: "{v}"', "{k}: Bearer {v}"])


@given(before=st.text(max_size=40), after=st.text(max_size=40), key=secret_keys,
       value=secret_values, form=forms)
@FAST
def test_redact_text_hides_secret_values(before: str, after: str, key: str, value: str,
                                         form: str) -> None:
    flag = re.sub(r"(?<=[a-z])(?=[A-Z])", "-", key).replace("_", "-").lower()
    line = f"{before} {form.format(k=key, v=value, f=flag)}, {after}"
    assert is_secret_key(key)
    shown = redact_text(line)
    assert value not in shown, (line, shown)
    assert REDACTED in shown


@given(text=st.text(alphabet=st.characters(exclude_categories=()), max_size=400))
@FAST
def test_redact_text_never_raises_and_keeps_plain_text(text: str) -> None:
    shown = redact_text(text)
    if REDACTED not in shown:
        assert shown == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10**400, -(10**400)])
def test_extreme_numbers_in_draft_configs(value: Any) -> None:
    draft = {"num_hidden_layers": value, "target_layer_ids": [value], "mask_token_id": value,
             "layer_types": ["sliding_attention"], "sliding_window": value}
    check_invariants(draft, {"num_hidden_layers": value, "vocab_size": value}, SPEC)
    dc.default_spacing(64, 5)


@pytest.mark.parametrize("raw", [b'{"t":"data","n":"x"}\n', b'{"t":"data","n":-5}\nabc',
                                 b'{"t":"data","n":1e400}\n', b'{"t":"data","n":[1]}\n',
                                 b'{"t":"data","n":2.5}\nab', b'{"t":"data","n":true}\na'])
def test_a_frame_length_of_the_wrong_shape_is_a_frame_error(raw: bytes) -> None:
    # Found by the property above: these ended the follower for good (ValueError, TypeError,
    # OverflowError) instead of starting it again.
    with pytest.raises(HostError, match="bad frame length"):
        FrameDecoder().feed(raw)


@pytest.mark.parametrize("header", [{"t": "open", "off": "x"}, {"t": "data", "off": None},
                                    {"t": "open", "dev": [1]}, {"t": "data", "off": 1e400},
                                    {"t": "open", "ino": {}, "why": "resume"}])
def test_a_frame_header_of_the_wrong_shape_is_a_frame_error(header: dict[str, Any]) -> None:
    with pytest.raises(HostError, match="bad .* frame"):
        LogFollower(LocalHost(), "/x.log")._frame(header, b"line\n")


@pytest.mark.parametrize("facts", [{"serves": [{}]}, {"serves": [{"pid": "x"}]},
                                   {"serves": [{"pid": 1, "children": [{}]}]},
                                   {"serves": [{"pid": 1}, {"ppid": 2}]},
                                   {"serves": [{"pid": 1, "argv": 5}]}, {"serves": "abc"},
                                   {"serves": [{"pid": 1, "environ": [1]}]}])
def test_a_discovery_answer_of_the_wrong_shape_is_a_discovery_error(facts: dict[str, Any]
                                                                    ) -> None:
    # Found by the property above: a KeyError/TypeError here ended the telemetry's agent
    # loop (only HostError is retried).
    from vllm_console.console.hostclient.discovery import DiscoveryError

    with pytest.raises(DiscoveryError):
        serve_from_facts(facts)


@pytest.mark.parametrize(("line", "shown"), [
    # A pair inside another pair's value: the outer key is no secret, the inner one is.
    ("env: HF_TOKEN=hf_abc1 MY_SECRET=zz", "env: HF_TOKEN=<redacted> MY_SECRET=<redacted>"),
    ("note: pid 7 runs python -m vllm --api-key=sk-9", "note: pid 7 runs python -m vllm "
                                                      "--api-key=<redacted>"),
    # JSON stays JSON: a quoted value is replaced inside its quotes, and one already redacted
    # is left as it is (output passes this rule again at the door).
    ('{"api_key": "sk-1", "hf_token": "<redacted>", "n": 2}',
     '{"api_key": "<redacted>", "hf_token": "<redacted>", "n": 2}'),
    # Found by the property above (a CI run): a pair whose value is the next pair's key.
    ("A= 'api_key': 'S3CR000000', ", "A= 'api_key': '<redacted>', "),
    ("args=api_key=sk-2 n=1", "args=api_key=<redacted> n=1"),
    ("x: 'token': ['sk-3']", "x: 'token': <redacted>"),
])
def test_redact_text_reaches_nested_pairs_and_keeps_quotes(line: str, shown: str) -> None:
    assert redact_text(line) == shown
    assert redact_text(shown) == shown


def test_a_json_document_leaves_the_door_valid_with_its_names_and_no_secret(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` output passes the door as a structure: `fleet --json`'s row `key` (a host
    label, only named like a secret) stays, a secret field and a command line in a string
    are redacted, and the document is still JSON."""
    import json

    from vllm_console.console.cli.commands.common import emit_json

    emit_json({"servers": [{"key": "10.0.0.5:8000", "api_key": "sk-door-1",
                            "cmdline": "vllm serve m --api-key sk-door-2 --port 8000"}]})
    out = capsys.readouterr().out
    row = json.loads(out)["servers"][0]
    assert row["key"] == "10.0.0.5:8000"
    assert row["api_key"] == REDACTED
    assert row["cmdline"] == "vllm serve m --api-key <redacted> --port 8000"
    assert "sk-door" not in out
