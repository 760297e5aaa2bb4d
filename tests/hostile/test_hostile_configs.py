"""Broken and hostile draft (and target) config.json files: invalid JSON, not an object, empty,
binary, huge, deeply nested, wrong types everywhere. The chain's config links and the draft diff
say what is wrong in words (an `error` or `fail` link, a DraftDiff error or finding), never raise,
never pass; `check` prints them and exits 1 or 2, never a traceback; `a` refuses to write."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_console.checks import load_profile, run_chain
from vllm_console.checks.draft_diff import apply_reference, load_draft_diff
from vllm_console.checks.models import Status
from vllm_console.console.cli.commands.demo import free_port
from vllm_console.console.cli.parser import main
from vllm_console.console.settings import ServeSettings
from vllm_console.console.sim import SimTree, materialise
from vllm_console.console.transport.host import HostError
from vllm_console.console.transport.local_host import LocalHost

MIB = 1024 * 1024


def deep(depth: int, leaf: object = 1) -> str:
    return "[" * depth + json.dumps(leaf) + "]" * depth


# bytes: the whole file; a dict: the incident's draft config with these fields replaced.
BAD_DRAFTS: dict[str, bytes | dict[str, object]] = {
    "truncated": b'{"architectures": ["DFlashDraftModel"], "layer_types": [',
    "trailing-comma": b'{"a": 1,}',
    "not-an-object": b'[1, 2, 3]',
    "a-string": b'"config"',
    "null": b"null",
    "empty": b"",
    "whitespace": b" \n\t ",
    "binary": bytes(range(256)) * 4,
    "invalid-utf8": b'{"model_type": "\xff\xfe"}',
    "utf16": '{"model_type": "qwen3"}'.encode("utf-16"),
    "nul-bytes": b'{"model_type": "qwen3\x00"}\x00',
    "huge": b'{"pad": "' + b"x" * (5 * MIB) + b'"}',
    "big-but-allowed": b'{"pad": [' + b"0," * (1 * MIB) + b'0]}',
    "deeply-nested-list": deep(200_000).encode(),
    "deeply-nested-in-object": b'{"dflash_config": ' + deep(50_000).encode() + b"}",
    "nested-objects": (b'{"a":' * 20_000) + b"1" + (b"}" * 20_000),
    "nan-and-infinity": b'{"mask_token_id": NaN, "num_hidden_layers": Infinity}',
    "duplicate-keys": b'{"mask_token_id": 1, "mask_token_id": 2}',
    "huge-number": b'{"mask_token_id": 1' + b"0" * 5000 + b"}",
    "types-layer_types-string": {"layer_types": "sliding_attention"},
    "types-layer_types-mixed": {"layer_types": [1, None, {"a": 1}, "full_attention"]},
    "types-target_layer_ids-object": {"target_layer_ids": {"a": 1}},
    "types-target_layer_ids-strings": {"target_layer_ids": ["1", "17"]},
    "types-target_layer_ids-floats": {"target_layer_ids": [1.5, 1e308, -1]},
    "types-num_hidden_layers-string": {"num_hidden_layers": "5"},
    "types-num_hidden_layers-negative": {"num_hidden_layers": -5},
    "types-num_hidden_layers-huge": {"num_hidden_layers": 10**30},
    "types-mask_token_id-bool": {"mask_token_id": True},
    "types-mask_token_id-list": {"mask_token_id": [248064]},
    "types-hidden_size-null": {"hidden_size": None},
    "types-dflash_config-list": {"dflash_config": [1, 2]},
    "types-dflash_config-string": {"dflash_config": "x"},
    "types-dflash_config-wrong-inner": {"dflash_config": {"mask_token_id": "x",
                                                          "target_layer_ids": "1,2",
                                                          "use_swa": "yes",
                                                          "swa_window_size": -4}},
    "types-sliding_window-string": {"sliding_window": "2048", "use_sliding_window": "true"},
    "types-architectures-object": {"architectures": {"x": 1}},
    "types-speculators": {"speculators_model_type": 5, "transformer_layer_config": [1],
                          "aux_hidden_state_layer_ids": "x"},
    "types-everything-null": {"layer_types": None, "target_layer_ids": None,
                              "num_hidden_layers": None, "mask_token_id": None},
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimTree]:
    root = tmp_path_factory.mktemp("configs") / "incident"
    yield materialise("incident", root, port=free_port())
    shutil.rmtree(root, ignore_errors=True)


def draft_dir(tree: SimTree, name: str, tmp_path: Path) -> Path:
    spec = BAD_DRAFTS[name]
    directory = tmp_path / "draft"
    shutil.copytree(tree.draft, directory)
    if isinstance(spec, dict):
        config = json.loads((tree.draft / "config.json").read_text())
        config.update(spec)
        data = json.dumps(config).encode()
    else:
        data = spec
    (directory / "config.json").write_bytes(data)
    return directory


# The whole chain (the host's own field extraction included) on these; the configs links and
# the draft diff only on the rest (the code probe costs the same whatever the draft).
WHOLE_CHAIN = {"truncated", "not-an-object", "binary", "huge", "deeply-nested-list",
               "nan-and-infinity", "types-layer_types-mixed", "types-dflash_config-wrong-inner",
               "types-speculators", "types-everything-null"}


@pytest.mark.programs
@pytest.mark.parametrize("name", list(BAD_DRAFTS))
async def test_a_bad_draft_config_is_a_clear_verdict(name: str, tree: SimTree, tmp_path: Path
                                                     ) -> None:
    draft = draft_dir(tree, name, tmp_path)
    host = LocalHost("bad")
    python = str(tree.python) if name in WHOLE_CHAIN else ""
    settings = ServeSettings(python=python, log=str(tree.log),
                             target=str(tree.target), draft=str(draft),
                             match=f"{tmp_path}/none serve")
    profile = load_profile()
    report = await run_chain(host, settings, profile=profile)
    links = {link.id: link for link in report.links}
    config = links["config-correct"]
    assert config.status in (Status.ERROR, Status.FAIL), (name, config.summary)
    for link in report.links:
        assert "Traceback" not in link.summary, (name, link.id, link.summary)
        assert len(link.summary) < 2000, (name, link.id)
    assert report.broken_link is not None

    diff = await load_draft_diff(host, profile, str(draft), str(tree.target))
    assert diff.error or diff.findings or diff.wrong, name
    if diff.error:
        assert str(draft) in diff.error
        assert len(diff.error) < 2000
        with pytest.raises(HostError):
            await apply_reference(host, diff, profile.links.config_correct.compare)


@pytest.mark.programs
@pytest.mark.parametrize("name", ["truncated", "deeply-nested-list",
                                  "types-dflash_config-wrong-inner"])
def test_check_prints_bad_draft_configs_without_a_traceback(
        name: str, tree: SimTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = draft_dir(tree, name, tmp_path)
    args = ["check", "bad", "--local", "--python", str(tree.python), "--log", str(tree.log),
            "--target", str(tree.target), "--draft", str(draft), "--match",
            f"{tmp_path}/none serve"]
    code = main(args)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert "config-correct" in out.out
    assert main([*args, "--json"]) == code
    report = json.loads(capsys.readouterr().out)
    assert report["links"][3]["status"] in ("error", "fail")
    statuses = {link["status"] for link in report["links"]}
    assert code == (2 if "fail" in statuses else 1)  # CRITICAL on a fail, else WARNING


@pytest.mark.programs
@pytest.mark.parametrize("name", ["truncated", "deeply-nested-list", "binary",
                                  "types-target_layer_ids-object"])
async def test_a_bad_target_config_is_a_clear_verdict(name: str, tree: SimTree, tmp_path: Path
                                                      ) -> None:
    target = tmp_path / "target"
    shutil.copytree(tree.target, target)
    spec = BAD_DRAFTS[name]
    (target / "config.json").write_bytes(spec if isinstance(spec, bytes) else
                                         json.dumps(spec).encode())
    host = LocalHost("bad")
    settings = ServeSettings(python=str(tree.python), log=str(tree.log), target=str(target),
                             draft=str(tree.draft), match=f"{tmp_path}/none serve")
    report = await run_chain(host, settings)
    assert all("Traceback" not in link.summary for link in report.links)
    assert report.broken_link is not None
    diff = await load_draft_diff(host, load_profile(), str(tree.draft), str(target))
    assert diff.error == ""  # the draft is fine; the target's problem is a finding or ignored
