"""`vllm-console init [--config PATH]`: write a commented hosts file to fill in.

Never over an existing file (a person's hosts would be lost): that is a failure naming it. The
template is a valid, empty hosts file, every key of a host entry shown commented with what it
means.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from vllm_console.console.cli.commands.common import CommandError, emit
from vllm_console.console.hostside.vocabulary import DEFAULT_MATCH
from vllm_console.console.settings import default_hosts_path

TEMPLATE = f"""\
# vllm-console hosts file: one [hosts.NAME] table per GPU host; `vllm-console NAME` opens one,
# `vllm-console` alone opens them all. Unknown keys are an error naming the key.
# Every key below is optional but `ssh` (or `local = true`); uncomment and fill in.

# [hosts.gpu1]
# ssh = "root@10.1.230.172"         # [user@]host[:port] or an ~/.ssh/config alias
# port = 22                         # default: ~/.ssh/config, then 22
# identity = "~/.ssh/id_ed25519"    # default: ~/.ssh/config's IdentityFile, ~/.ssh, the agent
# known_hosts = "~/.ssh/known_hosts" # checked strictly; default: ~/.ssh/config, ~/.ssh
# local = true                      # this machine, no SSH
#
# [hosts.gpu1.serve]                # discovered from the running process when absent
# python = "/root/venv/bin/python"  # the interpreter that runs vllm serve (probes run with it)
# log = "/root/vllm-serve.log"
# target = "/root/models/Qwen3.6-27B"
# draft = "/root/models/Qwen3.6-27B-DFlash"
# match = "{DEFAULT_MATCH}"              # how to find the serve process (never another user's)
# url = "http://127.0.0.1:8000"     # /health, /metrics, /v1/models (through the SSH link)
# port = 8001                       # several servers on the host: the one on this port
# unit = ""                         # a systemd unit: restart through systemctl instead
# container = ""                    # pin the container whose main process is the server
# runtime = "docker"                # or "podman" (its Docker-compatible CLI)
# stall_s = 30                      # requests in flight, no token this long: engine stalled
#
# [hosts.gpu1.gpu]
# nvidia_smi = "nvidia-smi"         # fallback GPU source when NVML is not importable
#
# [hosts.gpu1.checks]
# profile = "auto"                # the profile for the engine's method, or a name or a .toml path
# reference = ""                    # a reference draft config.json (local path)

# [hosts.gpu3]                      # URL only: no ssh, the console watches the server's port
# url = "http://10.0.0.7:8000"      # as this machine reaches it (beside ssh: maps fleet rows)
# api_key_env = "GPU3_API_KEY"      # the server's --api-key from this variable, or
# api_key_file = "~/.config/vllm-console/gpu3.key"  # from this file (never the key itself)

# [fleet]                           # `vllm-console fleet`: the servers a Prometheus scrapes
# prometheus = "http://prometheus:9090"
# selector = '{{job="vllm"}}'         # which targets are vLLM servers
# host_label = "instance"           # the label that names a server (maps rows to [hosts.NAME])
# profile = "dflash-swa"            # whose expected acceptance flags a server far below it
"""


def run(args: argparse.Namespace) -> int:
    path = Path(args.config).expanduser() if args.config else default_hosts_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # FileExistsError too: a file where the folder should be
        raise CommandError(f"cannot write {path}: {path.parent}: {exc.strerror}") from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise CommandError(f"{path} exists; not overwriting it (edit it, or pass --config "
                           "PATH for another file)") from None
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(TEMPLATE)
    # The file was named: the command that opens its hosts must name it too.
    opens = f"vllm-console --config {shlex.quote(str(path))} NAME" if args.config else \
        "vllm-console NAME"
    emit(f"wrote {path}: fill in a [hosts.NAME] table, then run `{opens}`")
    return 0
