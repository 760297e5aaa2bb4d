"""A real OpenSSH sshd on loopback for the integration tests.

Own config in a throwaway directory under /tmp (the login user cannot enter /root), key-only
login as a dedicated non-root user (or the current user when not root), throwaway host and
client keys, and a known_hosts file that vouches for the host key.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_console.console.settings import HostConfig

if TYPE_CHECKING:
    from vllm_console.console.sim.tree import SimTree

# One login user per pytest-xdist worker (`make test` runs two): the user's home holds the
# console's bundle, its restart lock and its last-launch records, and the real-vLLM fixture
# stops every fixture process of its user, so two workers sharing one would refuse each other's
# restarts and stop each other's servers. (Not root: both workers are the current user.)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEST_USER = "vcssh" if _WORKER in ("", "gw0") else f"vcssh-{_WORKER}"
SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def find_sshd() -> str | None:
    for path in SSHD_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("sshd")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_login_user(name: str = TEST_USER) -> str:
    """The dedicated non-root login user `name` (created once), or ourselves when not root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.getuid()).pw_name
    try:
        pwd.getpwnam(name)
    except KeyError:
        # '*': no password, yet not locked (a locked account is refused with UsePAM no).
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", "-p", "*", name], check=True)
    return name


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)],
                   check=True)
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class Sshd:
    """A running sshd; `kill()` takes it and its sessions down, `start()` brings it back."""

    sshd: str
    directory: Path
    user: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host_key_pub(self) -> str:
        return (self.directory / "host_ed25519.pub").read_text().strip()

    @property
    def client_key(self) -> Path:
        return self.directory / "client_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def home(self) -> Path:
        return Path(pwd.getpwnam(self.user).pw_dir)

    def setup(self) -> None:
        d = self.directory
        keygen(d / "host_ed25519")
        client_pub = keygen(self.client_key)
        (d / "authorized_keys").write_text(client_pub + "\n")
        os.chmod(d / "authorized_keys", 0o644)
        key_type, key_b64 = self.host_key_pub.split()[:2]
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {key_type} {key_b64}\n")
        (d / "sshd_config").write_text(
            "\n".join([
                "ListenAddress 127.0.0.1",
                f"HostKey {d}/host_ed25519",
                f"PidFile {d}/sshd.pid",
                f"AuthorizedKeysFile {d}/authorized_keys",
                "StrictModes no",
                "UsePAM no",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "Subsystem sftp internal-sftp",
                f"AllowUsers {self.user}",
                "UseDNS no",
                "PrintMotd no",
                "AllowTcpForwarding yes",
                "LogLevel ERROR",
            ]) + "\n")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        subprocess.run([self.sshd, "-t", "-f", str(d / "sshd_config")], check=True)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.sshd, "-D", "-e", "-f", str(self.directory / "sshd_config"),
             "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=open(self.directory / "sshd.log", "ab"))  # noqa: SIM115
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    if sock.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"sshd did not come up on port {self.port}; see "
                           f"{self.directory / 'sshd.log'}")

    def kill(self) -> None:
        """The listener and every session it spawned (a dead host, as the client sees it)."""
        if self.proc is None:
            return
        pids = _descendants(self.proc.pid)
        for pid in [self.proc.pid, *pids]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def host_config(self, **changes: object) -> HostConfig:
        base: dict[str, object] = {
            "name": "sshd-test", "hostname": "127.0.0.1", "port": self.port,
            "username": self.user, "identity": str(self.client_key),
            "known_hosts": str(self.known_hosts),
        }
        base.update(changes)
        return HostConfig.model_validate(base)

    def hosts_file(self, path: Path, name: str, root: Path, nvidia_smi: Path) -> Path:
        """A hosts file at `path` with one entry, `name`, on this sshd: only `ssh`, the key and
        the simulated host's match and nvidia-smi (python, log, draft and url are discovered)."""
        path.write_text(
            f'[hosts.{name}]\nssh = "{self.user}@127.0.0.1:{self.port}"\n'
            f'identity = "{self.client_key}"\nknown_hosts = "{self.known_hosts}"\n'
            f'[hosts.{name}.serve]\nmatch = "{root}/venv serve"\n'
            f'[hosts.{name}.gpu]\nnvidia_smi = "{nvidia_smi}"\n')
        return path

    def user_dir(self, name: str) -> Path:
        """A fresh directory the login user owns, outside /root."""
        path = Path(tempfile.mkdtemp(prefix=f"vc-{name}-", dir="/tmp"))
        os.chmod(path, 0o755)
        chown_to(path, self.user)
        return path


def chown_to(path: Path, user: str) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{user}:", str(path)], check=True)

def start_as(tree: SimTree, user: str) -> subprocess.Popen[bytes]:
    """Launch the tree's `vllm serve` as `user` (as an operator would), output to its log."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.path.expanduser(f"~{user}"),
           "LANG": "C.UTF-8", **tree.serve_env()}
    tree.log.parent.mkdir(parents=True, exist_ok=True)
    tree.log.touch()
    chown_to(tree.log.parent, user)
    kwargs: dict[str, object] = {}
    if os.geteuid() == 0:
        kwargs = {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}
    with open(tree.log, "ab") as log:
        return subprocess.Popen(tree.serve_argv(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tree.root, env=env,
                                start_new_session=True, **kwargs)  # type: ignore[call-overload]



def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def start_sshd(user: str = TEST_USER) -> Sshd:
    """A started sshd in a fresh directory, logging in as `user` (created when missing)."""
    sshd = find_sshd()
    if sshd is None:
        raise RuntimeError("OpenSSH's sshd is not installed: run `make test` (it installs "
                           "openssh-server as root), or `apt-get install openssh-server`")
    directory = Path(tempfile.mkdtemp(prefix="vc-sshd-", dir="/tmp"))
    os.chmod(directory, 0o755)
    server = Sshd(sshd, directory, ensure_login_user(user))
    server.setup()
    server.start()
    return server
