"""Materialise a simulated serving host as a directory tree.

    ROOT/venv/                      a real venv (python -m venv --without-pip)
        lib/pythonX.Y/site-packages/vllm/...            the scenario's fake vLLM
        lib/pythonX.Y/site-packages/vllm-VER.dist-info/ METADATA, RECORD, direct_url.json, ...
        bin/vllm                                         console script
        bin/py-spy                                       py-spy's stand-in (host-bin/py_spy.py)
    ROOT/models/Qwen3.6-27B/config.json (+ generation/tokenizer config)
    ROOT/models/Qwen3.6-27B-DFlash/config.json
    ROOT/bin/nvidia-smi, sim_gpu.py  the GPUs' tool, and the simulated driver it reads
    ROOT/bin/docker                 the Docker CLI's stand-in (simulated hosts only); its
                                    containers live in ROOT/.sim/container/
    ROOT/logs/vllm-serve.log        where launchers send the server's output
    ROOT/.sim/sim.json              scenario and timings; .sim/gpu/ holds the GPU memory claims

Nothing inside points back at this checkout: scripts find ROOT from their own location, so the
tree keeps working after `chown -R` to another user (put it outside /root for that user).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_console.console.sim import configs
from vllm_console.console.sim.package import install, shebang
from vllm_console.console.sim.scenarios import Scenario, get_scenario

NVIDIA_SMI_SOURCE = Path(__file__).resolve().parent / "host-bin" / "nvidia_smi.py"
#: The simulated driver nvidia-smi and the fake vLLM both read (written beside nvidia-smi).
SIM_GPU_SOURCE = NVIDIA_SMI_SOURCE.with_name("sim_gpu.py")
#: The `docker` stand-in: never installed anywhere but a simulated host's bin directory.
DOCKER_SOURCE = NVIDIA_SMI_SOURCE.with_name("docker.py")
#: The py-spy stand-in: in the serving environment (ROOT/venv/bin), where `pip install py-spy`
#: puts the real one, so `stacks` finds it beside the serving interpreter.
PY_SPY_SOURCE = NVIDIA_SMI_SOURCE.with_name("py_spy.py")
MANAGED = ("venv", "models", "bin", ".sim")
SERVE_LOG = "logs/vllm-serve.log"
NUM_SPECULATIVE_TOKENS = 15


@dataclass(frozen=True)
class SimTree:
    """Where a materialised simulated host keeps everything, and how to launch its server."""

    root: Path
    python: Path
    target: Path
    draft: Path
    log: Path
    nvidia_smi: Path
    port: int
    scenario: str

    @property
    def spec(self) -> Scenario:
        """The scenario this tree was materialised from."""
        return get_scenario(self.scenario)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def sim_dir(self) -> Path:
        return self.root / ".sim"

    @property
    def docker(self) -> Path:
        """The `docker` stand-in (beside nvidia-smi, so ROOT/bin first on PATH finds both)."""
        return self.root / "bin" / "docker"

    @property
    def site_packages(self) -> Path:
        return next((self.root / "venv" / "lib").glob("python*/site-packages"))

    def speculative_config(self) -> dict[str, Any]:
        return {"method": "dflash", "model": str(self.draft),
                "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}

    def serve_argv(self) -> list[str]:
        """The launch command, as an operator would type it."""
        return [str(self.python), "-m", "vllm.entrypoints.cli.main", "serve", str(self.target),
                "--speculative-config", json.dumps(self.speculative_config()),
                "--attention-backend", "flash_attn", "--max-num-batched-tokens", "32768",
                *self.spec.serve_args, "--host", "127.0.0.1", "--port", str(self.port)]

    def serve_env(self) -> dict[str, str]:
        """Extra environment for the launch: the scenario's (upstream-mixed-swa-v1-runner sets
        VLLM_USE_V2_MODEL_RUNNER=0), and VLLM_LOGGING_COLOR=1 when the tree was made with
        `color` (vLLM colours its log only on a terminal or when asked to)."""
        env = dict(self.spec.env)
        try:
            settings = json.loads((self.sim_dir / "sim.json").read_text())
        except (OSError, ValueError):
            settings = {}
        if settings.get("color"):
            env["VLLM_LOGGING_COLOR"] = "1"
        return env

    @classmethod
    def load(cls, root: Path | str) -> SimTree:
        """The tree already materialised at `root` (read back from .sim/sim.json)."""
        root = Path(root).absolute()
        settings = json.loads((root / ".sim" / "sim.json").read_text())
        return _tree(root, settings["scenario"], int(settings["port"]))


def _tree(root: Path, scenario: str, port: int) -> SimTree:
    return SimTree(root=root, python=root / "venv" / "bin" / "python",
                   target=root / "models" / configs.TARGET_DIR_NAME,
                   draft=root / "models" / configs.DRAFT_DIR_NAME, log=root / SERVE_LOG,
                   nvidia_smi=root / "bin" / "nvidia-smi", port=port, scenario=scenario)


def default_base_python() -> str:
    """/usr/bin/python3 when present: other users can run it (this one may live under /root)."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def _make_venv(base_python: str, venv: Path) -> Path:
    """A real venv without pip (about 0.1 s); hand-built when the venv module is missing."""
    result = subprocess.run([base_python, "-m", "venv", "--without-pip", str(venv)],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        _hand_built_venv(base_python, venv)
    return next((venv / "lib").glob("python*/site-packages"))


def _hand_built_venv(base_python: str, venv: Path) -> None:
    info = subprocess.run([base_python, "-c", "import sys; print(sys.version_info[0], "
                           "sys.version_info[1], sys.version.split()[0], sys.executable)"],
                          capture_output=True, text=True, check=True, timeout=30).stdout.split()
    major, minor, full, executable = info[0], info[1], info[2], info[3]
    shutil.rmtree(venv, ignore_errors=True)
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / f"python{major}.{minor}" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(executable).parent}\n"
                                     "include-system-site-packages = false\n"
                                     f"version = {full}\n")
    for name in ("python", "python3", f"python{major}.{minor}"):
        (venv / "bin" / name).symlink_to(executable)


def _prepare_root(root: Path) -> None:
    if root.exists() and any(root.iterdir()):
        if not (root / ".sim" / "sim.json").exists():
            raise FileExistsError(f"{root} is not empty and holds no simulated host; "
                                  "choose an empty or new directory")
        for name in MANAGED:
            shutil.rmtree(root / name, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


def _write_models(tree: SimTree, scenario: Scenario) -> None:
    _write_json(tree.target / "config.json", configs.target_config())
    for name, obj in configs.target_extras().items():
        _write_json(tree.target / name, obj)
    _write_json(tree.draft / "config.json", configs.draft_config(scenario.draft))


FUTURE = "from __future__ import annotations\n"


def script_text(python: Path, source: str) -> str:
    """`source` as an executable run by `python`.

    The future import comes right after the shebang: under a long path the shebang is pip's
    /bin/sh trampoline, a string statement that takes the docstring's place, and a future import
    after a second string would be a SyntaxError.
    """
    if FUTURE in source:
        return shebang(python) + "\n" + FUTURE + source.replace(FUTURE, "", 1)
    return shebang(python) + "\n" + source


def _write_nvidia_smi(tree: SimTree) -> None:
    tree.nvidia_smi.parent.mkdir(parents=True, exist_ok=True)
    tree.nvidia_smi.write_text(script_text(tree.python, NVIDIA_SMI_SOURCE.read_text()))
    tree.nvidia_smi.chmod(0o755)
    shutil.copyfile(SIM_GPU_SOURCE, tree.nvidia_smi.with_name(SIM_GPU_SOURCE.name))
    tree.docker.write_text(script_text(tree.python, DOCKER_SOURCE.read_text()))
    tree.docker.chmod(0o755)
    py_spy = tree.python.parent / "py-spy"
    py_spy.write_text(script_text(tree.python, PY_SPY_SOURCE.read_text()))
    py_spy.chmod(0o755)


def materialise(scenario_name: str, root: Path | str, *, base_python: str | None = None,
                port: int = 8000, gpus: int = 1, startup_s: float = 3.0,
                metrics_interval_s: float = 2.0, color: bool = False,
                stall_after_s: float | None = None) -> SimTree:
    """Write the simulated host for `scenario_name` into `root` and describe it.

    `root` must be empty, new, or an earlier simulated host (whose venv, models, bin and .sim
    are replaced; logs are kept). Nothing is started.
    """
    scenario = get_scenario(scenario_name)
    root = Path(root).absolute()
    _prepare_root(root)
    tree = _tree(root, scenario.name, port)
    site_packages = _make_venv(base_python or default_base_python(), root / "venv")
    install(scenario.build, site_packages, tree.python)
    _write_models(tree, scenario)
    _write_nvidia_smi(tree)
    tree.log.parent.mkdir(parents=True, exist_ok=True)
    (tree.sim_dir / "gpu").mkdir(parents=True, exist_ok=True)
    _write_json(tree.sim_dir / "sim.json", {
        "scenario": scenario.name,
        "description": scenario.description,
        "port": port,
        "gpus": gpus,
        "gpu_name": "NVIDIA H200",
        "gpu_memory_total_mib": 143771,
        "startup_s": startup_s,
        "metrics_interval_s": metrics_interval_s,
        "color": color,
        "traffic": True,
        "stall_after_s": stall_after_s if stall_after_s is not None else scenario.stall_after_s,
        "access_log": True,
        "acceptance": {"right": 6.4, "floor": 1.17, "noise": 0.15},
        "checkpoint": configs.checkpoint_truth(),
    })
    return tree
