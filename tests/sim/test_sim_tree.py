"""The simulated host's tree, looked at as a probe would: files, RECORD hashes, symbols, the
build's own config extraction, and nvidia-smi. Nothing here starts a server."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_console.console.sim import SCENARIOS, SimTree, materialise, runner
from vllm_console.console.sim.configs import draft_config, speculators_draft_config
from vllm_console.console.sim.scenarios import RIGHT_DRAFT

GPU_QUERY = ("--query-gpu=index,name,utilization.gpu,memory.used,memory.total,"
             "temperature.gpu,power.draw")


@pytest.fixture(scope="module")
def sim_trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SimTree]:
    base = tmp_path_factory.mktemp("sim-trees")
    return {name: materialise(name, base / name) for name in SCENARIOS}


def run(argv: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=30,
                          **kw)  # type: ignore[call-overload]


def py(tree: SimTree, code: str) -> str:
    result = run([tree.python, "-c", code])
    assert result.returncode == 0, result.stderr
    return result.stdout


def verify_record(site_packages: Path) -> tuple[list[str], list[str], int]:
    """(missing, mismatched, rows) for vLLM's RECORD, checked like pip would."""
    dist_info = next(site_packages.glob("vllm-*.dist-info"))
    missing, mismatched, rows = [], [], 0
    with open(dist_info / "RECORD", newline="") as f:
        for path, digest, size in csv.reader(f):
            rows += 1
            target = site_packages / path
            if not digest:
                assert path.endswith("RECORD")
                continue
            if not target.exists():
                missing.append(path)
                continue
            data = target.read_bytes()
            algo, _, want = digest.partition("=")
            got = base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b"=")
            if got.decode() != want or len(data) != int(size):
                mismatched.append(path)
    return missing, mismatched, rows


@pytest.mark.programs
def test_layout_paths_and_launch_command(sim_trees: dict[str, SimTree]) -> None:
    tree = sim_trees["incident"]
    root = tree.root
    assert tree.python == root / "venv/bin/python"
    assert tree.python.exists()
    assert tree.target == root / "models/Qwen3.6-27B"
    assert tree.draft == root / "models/Qwen3.6-27B-DFlash"
    assert tree.log == root / "logs/vllm-serve.log"
    assert tree.log.parent.is_dir()
    assert tree.nvidia_smi == root / "bin/nvidia-smi"
    assert os.access(tree.nvidia_smi, os.X_OK)
    assert (root / "venv/pyvenv.cfg").exists()
    assert (root / "venv/bin/vllm").exists()
    settings = json.loads((root / ".sim/sim.json").read_text())
    assert settings["scenario"] == "incident"
    assert settings["port"] == tree.port == 8000
    argv = tree.serve_argv()
    assert argv[:5] == [str(tree.python), "-m", "vllm.entrypoints.cli.main", "serve",
                        str(tree.target)]
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "dflash", "model": str(tree.draft), "num_speculative_tokens": 15}
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "8000"]
    assert tree.serve_env() == {}
    assert SimTree.load(root) == tree


@pytest.mark.programs
def test_venv_is_real_and_package_imports(sim_trees: dict[str, SimTree]) -> None:
    tree = sim_trees["healthy"]
    out = py(tree, "import sys, vllm, importlib.metadata as m, importlib.util as u; "
                   "print(sys.prefix); print(vllm.__version__); print(m.version('vllm')); "
                   "print(u.find_spec('torch') is not None, u.find_spec('transformers') "
                   "is not None)").split("\n")
    assert out[0] == str(tree.root / "venv")
    assert out[1] == out[2] == "0.1.dev16016+g3cfc8f8b7"
    assert out[3] == "True True"
    assert "textual" not in py(tree, "import sys, vllm.entrypoints.cli.main; "
                                     "print(sorted(sys.modules))")


def test_whole_builds_match_their_record(sim_trees: dict[str, SimTree]) -> None:
    for name in ("healthy", "no-swa-code", "fields-dropped", "offset-bug",
                 "upstream-mixed-swa-v1-runner"):
        tree = sim_trees[name]
        missing, mismatched, rows = verify_record(tree.site_packages)
        assert (missing, mismatched) == ([], []), name
        assert rows > 60
        assert (tree.site_packages / "vllm" / tree.spec.build.compiled_ext).exists()


def test_incomplete_build_record_does_not_match(sim_trees: dict[str, SimTree]) -> None:
    tree = sim_trees["incomplete-build"]
    missing, mismatched, _ = verify_record(tree.site_packages)
    assert sorted(missing) == ["vllm/_C.abi3.so", "vllm/v1/attention/backends/flash_attn.py"]
    assert mismatched == ["vllm/model_executor/models/qwen3_dflash.py"]
    assert not list((tree.site_packages / "vllm").glob("_C*.so"))


def test_versions_extensions_and_direct_url(sim_trees: dict[str, SimTree]) -> None:
    for name, tree in sim_trees.items():
        build = tree.spec.build
        dist_info = tree.site_packages / f"vllm-{build.version}.dist-info"
        assert f"Version: {build.version}\n" in (dist_info / "METADATA").read_text()
        direct_url = dist_info / "direct_url.json"
        if build.is_git:
            vcs = json.loads(direct_url.read_text())["vcs_info"]
            assert vcs == {"vcs": "git", "commit_id": build.commit,
                           "requested_revision": "refs/pull/40898/head"}, name
            assert build.commit
            assert build.commit.startswith(build.version.split("+g")[1])
        else:
            assert not direct_url.exists(), name
    assert sim_trees["healthy"].spec.build.compiled_ext == "_C.abi3.so"
    for name in ("no-swa-code", "upstream-mixed-swa-v1-runner"):
        assert (sim_trees[name].site_packages / "vllm/_C_stable_libtorch.abi3.so").exists()


def source(tree: SimTree, rel: str) -> str:
    return (tree.site_packages / "vllm" / rel).read_text()


def test_swa_symbols_per_build(sim_trees: dict[str, SimTree]) -> None:
    pr_symbols = ("_DFLASH_VALID_LAYER_TYPES", "def _get_dflash_layer_types(config",
                  "sliding_window: int | None = None", "sliding_attention_layer_names")
    upstream_symbols = ("_SLIDING_ATTENTION", "def _dflash_layer_causal(",
                        "def dflash_has_any_non_causal(", "def _resolve_layer_attention(")
    model = "model_executor/models/qwen3_dflash.py"
    for name in ("incident", "healthy", "incomplete-build", "fields-dropped", "offset-bug"):
        text = source(sim_trees[name], model)
        assert all(s in text for s in pr_symbols), name
        assert not any(s in text for s in upstream_symbols), name
    upstream = source(sim_trees["upstream-mixed-swa-v1-runner"], model)
    assert all(s in upstream for s in upstream_symbols)
    assert "class DFlashQwen3Attention" in upstream
    none = source(sim_trees["no-swa-code"], model)
    assert "class DFlashQwen3Attention" in none
    assert not any(s in none for s in pr_symbols + upstream_symbols)
    assert "sliding" not in none
    for text in (upstream, none, source(sim_trees["healthy"], model)):
        assert "# sim[" not in text


def test_offset_fix_in_source_only_where_built(sim_trees: dict[str, SimTree]) -> None:
    offset_line = "aux_layers = tuple(i + 1 for i in target_layer_ids)"
    for name, tree in sim_trees.items():
        text = source(tree, "v1/spec_decode/dflash.py")
        assert (offset_line in text) == (name != "offset-bug"), name


def test_algos_copies_swa_fields_where_built(sim_trees: dict[str, SimTree]) -> None:
    for name, tree in sim_trees.items():
        text = source(tree, "transformers_utils/configs/speculators/algos.py")
        assert ("max_window_layers" in text) == tree.spec.build.copies_swa_fields, name


EXTRACT = ("import json, sys\n"
           "from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig\n"
           "d = json.load(open(sys.argv[1]))\n"
           "print(json.dumps(SpeculatorsConfig.extract_transformers_pre_trained_config(d)))\n")


def extract(tree: SimTree, config_path: Path) -> dict[str, object]:
    result = run([tree.python, "-c", EXTRACT, config_path])
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


@pytest.mark.programs
def test_fields_dropped_extraction_loses_the_swa_fields(sim_trees: dict[str, SimTree]) -> None:
    tree = sim_trees["fields-dropped"]
    raw = json.loads((tree.draft / "config.json").read_text())
    assert raw["speculators_model_type"] == "dflash"
    assert "transformer_layer_config" in raw
    swa = ("layer_types", "use_sliding_window", "sliding_window", "max_window_layers")
    assert all(k in raw for k in swa)
    out = extract(tree, tree.draft / "config.json")
    assert out["architectures"] == ["DFlashDraftModel"]
    assert out["dflash_config"] == {"mask_token_id": 248070,
                                    "target_layer_ids": [1, 16, 31, 46, 61]}
    assert out["num_hidden_layers"] == 5
    assert out["hidden_size"] == 5120
    assert not any(k in out for k in swa)


@pytest.mark.programs
def test_pr_build_extraction_keeps_the_swa_fields(sim_trees: dict[str, SimTree],
                                                  tmp_path: Path) -> None:
    spec_config = tmp_path / "config.json"
    spec_config.write_text(json.dumps(speculators_draft_config(RIGHT_DRAFT)))
    out = extract(sim_trees["healthy"], spec_config)
    native = draft_config(RIGHT_DRAFT)
    for key in ("layer_types", "use_sliding_window", "sliding_window", "max_window_layers",
                "dflash_config", "block_size", "num_target_layers", "architectures"):
        assert out[key] == native[key], key


def test_draft_and_target_configs(sim_trees: dict[str, SimTree]) -> None:
    wrong = json.loads((sim_trees["incident"].draft / "config.json").read_text())
    assert wrong["dflash_config"] == {"mask_token_id": 248064,
                                      "target_layer_ids": [1, 17, 33, 49, 63]}
    assert wrong["layer_types"] == ["full_attention"] * 5
    right = json.loads((sim_trees["healthy"].draft / "config.json").read_text())
    assert right["_name_or_path"] == "z-lab/Qwen3.6-27B-DFlash"
    assert right["dflash_config"] == {"mask_token_id": 248070,
                                      "target_layer_ids": [1, 16, 31, 46, 61]}
    assert right["layer_types"] == ["sliding_attention"] * 4 + ["full_attention"]
    assert (right["sliding_window"], right["num_hidden_layers"], right["block_size"],
            right["hidden_size"], right["vocab_size"]) == (2048, 5, 16, 5120, 248320)
    target = json.loads((sim_trees["healthy"].target / "config.json").read_text())
    assert (target["num_hidden_layers"], target["hidden_size"],
            target["vocab_size"]) == (64, 5120, 248320)


@pytest.mark.programs
def test_tree_refers_to_nothing_outside_itself(tmp_path: Path) -> None:
    tree = materialise("healthy", tmp_path / "t", base_python="/usr/bin/python3")
    checkout = str(Path(__file__).resolve().parents[2])
    for path in tree.root.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.suffix != ".so":
            assert checkout not in path.read_text(errors="replace"), path
    assert os.readlink(tree.root / "venv/bin/python3") == "/usr/bin/python3"


@pytest.mark.programs
def test_host_commands_run_when_the_tree_lies_under_a_long_path(tmp_path: Path) -> None:
    # A Python path of 120 characters or more gets pip's /bin/sh trampoline instead of `#!`
    # (a kernel limit); the demo's host under a deep temporary directory hits it.
    root = tmp_path / ("deep-" + "d" * 60) / ("er-" + "e" * 60) / "host"
    tree = materialise("healthy", root)
    assert len(str(tree.python)) >= 120
    listing = subprocess.run([str(tree.nvidia_smi), "-L"], capture_output=True, text=True,
                             timeout=30)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("GPU 0: NVIDIA H200")
    version = subprocess.run([str(tree.docker), "version", "--format", "{{.Server.Version}}"],
                             capture_output=True, text=True, timeout=30)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip()
    vllm = subprocess.run([str(tree.root / "venv/bin/vllm"), "--version"], capture_output=True,
                          text=True, timeout=60)
    assert vllm.returncode == 0, vllm.stderr


@pytest.mark.programs
def test_materialise_refuses_foreign_dirs_and_redoes_its_own(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        materialise("healthy", foreign)
    tree = materialise("incident", tmp_path / "sim", port=8123)
    tree.log.write_text("earlier run\n")
    again = materialise("healthy", tmp_path / "sim", port=8124)
    assert again.scenario == "healthy"
    assert again.port == 8124
    assert again.log.read_text() == "earlier run\n"
    assert json.loads((again.draft / "config.json").read_text())["layer_types"][0] == (
        "sliding_attention")
    start = time.monotonic()
    materialise("offset-bug", tmp_path / "sim")
    assert time.monotonic() - start < 3.0
    with pytest.raises(KeyError, match="known: incident"):
        materialise("nope", tmp_path / "other")


@pytest.mark.programs
def test_console_sim_never_imports_textual() -> None:
    code = "import sys, console.sim; assert 'textual' not in sys.modules, 'textual imported'"
    result = run([sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr


# nvidia-smi, with GPU memory claims written by hand (the engine writes the same records).

def claim(tree: SimTree, pid: int, used_mib: int, util: int = 50, gpu: int = 0) -> None:
    (tree.sim_dir / "gpu" / f"{pid}.json").write_text(json.dumps(
        {"pid": pid, "gpu": gpu, "used_mib": used_mib, "util_pct": util,
         "process_name": "VLLM::EngineCore_DP0"}))


def smi(tree: SimTree, *args: str) -> subprocess.CompletedProcess[str]:
    return run([tree.nvidia_smi, *args])


@pytest.mark.programs
def test_nvidia_smi_queries_idle_gpu(tmp_path: Path) -> None:
    tree = materialise("healthy", tmp_path / "t", gpus=2)
    out = smi(tree, GPU_QUERY, "--format=csv,noheader,nounits").stdout.splitlines()
    assert len(out) == 2
    fields = out[0].split(", ")
    assert fields[:5] == ["0", "NVIDIA H200", "0", "0", "143771"]
    assert 20 <= int(fields[5]) <= 40
    assert 60 < float(fields[6]) < 90
    with_units = smi(tree, "--query-gpu=memory.total,name,power.draw", "--format=csv")
    header, first, _ = with_units.stdout.splitlines()
    assert header == "memory.total [MiB], name, power.draw [W]"
    assert first.startswith("143771 MiB, NVIDIA H200, ")
    assert first.endswith(" W")
    listing = smi(tree, "-L").stdout.splitlines()
    assert listing[0].startswith("GPU 0: NVIDIA H200 (UUID: GPU-")
    assert len(listing) == 2
    apps = smi(tree, "--query-compute-apps=pid,process_name,used_memory",
               "--format=csv,noheader,nounits")
    assert apps.returncode == 0
    assert apps.stdout == ""
    bad = smi(tree, "--query-gpu=index,bogus", "--format=csv")
    assert bad.returncode == 2
    assert 'Field "bogus" is not a valid field' in bad.stdout
    table = smi(tree).stdout.splitlines()
    assert {len(line) for line in table[1:]} == {91}
    assert "No running processes found" in "\n".join(table)


@pytest.mark.programs
def test_nvidia_smi_counts_only_live_holders(tmp_path: Path) -> None:
    tree = materialise("healthy", tmp_path / "t")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        claim(tree, sleeper.pid, 120000, util=90)
        dead = subprocess.Popen(["true"])
        dead.wait()
        claim(tree, dead.pid, 9999)
        line = smi(tree, "--query-gpu=memory.used,utilization.gpu",
                   "--format=csv,noheader,nounits").stdout.strip()
        assert line == "120000, 90"
        apps = smi(tree, "--query-compute-apps=pid,used_memory", "--format=csv,noheader")
        assert apps.stdout == f"{sleeper.pid}, 120000 MiB\n"
        assert f"{sleeper.pid}" in smi(tree).stdout
    finally:
        sleeper.kill()
        sleeper.wait()
    line = smi(tree, "--query-gpu=memory.used", "--format=csv,noheader,nounits").stdout
    assert line == "0\n"


@pytest.mark.programs
def test_nvidia_smi_loops_one_block_per_period(tmp_path: Path) -> None:
    tree = materialise("healthy", tmp_path / "t", gpus=2)
    proc = subprocess.Popen([str(tree.nvidia_smi), "--query-gpu=index,memory.used",
                             "--format=csv,noheader,nounits", "-lms", "100"],
                            stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.75)
    finally:
        proc.terminate()
    lines = proc.communicate(timeout=5)[0].splitlines()
    assert 8 <= len(lines) <= 18
    assert len(lines) % 2 == 0
    assert lines[:2] == ["0, 0", "1, 0"]


@pytest.mark.programs
def test_stop_signals_each_process_of_the_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`stop` signalled a server's group, then each of its processes again: a leader that had
    finished its shutdown between the two (the simulated server takes a tenth of a second)
    was killed by the second SIGTERM, after Python had put the default action back, and
    exited -15 instead of 0 (seen on a busy machine)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            start_new_session=True)
    sent: list[tuple[int, int]] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        sent.append((pid, sig))
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    try:
        assert runner.stop(proc, timeout=5) == [proc.pid]
    finally:
        monkeypatch.undo()
        proc.kill()
        proc.wait()
    assert (proc.pid, signal.SIGTERM) not in sent  # the group's signal reached it
