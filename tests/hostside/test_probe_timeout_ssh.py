"""A command that outlives its timeout over SSH is ended on the host with its whole process
group: closing the channel alone leaves it running, re-parented to init (a draft config.json
that is a FIFO left one blocked probe behind per `check`)."""

from __future__ import annotations

import os
import shutil
import time

import psutil
import pytest

from tests.sshd import Sshd
from vllm_console.console.transport.host import HostError
from vllm_console.console.transport.ssh_host import SSHHost

pytestmark = pytest.mark.ssh

# The probe's shape: a python that opens a file nobody ever writes to, and a child of its own.
BLOCKED = ("import os, subprocess, sys\n"
           "subprocess.Popen(['sleep', '300', sys.argv[2]])\n"
           "open(sys.argv[1]).read()\n")


def leftovers(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if token in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


async def test_a_timed_out_command_leaves_nothing_running(sshd: Sshd) -> None:
    if sshd.proc is None:
        sshd.start()
    root = sshd.user_dir("probe-fifo")
    fifo = root / "config.json"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)
    token = f"probe-left-{os.getpid()}-{time.monotonic_ns()}"
    host = SSHHost(sshd.host_config())
    try:
        with pytest.raises(HostError, match="timed out after 2 s"):
            await host.run(["/usr/bin/python3", "-c", BLOCKED, str(fifo), token], timeout=2)
        deadline = time.monotonic() + 8
        while leftovers(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = leftovers(token)
        assert not left, [(p.pid, p.cmdline()) for p in left]
        # The link is fine afterwards, and a quick command is untouched by the bound.
        done = await host.run(["echo", "still here"], timeout=2)
        assert done.text.strip() == "still here"
    finally:
        await host.close()
        for proc in leftovers(token):
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)
