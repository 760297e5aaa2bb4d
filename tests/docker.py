"""A real Docker daemon for the container tier (Debian's `docker.io`; `scripts/ensure-test-tools.sh`
installs it), and a real vLLM server as PID 1 of a real container.

The daemon is the tests' own: its socket, data and exec roots and pid file in a short temp dir
(containerd's socket paths under the exec root must stay short), no bridge, no iptables rules
(containers use the host network, loopback only); it runs as root and is stopped by its pid.
No registry is reachable here: the image is an empty `docker import`, and the container sees
the host's `/usr`, `/lib`, `/etc` and the real-vLLM fixture's venv through read-only bind mounts,
so `vllm serve` runs with the fixture's interpreter at the same paths, and the models on a
Docker volume at `/models`, a path that does not exist on the host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.real_vllm.fixture import BASE_PYTHON, RealVllm

DOCKERD = "dockerd"
IMAGE = "vllm-console-test/empty:1"
MODELS = "/models"
"""Where the container sees its models: must not exist on the host."""


class DockerUnavailable(RuntimeError):
    """No Docker daemon can run here (not root, dockerd missing); the message says why."""


@dataclass
class Dockerd:
    """The tests' own Docker daemon; `docker()` runs the CLI against it."""

    directory: Path
    proc: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.directory / "docker.sock"

    @property
    def host(self) -> str:
        """The value of DOCKER_HOST that names this daemon."""
        return f"unix://{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def docker(self, *args: str, check: bool = True, timeout: float = 120,
               stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["docker", "-H", self.host, *args], capture_output=True,
                              text=stdin is None, input=stdin, timeout=timeout, check=False)
        if check and done.returncode != 0:
            err = done.stderr if isinstance(done.stderr, str) else done.stderr.decode()
            raise RuntimeError(f"docker {' '.join(args)} exited {done.returncode}: {err}")
        return done  # type: ignore[return-value]

    def log_tail(self, chars: int = 3000) -> str:
        path = self.directory / "dockerd.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the daemon (it stops its containers first), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for point in _mounts_under(self.directory):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        shutil.rmtree(self.directory, ignore_errors=True)


def _mounts_under(directory: Path) -> list[str]:
    """The mount points the daemon left below `directory` (its default network namespace's
    nsfs under the exec root stays mounted after it exits), deepest first."""
    prefix = f"{directory}/"
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    return sorted(points, key=len, reverse=True)


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "the container tier starts its own dockerd, which needs root"
    for tool in (DOCKERD, "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/ensure-test-tools.sh installs docker.io)"
    return None


def start_dockerd(timeout: float = 60) -> Dockerd:
    """A private daemon, up (`docker info` answers) or a RuntimeError with its log's end."""
    why = unavailable_reason()
    if why:
        raise DockerUnavailable(why)
    directory = Path(tempfile.mkdtemp(prefix="vcd-", dir="/tmp"))
    directory.chmod(0o755)
    log = open(directory / "dockerd.log", "wb")  # noqa: SIM115 (the daemon keeps it)
    argv = [DOCKERD, "--bridge=none", "--iptables=false", "--ip-masq=false",
            "--host", f"unix://{directory / 'docker.sock'}",
            "--data-root", str(directory / "d"), "--exec-root", str(directory / "x"),
            "--pidfile", str(directory / "dockerd.pid")]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    log.close()
    daemon = Dockerd(directory, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = daemon.log_tail()
            daemon.stop()
            raise RuntimeError(f"dockerd exited {proc.returncode}:\n{tail}")
        if daemon.socket.exists() and \
                daemon.docker("info", check=False, timeout=10).returncode == 0:
            return daemon
        time.sleep(0.3)
    tail = daemon.log_tail()
    daemon.stop()
    raise RuntimeError(f"dockerd not up after {timeout:.0f} s:\n{tail}")


def empty_image(daemon: Dockerd, name: str = IMAGE) -> str:
    """An image with no files at all, made here (no registry is reachable)."""
    tar = subprocess.run(["tar", "cf", "-", "--files-from", "/dev/null"], capture_output=True,
                         check=True).stdout
    daemon.docker("import", "-", name, stdin=tar)
    return name


def models_volume(daemon: Dockerd, fixture: RealVllm, name: str) -> str:
    """A Docker volume holding a copy of the fixture's models (copied by a container, so the
    files live where Docker keeps volumes, not at any path the host shows as /models)."""
    daemon.docker("volume", "create", name)
    daemon.docker("run", "--rm", *host_mounts(fixture), "-v", f"{name}:{MODELS}",
                  "-v", f"{fixture.models}:/src:ro", IMAGE,
                  "/usr/bin/cp", "-a", "/src/.", f"{MODELS}/", timeout=300)
    return name


def host_mounts(fixture: RealVllm) -> list[str]:
    """The host's system and the fixture's venv, read-only, at their own paths."""
    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", str(fixture.venv),
             os.path.dirname(os.path.realpath(BASE_PYTHON))]
    out: list[str] = []
    seen: set[str] = set()
    for path in paths:
        if os.path.exists(path) and path not in seen and \
                not any(path.startswith(p + "/") for p in seen):
            seen.add(path)
            out += ["-v", f"{path}:{path}:ro"]
    return out


@dataclass
class ContainerServer:
    """`vllm serve` as the entry point (so PID 1) of a container on the host network."""

    daemon: Dockerd
    name: str
    port: int
    target: str
    argv: tuple[str, ...]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def inspect(self) -> dict[str, object]:
        out = json.loads(self.daemon.docker("inspect", self.name).stdout)
        return dict(out[0])

    def health(self) -> int | None:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return None

    def logs(self) -> str:
        done = self.daemon.docker("logs", self.name, check=False)
        return (done.stdout or "") + (done.stderr or "")

    def wait_ready(self, timeout: float = 300) -> None:
        """Until /health answers 200; at once, with the log's end, when the container ended."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.health() == 200:
                return
            state = self.inspect().get("State") or {}
            if isinstance(state, dict) and not state.get("Running"):
                raise AssertionError(f"the container {self.name} exited "
                                     f"({state.get('ExitCode')}):\n{self.logs()[-4000:]}")
            time.sleep(0.5)
        raise AssertionError(f"vllm serve in {self.name} not ready after {timeout:.0f} s:\n"
                             f"{self.logs()[-4000:]}")

    def remove(self) -> None:
        self.daemon.docker("rm", "-f", "-t", "10", self.name, check=False, timeout=60)


def _serve(fixture: RealVllm, port: int, speculative_config: str | None,
           extra_args: tuple[str, ...] = ()) -> tuple[str, list[str], dict[str, str]]:
    """The container's model path, `vllm serve` command line and environment. Its engine runs
    on the last CPU: the bare servers' engines bind the first (vLLM's `auto` binding), and
    `make test` runs the two tiers side by side on two workers."""
    target = f"{MODELS}/target"
    argv = [str(fixture.vllm), "serve", target, "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", "512", "--enforce-eager"]
    if speculative_config:
        argv += ["--speculative-config", speculative_config]
    argv += extra_args
    env = {"PATH": f"{fixture.venv}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
           "LANG": "C.UTF-8", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_CPU_OMP_THREADS_BIND": str(max(os.sched_getaffinity(0)))}
    return target, argv, env


def run_server(daemon: Dockerd, fixture: RealVllm, *, name: str, port: int, volume: str,
               speculative_config: str | None = None, options: tuple[str, ...] = (),
               extra_args: tuple[str, ...] = ()) -> ContainerServer:
    """Start the container (not waited for: `wait_ready`); `options` go to `docker run`,
    `extra_args` to `vllm serve`."""
    target, argv, env = _serve(fixture, port, speculative_config, extra_args)
    env_args = [w for key, value in env.items() for w in ("-e", f"{key}={value}")]
    daemon.docker("run", "-d", "--name", name, "--network", "host", "--shm-size", "1g",
                  "--tmpfs", "/tmp", *options, *env_args, *host_mounts(fixture),
                  "-v", f"{volume}:{MODELS}", "--entrypoint", argv[0], IMAGE, *argv[1:])
    return ContainerServer(daemon, name, port, target, tuple(argv))


def compose_server(daemon: Dockerd, fixture: RealVllm, *, project: str, directory: Path,
                   port: int, volume: str, speculative_config: str | None = None
                   ) -> ContainerServer:
    """The same server as `run_server`, as the service `vllm` of a compose project (Debian's
    `docker-compose`): the compose file written in `directory`, `up -d` there (not waited
    for). The file is YAML as a person writes it, with a `version:` line."""
    target, argv, env = _serve(fixture, port, speculative_config)
    q = json.dumps  # a JSON string is a YAML double-quoted scalar
    binds = [m for m in host_mounts(fixture) if m != "-v"]
    lines = ['version: "2.4"', "services:", "  vllm:", f"    image: {q(IMAGE)}",
             "    network_mode: host", "    shm_size: 1g", "    tmpfs:", "      - /tmp",
             f"    entrypoint: [{q(argv[0])}]",
             f"    command: [{', '.join(q(w) for w in argv[1:])}]",
             "    environment:", *(f"      {k}: {q(v)}" for k, v in env.items()),
             "    volumes:", *(f"      - {q(b)}" for b in binds),
             f"      - {q(f'{volume}:{MODELS}')}",
             "volumes:", f"  {volume}:", "    external: true"]
    (directory / "docker-compose.yml").write_text("\n".join(lines) + "\n")
    done = subprocess.run(["docker-compose", "--project-name", project, "up", "-d"],
                          cwd=directory, env=daemon.env, capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"docker-compose up failed:\n{done.stderr[-3000:]}")
    return ContainerServer(daemon, f"{project}_vllm_1", port, target, tuple(argv))
