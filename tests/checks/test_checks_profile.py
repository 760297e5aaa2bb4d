"""Profiles as data, trace lines, the report's JSON, the human table, and the headless rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_console.checks import (
    LINK_IDS,
    ChainReport,
    Evidence,
    LinkResult,
    ProfileError,
    ReferenceError,
    Status,
    load_profile,
    load_reference_file,
    shipped_profiles,
)
from vllm_console.checks.trace import TRACE_TAG, format_trace_line, parse_trace_line
from vllm_console.console.cli.commands.check import render

SHIPPED = Path(__file__).resolve().parents[2] / "checks" / "profiles" / "dflash-swa.toml"


def test_the_shipped_profile() -> None:
    assert "dflash-swa" in shipped_profiles()
    profile = load_profile()
    assert profile.name == "dflash-swa"
    assert list(profile.links.by_id()) == list(LINK_IDS)
    assert profile.requires()["runtime-activation"] == (
        "code-present", "fields-extracted", "config-correct")
    assert profile.watch == (
        "vllm.model_executor.models.qwen3_dflash:_get_dflash_layer_types",
        "vllm.model_executor.models.qwen3_dflash:_resolve_layer_attention")
    assert {r.name for r in profile.references} == {"z-lab/Qwen3.6-27B-DFlash",
                                                    "z-lab/Qwen3-8B-DFlash-b16"}
    for ref in profile.references:  # shipped reference files exist and parse
        assert json.loads((Path(profile.base_dir) / ref.file).read_text())["dflash_config"]


def test_a_user_profile_from_a_path_with_its_own_reference(tmp_path: Path) -> None:
    text = SHIPPED.read_text().replace('name = "dflash-swa"', 'name = "mine"')
    text = text.replace("../reference_configs/z-lab--Qwen3.6-27B-DFlash.json", "ref.json")
    (tmp_path / "ref.json").write_text('{"dflash_config": {"mask_token_id": 1}}')
    path = tmp_path / "mine.toml"
    path.write_text(text)
    profile = load_profile(str(path))
    assert profile.name == "mine"
    assert Path(profile.base_dir) == tmp_path


@pytest.mark.parametrize(("text", "message"), [
    ("name = 'x'\nsurprise = 1\n", "unknown key 'surprise'"),
    ("name = [", "not valid TOML"),
    ("name = 'x'\n", "missing key 'links'"),
])
def test_bad_profiles_are_named_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=message):
        load_profile(str(path))


def test_unknown_prerequisites_and_missing_profiles(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(SHIPPED.read_text().replace('requires = ["code-present"]',
                                                'requires = ["code-presence"]'))
    with pytest.raises(ProfileError, match="unknown link 'code-presence'"):
        load_profile(str(path))
    with pytest.raises(ProfileError, match="not found"):
        load_profile(str(tmp_path / "none.toml"))
    with pytest.raises(ProfileError, match="no profile named 'nope'"):
        load_profile("nope")


def test_explicit_reference_files(tmp_path: Path) -> None:
    good = tmp_path / "draft"
    good.mkdir()
    (good / "config.json").write_text('{"_name_or_path": "z-lab/X", "vocab_size": 3}')
    reference = load_reference_file(str(good))
    assert reference.name == "config.json"
    assert "for z-lab/X" in reference.source
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ReferenceError, match="not valid JSON"):
        load_reference_file(str(tmp_path / "bad.json"))
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ReferenceError, match="not a JSON object"):
        load_reference_file(str(tmp_path / "list.json"))
    with pytest.raises(ReferenceError, match="not found"):
        load_reference_file(str(tmp_path / "none.json"))


# -- trace lines ---------------------------------------------------------------------------------

def test_trace_lines_round_trip_behind_a_log_prefix() -> None:
    line = format_trace_line("call", "m:_resolve_layer_attention", pid=7,
                             args={"layer_idx": 2}, result=(2048, True))
    event = parse_trace_line(f"(EngineCore_DP0 pid=7) {line}")
    assert event is not None
    assert event.function == "_resolve_layer_attention"
    assert event.result == [2048, True]
    assert event.args == {"layer_idx": 2}
    raised = parse_trace_line(format_trace_line("call", "m:f", raised=ValueError("bad")))
    assert raised is not None
    assert raised.raised == "ValueError: bad"
    with pytest.raises(ValueError, match="unknown trace event"):
        format_trace_line("returned", "m:f")


@pytest.mark.parametrize("line", [
    "no tag at all",
    f"{TRACE_TAG} hook error: install: ImportError: x",
    f'{TRACE_TAG} {{"v": 2, "event": "call", "fn": "m:f"}}',
    f'{TRACE_TAG} {{"v": 1, "event": "nope", "fn": "m:f"}}',
    f'{TRACE_TAG} {{"v": 1, "event": "call"}}',
    f"{TRACE_TAG} [1, 2]",
    f'{TRACE_TAG} {{"v": 1, "event": "call", "fn": "m:f", "x": "{"y" * 70000}"}}',
])
def test_what_is_not_a_trace_line(line: str) -> None:
    assert parse_trace_line(line) is None


@given(st.text(max_size=300))
def test_parse_trace_line_never_raises(text: str) -> None:
    parse_trace_line(text)
    parse_trace_line(TRACE_TAG + text)


# -- the report ----------------------------------------------------------------------------------

def _report(*statuses: Status, root: str | None = None) -> ChainReport:
    links = tuple(LinkResult(id=i, title=i.title(), status=s, summary=f"{i} summary",
                             hint=f"{i} hint" if s is not Status.PASS else "",
                             evidence=(Evidence.make("p", "cmd", 0, "x" * 9000),),
                             details={"secret": "not in json"})
                  for i, s in zip(LINK_IDS, statuses, strict=True))
    broken = next((link.id for link in links if link.status is not Status.PASS), None)
    return ChainReport(host="gpu1", profile="dflash-swa", links=links, broken_link=broken,
                       root_cause=root)


def test_json_has_exactly_the_documented_keys_and_no_details() -> None:
    report = _report(Status.PASS, Status.PASS, Status.UNKNOWN, Status.FAIL,
                     root="config-correct")
    out = report.to_json()
    assert "secret" not in json.dumps(out)
    assert out["links"][3]["status"] == "fail"
    assert len(out["links"][0]["evidence"][0]["excerpt"]) < 4200  # cut, and says so
    assert report.exit_code == 2  # CRITICAL: a link failed, whatever the others say
    assert _report(*(Status.PASS,) * 4).exit_code == 0
    assert _report(Status.PASS, Status.ERROR, Status.PASS, Status.PASS).exit_code == 1
    assert _report(Status.PASS, Status.PASS, Status.UNKNOWN, Status.PASS).exit_code == 1
    assert _report(Status.FAIL, Status.ERROR, Status.UNKNOWN, Status.PASS).exit_code == 2


def test_the_human_table(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _report(Status.PASS, Status.ERROR, Status.UNKNOWN, Status.FAIL,
                     root="config-correct")
    text = render(report)
    lines = text.splitlines()
    assert lines[0] == "gpu1: dflash-swa chain"
    assert lines[1].split() == ["PASS", "code-present", "code-present", "summary"]
    assert lines[2].startswith("  ERROR    fields-extracted")
    assert "broken link: fields-extracted    root cause: config-correct" in text
    assert text.index("hints:") > text.index("broken link")
    assert "\x1b[" not in text
    coloured = render(report, colour=True)
    assert "\x1b[31mFAIL" in coloured
    assert "every link passed" in render(_report(*(Status.PASS,) * 4))


@pytest.mark.programs
def test_checks_and_the_check_command_never_import_textual() -> None:
    code = ("import sys, checks, checks.chain, checks.links.runtime_activation, "
            "vllm_console.console.hostclient.discovery, console.cli.commands.check; "
            "assert 'textual' not in sys.modules, [m for m in sys.modules if 'textual' in m]")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[2], timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
