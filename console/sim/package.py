"""Writes the fake `vllm` install into a venv's site-packages, as pip would have left it.

Sources live in `console/sim/site-packages/` as ordinary Python files. A build picks:
- variant files `NAME.<flavour>.py` (flavour: pr, upstream, none), written as `NAME.py`;
- tagged lines: a line ending in `# sim[TAG]` is kept (tag removed) only when the build has TAG,
  one ending in `# sim[!TAG]` only when it has not. Tags: offset, swa_fields, banner_<form>,
  v2_default (0.30+: the V2 model runner by default), prefix_format (0.31+: the process tag in
  the log format), v1_config_check (0.32-0.33: the config refuses what V1 cannot run).
Then filler modules and compiled-extension stand-ins, the dist-info (METADATA, WHEEL, RECORD with
sha256 and size for every file, direct_url.json for git installs) and `bin/vllm`. Damage asked for
by the build (missing / tampered files) is done after RECORD is written, as a broken build would.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from pathlib import Path

from vllm_console.console.sim.scenarios import VLLM_REPO_URL, Build

SOURCES = Path(__file__).resolve().parent / "site-packages"
_TAG = re.compile(r"\s*# sim\[(!?)([a-z0-9_]+)\]\s*$")
_VARIANT = re.compile(r"^(?P<stem>.+)\.(?P<flavour>pr|upstream|none)\.py$")

#: Modules a real install has that the fake server never imports: they fill RECORD out.
FILLER_MODULES = {
    "vllm/_custom_ops.py": "Python bindings for the compiled custom ops.",
    "vllm/sampling_params.py": "Sampling parameters for text generation.",
    "vllm/pooling_params.py": "Pooling parameters for embedding and scoring models.",
    "vllm/outputs.py": "Request outputs returned by the engine.",
    "vllm/sequence.py": "Sequence and its related classes.",
    "vllm/scalar_type.py": "Scalar types used by quantization kernels.",
    "vllm/distributed/__init__.py": "Distributed execution (tensor/pipeline/data parallel).",
    "vllm/distributed/parallel_state.py": "Process groups for tensor and pipeline parallelism.",
    "vllm/compilation/__init__.py": "torch.compile integration.",
    "vllm/compilation/backends.py": "The vLLM compilation backend for torch.compile.",
    "vllm/compilation/monitor.py": "Timing of compilation steps.",
    "vllm/model_executor/layers/__init__.py": "Model layers.",
    "vllm/model_executor/layers/linear.py": "Tensor-parallel linear layers.",
    "vllm/model_executor/layers/layernorm.py": "Custom normalization layers.",
    "vllm/model_executor/layers/rotary_embedding.py": "Rotary positional embeddings.",
    "vllm/model_executor/layers/logits_processor.py": "Computes logits from hidden states.",
    "vllm/model_executor/layers/vocab_parallel_embedding.py": "Vocab-parallel embeddings.",
    "vllm/model_executor/model_loader/__init__.py": "Model loaders.",
    "vllm/model_executor/model_loader/default_loader.py": "Loads safetensors checkpoints.",
    "vllm/model_executor/models/interfaces.py": "Capabilities a model class can declare.",
    "vllm/model_executor/models/llama.py": "Inference-only LLaMA model.",
    "vllm/model_executor/models/qwen2.py": "Inference-only Qwen2 model.",
    "vllm/model_executor/models/qwen3.py": "Inference-only Qwen3 model.",
    "vllm/model_executor/models/qwen3_5.py": "Inference-only Qwen3.5 model (hybrid attention).",
    "vllm/v1/attention/__init__.py": "V1 attention.",
    "vllm/v1/attention/backends/__init__.py": "Attention backends.",
    "vllm/v1/attention/backends/flash_attn.py": "FlashAttention backend for the V1 engine.",
    "vllm/v1/attention/backends/flashinfer.py": "FlashInfer backend for the V1 engine.",
    "vllm/v1/core/__init__.py": "Scheduling and KV cache management.",
    "vllm/v1/core/kv_cache_utils.py": "KV cache sizing and block hashing.",
    "vllm/v1/core/sched/__init__.py": "The scheduler.",
    "vllm/v1/core/sched/scheduler.py": "Continuous-batching scheduler.",
    "vllm/v1/engine/async_llm.py": "The asyncio front-end to EngineCore.",
    "vllm/v1/engine/output_processor.py": "Turns engine outputs into request outputs.",
    "vllm/v1/spec_decode/eagle.py": "The EAGLE proposer.",
    "vllm/v1/spec_decode/ngram_proposer.py": "The n-gram proposer.",
    "vllm/entrypoints/openai/protocol.py": "OpenAI API request and response models.",
    "vllm/entrypoints/openai/serving_chat.py": "The /v1/chat/completions handler.",
    "vllm/entrypoints/openai/serving_completion.py": "The /v1/completions handler.",
    "vllm/vllm_flash_attn/__init__.py": "vLLM's build of FlashAttention.",
}

COMPILED_EXTRAS = ("vllm/_moe_C.abi3.so", "vllm/cumem_allocator.abi3.so",
                   "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
                   "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so")

_METADATA = """\
Metadata-Version: 2.4
Name: vllm
Version: {version}
Summary: A high-throughput and memory-efficient inference and serving engine for LLMs
Author: vLLM Team
License-Expression: Apache-2.0
Project-URL: Homepage, https://github.com/vllm-project/vllm
Project-URL: Documentation, https://docs.vllm.ai/en/latest/
Project-URL: Slack, https://slack.vllm.ai/
Classifier: Programming Language :: Python :: 3.10
Classifier: Programming Language :: Python :: 3.11
Classifier: Programming Language :: Python :: 3.12
Classifier: Programming Language :: Python :: 3.13
Classifier: Intended Audience :: Developers
Classifier: Intended Audience :: Information Technology
Classifier: Intended Audience :: Science/Research
Classifier: Topic :: Scientific/Engineering :: Artificial Intelligence
Requires-Python: <3.14,>=3.10
Description-Content-Type: text/markdown
License-File: LICENSE
Requires-Dist: regex
Requires-Dist: cachetools
Requires-Dist: psutil
Requires-Dist: sentencepiece
Requires-Dist: numpy
Requires-Dist: requests>=2.26.0
Requires-Dist: tqdm
Requires-Dist: transformers>=4.56.0
Requires-Dist: tokenizers>=0.21.1
Requires-Dist: protobuf
Requires-Dist: fastapi[standard]>=0.115.0
Requires-Dist: aiohttp
Requires-Dist: openai>=1.99.1
Requires-Dist: pydantic>=2.12.0
Requires-Dist: prometheus_client>=0.18.0
Requires-Dist: setproctitle
Requires-Dist: torch==2.9.0
Requires-Dist: torchaudio==2.9.0
Requires-Dist: torchvision==0.24.0
Requires-Dist: xformers==0.0.33; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: flashinfer-python==0.5.2
Provides-Extra: tensorizer
Requires-Dist: tensorizer==2.10.1; extra == "tensorizer"

<p align="center">
Easy, fast, and cheap LLM serving for everyone
</p>

vLLM is a fast and easy-to-use library for LLM inference and serving.
"""

_WHEEL = """\
Wheel-Version: 1.0
Generator: setuptools (80.9.0)
Root-Is-Purelib: false
Tag: cp38-abi3-linux_x86_64
"""

_LICENSE = """\
                                 Apache License
                           Version 2.0, January 2004
                        http://www.apache.org/licenses/
"""

_CONSOLE_SCRIPT = """\
{shebang}
# -*- coding: utf-8 -*-
import re
import sys
from vllm.entrypoints.cli.main import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def build_tags(build: Build) -> set[str]:
    """The tags a build's sources are rendered with."""
    tags = {f"banner_{build.banner}"}
    if build.offset_fix:
        tags.add("offset")
    if build.copies_swa_fields:
        tags.add("swa_fields")
    release = tuple(p for p in build.version_tuple[:2] if isinstance(p, int))
    if release >= (0, 30):
        tags.add("v2_default")  # the V2 model runner is the default on CUDA
    if release >= (0, 31):
        tags.add("prefix_format")  # the `(NAME pid=N) ` prefix is part of the log format
    if (0, 32) <= release < (0, 34):
        tags.add("v1_config_check")  # the engine config refuses what the V1 runner cannot run
    return tags


def render_source(text: str, tags: set[str]) -> str:
    """Keep or drop tagged lines for these tags, and strip the tags."""
    out = []
    for line in text.splitlines(keepends=True):
        match = _TAG.search(line.rstrip("\n"))
        if match:
            negated, tag = match.group(1) == "!", match.group(2)
            if (tag in tags) == negated:
                continue
            line = line[:match.start()] + "\n"
        out.append(line)
    return "".join(out)


def shebang(python: Path) -> str:
    """`#!python`, or pip's /bin/sh trampoline when the path has spaces or is too long."""
    text = str(python)
    if " " not in text and len(text) < 120:
        return f"#!{text}"
    quoted = text.replace("'", "'\"'\"'")
    return f"#!/bin/sh\n'''exec' '{quoted}' \"$0\" \"$@\"\n' '''"


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _compiled_blob(name: str, version: str, size: int) -> bytes:
    """An ELF-looking stand-in for a compiled extension, stable for a given build."""
    rng = random.Random(f"{name}:{version}")
    header = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"\x03\x00\x3e\x00\x01\x00\x00\x00"
    return header + rng.randbytes(size - len(header))


def _version_module(build: Build) -> str:
    return ("# file generated by setuptools-scm\n"
            "# don't change, don't track in version control\n"
            f"__version__ = version = {build.version!r}\n"
            f"__version_tuple__ = version_tuple = {build.version_tuple!r}\n")


def package_files(build: Build) -> dict[str, bytes]:
    """Every file of the `vllm` package for this build, by site-packages relative path."""
    tags = build_tags(build)
    files: dict[str, bytes] = {}
    for path in sorted(SOURCES.rglob("*.py")):
        rel = path.relative_to(SOURCES).as_posix()
        match = _VARIANT.match(path.name)
        if match:
            if match.group("flavour") != build.swa:
                continue
            rel = rel.rsplit("/", 1)[0] + f"/{match.group('stem')}.py"
        files[rel] = render_source(path.read_text(), tags).encode()
    files["vllm/_version.py"] = _version_module(build).encode()
    for rel, doc in FILLER_MODULES.items():
        files.setdefault(rel, f'# SPDX-License-Identifier: Apache-2.0\n"""{doc}"""\n'.encode())
    files[f"vllm/{build.compiled_ext}"] = _compiled_blob(build.compiled_ext, build.version,
                                                          96 * 1024)
    for rel in COMPILED_EXTRAS:
        files[rel] = _compiled_blob(rel, build.version, 24 * 1024)
    files["vllm/py.typed"] = b"# Marker file for PEP 561.\n"
    return files


def _dist_info(build: Build) -> dict[str, bytes]:
    files = {
        "METADATA": _METADATA.format(version=build.version).encode(),
        "WHEEL": _WHEEL.encode(),
        "entry_points.txt": b"[console_scripts]\nvllm = vllm.entrypoints.cli.main:main\n",
        "top_level.txt": b"vllm\n",
        "licenses/LICENSE": _LICENSE.encode(),
        "INSTALLER": f"{build.installer}\n".encode(),
        "REQUESTED": b"",
    }
    if build.is_git:
        files["direct_url.json"] = json.dumps({
            "url": VLLM_REPO_URL,
            "vcs_info": {"vcs": "git", "commit_id": build.commit,
                         "requested_revision": build.requested_revision},
        }).encode()
    return files


#: What a vLLM venv always has beside vLLM, down to what probes look for: the modules exist
#: (`find_spec`) and carry their versions. Nothing imports them on the simulated host.
COMPANIONS = {
    "torch": ("2.9.0+cu128", {
        "torch/__init__.py": '"""PyTorch: tensors and dynamic neural networks."""\n\n'
                             "from torch.version import __version__\n",
        "torch/version.py": "__version__ = '2.9.0+cu128'\ndebug = False\ncuda = '12.8'\n"
                            "git_version = '0fabc3ba44823f257e70ce397d989c8de5e362c1'\n"
                            "hip = None\n",
    }),
    "transformers": ("4.57.1", {
        "transformers/__init__.py": '"""Hugging Face Transformers."""\n\n'
                                    '__version__ = "4.57.1"\n',
    }),
}


def _write_distribution(site_packages: Path, dist_info: str, entries: dict[str, bytes]) -> None:
    """Write files and the RECORD that lists them (RECORD itself with an empty hash)."""
    rows = []
    for rel, data in sorted(entries.items()):
        target = (site_packages / rel).resolve() if rel.startswith("..") else site_packages / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if rel.endswith(("bin/vllm", ".so")) else 0o644)
        rows.append(f"{rel},{record_hash(data)},{len(data)}")
    rows.append(f"{dist_info}/RECORD,,")
    (site_packages / dist_info / "RECORD").write_text("\n".join(rows) + "\n")


def _install_companions(site_packages: Path) -> None:
    for name, (version, files) in COMPANIONS.items():
        dist_info = f"{name}-{version}.dist-info"
        entries = {rel: text.encode() for rel, text in files.items()}
        entries[f"{dist_info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\n"
                                            f"Version: {version}\n").encode()
        entries[f"{dist_info}/INSTALLER"] = b"pip\n"
        entries[f"{dist_info}/top_level.txt"] = f"{name}\n".encode()
        _write_distribution(site_packages, dist_info, entries)


def install(build: Build, site_packages: Path, venv_python: Path) -> Path:
    """Write the package, its dist-info and `bin/vllm` (plus torch and transformers as a vLLM
    venv has them); return vLLM's dist-info directory."""
    dist_info = f"vllm-{build.version}.dist-info"
    entries: dict[str, bytes] = dict(package_files(build))
    entries.update({f"{dist_info}/{k}": v for k, v in _dist_info(build).items()})
    entries["../../../bin/vllm"] = _CONSOLE_SCRIPT.format(shebang=shebang(venv_python)).encode()
    _write_distribution(site_packages, dist_info, entries)
    _install_companions(site_packages)
    _damage(build, site_packages)
    return site_packages / dist_info


def _damage(build: Build, site_packages: Path) -> None:
    """What an interrupted rebuild leaves: files gone, Python files newer than RECORD."""
    for rel in build.missing:
        (site_packages / rel).unlink(missing_ok=True)
    for rel in build.tampered:
        path = site_packages / rel
        path.write_text(path.read_text() + "# TODO(dflash): check layer_types against the "
                                           "checkpoint before building layers.\n")
