"""A containerised server's restart with a change: its container recreated, the name kept.

A change to the launch (the trace hook, an edited command line or environment, or dropping the
hook of an earlier traced run) cannot be made to a container in place: the container is made
again from its inspected configuration with the change, the way compose recreates a service.
What is carried over (`carried_args`): the image the container ran (by id when its tag now
names another), entry point and command, environment, user, working directory, labels, TTY and
stdin, stop signal and timeout, binds, `--mount`s with their options (tmpfs size and mode,
non-recursive binds, no-copy volumes), tmpfs, named and anonymous volumes (the new container
takes the old one's anonymous volumes, however they were made, so their data stays), network
mode and aliases, exposed and published ports, shm size, IPC and PID modes, devices and the
GPU request, runtime, init, privileges and capabilities, security options, ulimits, sysctls,
resource limits, extra hosts, groups, DNS, log driver, restart policy. A setting outside that
list that is not its default makes the console refuse (`not_carried`): it would be lost
silently; so does `run -d -i`'s StdinOnce false, which `create -i` cannot make. The test
tests/containers/test_container_settings.py diffs every field of `docker inspect` before and
after.

The order keeps the old server whenever the new one cannot start:
1. checked as an in-place restart is (this container, its main process, mount sources, port),
   plus the image still there and nothing that cannot be carried;
2. `create` under a temporary name (image, mounts and options are checked by the runtime
   here, before anything is stopped; the environment goes through a private env file, never
   the command line, where `ps` would show its secrets);
3. the old container's restart policy set to "no" (the daemon never starts it while it is
   aside), the way back to it said, the old container stopped, renamed aside, the new one
   given the name and started; when it does not start, it is removed and the old one gets
   its name and policy back and is started again (when that fails too: the server is down,
   and the message says where each container is and what to run);
4. ready as any container restart (its new main process tree owns the port, /health and
   /v1/models answer); then the old container is removed. When the new server does not come
   up, the old container is kept, stopped, under its aside name, and the status says so,
   with the command back to it. The step waits for the outcome even when the console left
   (Ctrl+C), so the aside container is never forgotten.
The trace hook is copied into the new container (`copy_hook`), never mounted from the
console's cache: the container starts again with that cache cleared.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
import time
from typing import Any, Callable

from ..containers import _COMPOSE_PROJECT
from ..vocabulary import is_hook_dir
from .container import (
    ContainerFailed,
    _main_pid,
    _state,
    cli,
    follow_start,
    preflight,
    run_tool,
)
from .hook_files import hook_files
from .status import StatusFile

HOOK_INSIDE = "/vllm-console/"
"""Where a recreated container has its own copy of the trace hook (`copy_hook`)."""

_DEFAULTS: dict[str, Any] = {
    # HostConfig settings not carried over, with the values that mean "not set".
    "Links": (None, []), "VolumesFrom": (None, []), "CgroupParent": ("",),
    "Cgroup": ("",), "UTSMode": ("",), "UsernsMode": ("",), "Isolation": ("", "default"),
    "BlkioWeight": (0,), "BlkioWeightDevice": (None, []), "BlkioDeviceReadBps": (None, []),
    "BlkioDeviceWriteBps": (None, []), "BlkioDeviceReadIOps": (None, []),
    "BlkioDeviceWriteIOps": (None, []), "CpuPeriod": (0,), "CpuQuota": (0,),
    "CpuRealtimePeriod": (0,), "CpuRealtimeRuntime": (0,), "CpusetMems": ("",),
    "DeviceCgroupRules": (None, []), "KernelMemory": (0,), "KernelMemoryTCP": (0,),
    "MemoryReservation": (0,), "MemorySwappiness": (None, -1), "OomKillDisable": (None, False),
    "PidsLimit": (None, 0, -1), "CpuCount": (0,), "CpuPercent": (0,), "IOMaximumIOps": (0,),
    "IOMaximumBandwidth": (0,), "StorageOpt": (None, {}), "DnsOptions": (None, []),
    "DnsSearch": (None, []), "PublishAllPorts": (False,), "ReadonlyRootfs": (False,),
    "ConsoleSize": (None, [0, 0]), "AutoRemove": (False,), "VolumeDriver": ("",),
}


class _Args:
    def __init__(self) -> None:
        self.words: list[str] = []

    def add(self, flag: str, value: Any) -> None:
        self.words += [flag, str(value)]


def image_of(info: dict[str, Any], runtime: str) -> tuple[str, dict[str, Any]]:
    """The image to create from (its name when the name still means the image the container
    ran, else its id) and that image's inspection. ContainerFailed when it is gone."""
    image_id = str(info.get("Image") or "")
    name = str((info.get("Config") or {}).get("Image") or "")
    try:
        found = cli(runtime, "image", "inspect", image_id, timeout=30)
    except ContainerFailed as exc:
        raise ContainerFailed(f"nothing was stopped: the image {name or image_id[:19]} "
                              f"({image_id[:19]}) is gone from the host, so the container "
                              f"could not be made again ({exc})") from None
    image = (json.loads(found) or [{}])[0]
    if name and not name.startswith("sha256:"):
        try:
            named = json.loads(cli(runtime, "image", "inspect", name, timeout=30)) or [{}]
        except (ContainerFailed, ValueError):
            named = [{}]
        if named[0].get("Id") == image_id:
            return name, image
    return image_id, image


def _same(value: Any, defaults: tuple[Any, ...]) -> bool:
    return value in defaults or (not value and any(not d for d in defaults))


def not_carried(info: dict[str, Any], image: dict[str, Any]) -> list[str]:
    """The settings of this container that a recreation would lose (empty: none)."""
    host = info.get("HostConfig") or {}
    out = [f"HostConfig.{key}={host.get(key)!r}" for key, defaults in _DEFAULTS.items()
           if key in host and not _same(host.get(key), defaults)]
    networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
    if len(networks) > 1:
        out.append(f"several networks ({', '.join(sorted(networks))})")
    for net, conf in networks.items():
        if (conf or {}).get("IPAMConfig"):
            out.append(f"a fixed address on the network {net}")
    for key in sorted((host.get("LogConfig") or {}).get("Config") or {}):
        if any(word in key.lower() for word in _SECRET_WORDS):
            out.append(f"the log option {key} (a secret: `create` takes it on its command "
                       "line only, where every local user's `ps` shows it)")
    config = info.get("Config") or {}
    if config.get("OpenStdin") and not config.get("StdinOnce"):
        # `create -i` always sets StdinOnce: the CLI cannot make it again as it was.
        out.append("its stdin kept open for every attach (`docker run -d -i`: OpenStdin with "
                   "StdinOnce false), which `docker create -i` cannot make (its stdin would "
                   "close after the first attach); vllm serve reads no stdin: run without -i, "
                   "the container can be made again")
    if config.get("Healthcheck") and \
            config.get("Healthcheck") != (image.get("Config") or {}).get("Healthcheck"):
        out.append("a health check of its own")
    return out


def command_args(info: dict[str, Any], image: dict[str, Any], full: list[str]
                 ) -> tuple[list[str], list[str]]:
    """(`--entrypoint` words, words after the image) that make `full` the main command:
    the image's entry point kept when the command still starts with it."""
    entry = list((image.get("Config") or {}).get("Entrypoint") or [])
    image_cmd = list((image.get("Config") or {}).get("Cmd") or [])
    if entry and full[:len(entry)] == entry:
        rest = full[len(entry):]
        if rest or not image_cmd:
            return [], rest
    if not full:
        raise ContainerFailed("nothing was stopped: the container has no command to run")
    return ["--entrypoint", full[0]], full[1:]


def carried_args(info: dict[str, Any], image: dict[str, Any]) -> list[str]:
    """The `create` options (before the image) that make a container like `info`, less a
    mount of the trace hook from the console's cache (an older console's way)."""
    config = info.get("Config") or {}
    host = info.get("HostConfig") or {}
    image_config = image.get("Config") or {}
    a = _Args()
    if config.get("User"):
        a.add("--user", config["User"])
    if config.get("WorkingDir") and config.get("WorkingDir") != image_config.get("WorkingDir"):
        a.add("--workdir", config["WorkingDir"])
    image_labels = image_config.get("Labels") or {}
    for key, value in sorted((config.get("Labels") or {}).items()):
        if image_labels.get(key) != value:
            a.add("--label", f"{key}={value}")
    if config.get("Tty"):
        a.words.append("--tty")
    if config.get("OpenStdin"):
        a.words.append("--interactive")
    if config.get("StopSignal") and config["StopSignal"] != image_config.get("StopSignal"):
        a.add("--stop-signal", config["StopSignal"])
    if config.get("StopTimeout") is not None:
        a.add("--stop-timeout", config["StopTimeout"])
    network = str(host.get("NetworkMode") or "default")
    if network not in ("default", "bridge"):
        a.add("--network", network)
    if config.get("Hostname") and network != "host" and not network.startswith("container:") \
            and not str(info.get("Id") or "").startswith(str(config["Hostname"])):
        a.add("--hostname", config["Hostname"])
    if config.get("Domainname"):
        a.add("--domainname", config["Domainname"])
    for alias in network_aliases(info):
        a.add("--network-alias", alias)
    published_ports = set(host.get("PortBindings") or {})
    image_ports = set(image_config.get("ExposedPorts") or {})
    for port in sorted(set(config.get("ExposedPorts") or {}) - published_ports - image_ports):
        a.add("--expose", port)
    for port, bindings in sorted((host.get("PortBindings") or {}).items()):
        for b in bindings or []:
            ip, hport = (b or {}).get("HostIp") or "", (b or {}).get("HostPort") or ""
            ip = f"[{ip}]" if ":" in ip else ip
            a.add("--publish", f"{ip}:{hport}:{port}" if ip else
                  f"{hport}:{port}" if hport else port)
    binds = [b for b in host.get("Binds") or [] if not is_hook_dir(b.split(":", 1)[0])]
    for bind in binds:
        a.add("--volume", bind)
    bound = {b.split(":")[1] for b in binds if ":" in b}
    names = {str(p.get("Destination") or ""): str(p.get("Name") or "")
             for p in info.get("Mounts") or [] if p.get("Type") == "volume"}
    for m in host.get("Mounts") or []:
        if is_hook_dir(str(m.get("Source") or "")):
            continue
        a.add("--mount", mount_spec(m, names))
        bound.add(str(m.get("Target")))
    for point in info.get("Mounts") or []:
        # An anonymous volume (the image's VOLUME, a bare `-v /path`): the new container
        # takes the old one's, by name, so its data stays.
        dest = str(point.get("Destination") or "")
        if point.get("Type") == "volume" and dest not in bound and point.get("Name"):
            a.add("--volume", f"{point['Name']}:{dest}" + ("" if point.get("RW", True)
                                                             else ":ro"))
    for path, opts in sorted((host.get("Tmpfs") or {}).items()):
        a.add("--tmpfs", f"{path}:{opts}" if opts else path)
    if host.get("ShmSize"):
        a.add("--shm-size", f"{int(host['ShmSize'])}b")
    for flag, key in (("--ipc", "IpcMode"), ("--pid", "PidMode"), ("--runtime", "Runtime"),
                      ("--cgroupns", "CgroupnsMode")):
        value = host.get(key)
        if value and not (key == "Runtime" and value == "runc"):
            a.add(flag, value)
    for d in host.get("Devices") or []:
        a.add("--device", f"{d.get('PathOnHost')}:{d.get('PathInContainer')}:"
              f"{d.get('CgroupPermissions') or 'rwm'}")
    for req in host.get("DeviceRequests") or []:
        a.add("--gpus", _gpus(req))
    if host.get("Init"):
        a.words.append("--init")
    if host.get("Privileged"):
        a.words.append("--privileged")
    for flag, key in (("--cap-add", "CapAdd"), ("--cap-drop", "CapDrop"),
                      ("--security-opt", "SecurityOpt"), ("--add-host", "ExtraHosts"),
                      ("--group-add", "GroupAdd"), ("--dns", "Dns")):
        for value in host.get(key) or []:
            a.add(flag, value)
    for u in host.get("Ulimits") or []:
        a.add("--ulimit", f"{u.get('Name')}={u.get('Soft')}:{u.get('Hard')}")
    for key, value in sorted((host.get("Sysctls") or {}).items()):
        a.add("--sysctl", f"{key}={value}")
    for flag, key in (("--memory", "Memory"), ("--memory-swap", "MemorySwap"),
                      ("--cpus", "NanoCpus"), ("--cpu-shares", "CpuShares"),
                      ("--cpuset-cpus", "CpusetCpus"), ("--oom-score-adj", "OomScoreAdj")):
        value = host.get(key)
        if value:
            if key == "NanoCpus":
                value = f"{int(value) / 1e9:g}"
            elif key in ("Memory", "MemorySwap") and int(value) > 0:
                value = f"{int(value)}b"
            a.add(flag, value)
    log = host.get("LogConfig") or {}
    if log.get("Type"):
        a.add("--log-driver", log["Type"])
    for key, value in sorted((log.get("Config") or {}).items()):
        a.add("--log-opt", f"{key}={value}")
    policy = host.get("RestartPolicy") or {}
    if policy.get("Name") and policy["Name"] != "no":
        tries = int(policy.get("MaximumRetryCount") or 0)
        a.add("--restart", policy["Name"] + (f":{tries}" if tries else ""))
    return a.words


def mount_spec(m: dict[str, Any], names: dict[str, str]) -> str:
    """A `--mount` value for one of HostConfig.Mounts, every option it was made with kept. An
    anonymous volume (`type=volume,target=/x`, no source) names the volume the old container
    has there: the new container takes it over, data and all, instead of a new empty one."""
    kind = str(m.get("Type") or "volume")
    target = str(m.get("Target") or "")
    source = str(m.get("Source") or "")
    if kind == "volume" and not source:
        source = names.get(target, "")
    parts = [f"type={kind}"] + ([f"source={source}"] if source else []) + [f"target={target}"]
    if m.get("ReadOnly"):
        parts.append("readonly")
    bind = m.get("BindOptions") or {}
    if bind.get("Propagation"):
        parts.append(f"bind-propagation={bind['Propagation']}")
    if bind.get("NonRecursive"):
        parts.append("bind-nonrecursive=true")
    volume = m.get("VolumeOptions") or {}
    if volume.get("NoCopy"):
        parts.append("volume-nocopy=true")
    tmpfs = m.get("TmpfsOptions") or {}
    if tmpfs.get("SizeBytes"):
        parts.append(f"tmpfs-size={int(tmpfs['SizeBytes'])}")
    if tmpfs.get("Mode"):
        parts.append(f"tmpfs-mode={int(tmpfs['Mode']):o}")
    return ",".join(_csv_field(p) for p in parts)


def _csv_field(part: str) -> str:
    """One `--mount` field, quoted as the CLI's CSV reader wants when it holds a comma or a
    quote (a path may)."""
    return '"' + part.replace('"', '""') + '"' if ("," in part or '"' in part) else part


_SECRET_WORDS = ("token", "password", "passwd", "secret", "key", "auth", "credential")
_BARE_FLAGS = ("--tty", "--interactive", "--init", "--privileged")


def off_argv(words: list[str], prefix: str) -> tuple[list[str], list[str]]:
    """`carried_args` with what may be secret taken off the command line, which every local
    user's `ps` shows: labels (`basicauth.users=admin:...`) into a private `--label-file`, a
    seccomp profile (inspect gives its JSON, `create` wants a file) into a private file, both
    named from `prefix`. Returns the words and the files made, for the caller to remove. A
    label with a newline (a label file is one line a label) stays a `--label`."""
    out: list[str] = []
    labels: list[str] = []
    files: list[str] = []
    at = 0
    while at < len(words):
        flag = words[at]
        if flag in _BARE_FLAGS or at + 1 >= len(words):
            out.append(flag)
            at += 1
            continue
        value = words[at + 1]
        at += 2
        if flag == "--label" and "\n" not in value:
            labels.append(value)
            continue
        if flag == "--security-opt" and value.startswith("seccomp=") and \
                value[len("seccomp="):].lstrip().startswith("{"):
            files.append(_private(f"{prefix}seccomp.json", value[len("seccomp="):] + "\n"))
            value = f"seccomp={files[-1]}"
        out += [flag, value]
    if labels:
        files.append(_private(f"{prefix}labels.list", "".join(f"{v}\n" for v in labels)))
        out += ["--label-file", files[-1]]
    return out, files


def _private(path: str, text: str) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)
    return path


def network_aliases(info: dict[str, Any]) -> list[str]:
    """The aliases the container was given on its (one) network: those the daemon adds by
    itself (its short id, its host name) left out."""
    config = info.get("Config") or {}
    own = {str(info.get("Id") or "")[:12], str(config.get("Hostname") or "")}
    networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
    out: list[str] = []
    for conf in networks.values():
        for alias in (conf or {}).get("Aliases") or []:
            if alias and alias not in own and alias not in out:
                out.append(str(alias))
    return out


def _gpus(req: dict[str, Any]) -> str:
    """`--gpus` for a device request (`all`, `N`, `"device=0,1"`, with its capabilities)."""
    ids = req.get("DeviceIDs") or []
    count = int(req.get("Count") or 0)
    which = f'"device={",".join(ids)}"' if ids else ("all" if count < 0 else str(count))
    caps = [c for group in req.get("Capabilities") or [] for c in group if c != "gpu"]
    return ",".join([which, *(f"capabilities={c}" for c in caps)]) if caps else which


_ENV_LINE_LIMIT = 64 * 1024
"""The longest line the CLI reads from an `--env-file` (bufio.Scanner's token limit)."""


def env_file(path: str, env: dict[str, str]) -> None:
    """The environment as a private `--env-file` (0600): never on a command line."""
    lines = []
    for key, value in env.items():
        if not key or "=" in key or any(ch.isspace() for ch in key) or "\n" in value:
            raise ContainerFailed(f"nothing was stopped: the environment variable {key!r} "
                                  "cannot be passed to the new container (a newline or "
                                  "space in it)")
        if len(key) + len(value) + 1 >= _ENV_LINE_LIMIT:
            raise ContainerFailed(f"nothing was stopped: the environment variable {key} is "
                                  f"{len(value)} bytes long, more than an env file's line "
                                  f"holds ({_ENV_LINE_LIMIT // 1024} KiB), and on the command "
                                  "line every local user's `ps` would show it")
        lines.append(f"{key}={value}\n")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="strict") as fh:
        fh.writelines(lines)


def full_command(info: dict[str, Any], old_server: list[str], new_server: list[str]
                 ) -> list[str]:
    """The container's new main command: the old one with its server part (after any init,
    `old_server`) replaced by `new_server`."""
    main = [str(w) for w in ([info.get("Path")] if info.get("Path") else [])
            + list(info.get("Args") or [])]
    if old_server and main[len(main) - len(old_server):] == list(old_server):
        return main[:len(main) - len(old_server)] + list(new_server)
    if list(new_server) == list(old_server):
        return main
    raise ContainerFailed("nothing was stopped: the container's command "
                          f"({' '.join(main)[:200]}) does not end with the server's command "
                          "line, so an edited one cannot replace it")


def install_hook(plan: dict[str, Any], hook: Callable[[dict[str, Any]], None]) -> str:
    """The plan's trace hook written on the host, to be copied into the new container
    (`copy_hook`); its directory, "" when the plan has none."""
    hook_dir = (plan.get("hook") or {}).get("dir") or ""
    if hook_dir:
        hook(plan)
    return hook_dir


def hook_inside(hook_dir: str) -> str:
    """Where the new container has its own copy of the trace hook: a path of its own, so that
    it depends on nothing of the console's cache (cleared, the container still starts)."""
    return HOOK_INSIDE + os.path.basename(hook_dir.rstrip("/"))


def env_inside(env: dict[str, str], hook_dir: str) -> dict[str, str]:
    """The environment as the new container must have it: the hook's directory on the host
    (`PYTHONPATH`, the hook's own variables) replaced by its copy inside (`copy_hook`)."""
    if not hook_dir:
        return dict(env)
    return {k: v.replace(hook_dir, hook_inside(hook_dir)) for k, v in env.items()}


def copy_hook(runtime: str, container: str, hook_dir: str) -> str:
    """The hook copied into the created container (`cp` of a tar stream: the missing parent
    directories made 0755, readable by the container's user, whoever that is: nothing secret
    in it); its path inside."""
    inside = hook_inside(hook_dir)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in hook_files():
            with open(os.path.join(hook_dir, name), "rb") as fh:
                data = fh.read()
            entry = tarfile.TarInfo(f"{inside.lstrip('/')}/{name}")
            entry.size, entry.mode, entry.mtime = len(data), 0o644, int(time.time())
            tar.addfile(entry, io.BytesIO(data))
    run_tool([runtime, "cp", "-", f"{container}:/"], timeout=60, what=f"{runtime} cp",
             stdin=buf.getvalue())
    return inside


def restart_arg(info: dict[str, Any]) -> str:
    """The container's restart policy as `--restart` takes it."""
    policy = (info.get("HostConfig") or {}).get("RestartPolicy") or {}
    name = str(policy.get("Name") or "no")
    tries = int(policy.get("MaximumRetryCount") or 0)
    return name + (f":{tries}" if name == "on-failure" and tries else "")


def restore_command(runtime: str, name: str, aside: str, policy: str) -> str:
    """What a person runs to go back to the container set aside."""
    back = f"{runtime} rename {aside} {name}"
    if policy != "no":
        back += f" && {runtime} update --restart {policy} {name}"
    return f"{runtime} rm -f {name}; {back} && {runtime} start {name}"


def run(plan: dict[str, Any], status: StatusFile, left: Callable[[], bool],
        api_key: str, hook: Callable[[dict[str, Any]], None]) -> None:
    """Recreate the container with the plan's command line and environment (and trace hook)
    and wait until its new server is ready (the module's docstring has the order)."""
    box = dict(plan["container"])
    runtime, ref = box["runtime"], box["ref"]
    t = plan["timeouts"]
    before = preflight(plan)
    name = str(before.get("Name") or "").lstrip("/") or ref
    old_id, old_pid = str(before["Id"]), _main_pid(before)
    image_ref, image = image_of(before, runtime)
    labels = (before.get("Config") or {}).get("Labels") or {}
    if labels.get(_COMPOSE_PROJECT):
        raise ContainerFailed(f"nothing was stopped: the container {name} is a service of "
                              f"the compose project {labels[_COMPOSE_PROJECT]}, "
                              "which compose recreates, not the console by hand")
    lost = not_carried(before, image)
    if lost:
        raise ContainerFailed(f"nothing was stopped: the container {name} has settings the "
                              f"console cannot carry over to a new one: {'; '.join(lost)}")
    command = full_command(before, list(box.get("argv") or plan.get("argv") or []),
                           list(plan.get("argv") or []))
    entry, words = command_args(before, image, command)
    hook_dir = install_hook(plan, hook)
    env = env_inside({str(k): str(v) for k, v in (plan.get("env") or {}).items()}, hook_dir)
    stamp = plan.get("id") or str(int(time.time()))
    fresh, aside = f"{name}-vllm-console-new-{stamp}", f"{name}-vllm-console-old-{stamp}"
    policy = restart_arg(before)
    restore = restore_command(runtime, name, aside, policy)
    private = os.path.join(os.path.dirname(plan["paths"]["status"]), f"create-{stamp}-")
    envs = f"{private}env.list"
    files = [envs]
    status.write("note", f"{runtime} create --name {fresh} ... {image_ref}: the container "
                 f"{name} made again with the change")
    new_id = ""
    try:
        env_file(envs, env)
        carried, more = off_argv(carried_args(before, image), private)
        files += more
        new_id = cli(runtime, "create", "--name", fresh, "--env-file", envs, *carried,
                     *entry, image_ref, *words, timeout=120,
                     what=f"{runtime} create").strip().splitlines()[-1]
        if hook_dir:
            copy_hook(runtime, new_id, hook_dir)
        if policy != "no":  # never started by the daemon while it is set aside
            cli(runtime, "update", "--restart", "no", old_id, timeout=30,
                what=f"{runtime} update --restart no {name}")
    except ContainerFailed as exc:
        if new_id:
            _quietly(runtime, "rm", "-f", new_id)
        text = str(exc)
        raise ContainerFailed(text if text.startswith("nothing was stopped") else
                              f"nothing was stopped: {text}") from None
    finally:
        for path in files:
            with contextlib.suppress(OSError):
                os.unlink(path)
    status.write("note", f"the old container waits, stopped, as {aside} (restart policy no: "
                 "the daemon never starts it meanwhile) until the new server is ready, then "
                 f"it is removed; to go back to it: `{restore}`")
    status.write("stopping", f"{runtime} stop {name} (its processes get SIGTERM, SIGKILL "
                 f"after {float(t['term']):g} s)", processes=[{"pid": old_pid, "comm": name}])
    status.write("term-sent", f"{runtime} stop {name}")
    try:
        cli(runtime, "stop", "-t", str(int(t["term"])), old_id,
            timeout=float(t["term"]) + float(t["kill"]) + 60, what=f"{runtime} stop {name}")
    except ContainerFailed as exc:
        _quietly(runtime, "rm", "-f", new_id)
        if policy != "no":
            _quietly(runtime, "update", "--restart", policy, old_id)
        raise ContainerFailed(f"{exc}; the new container was removed") from None
    status.write("stopped", f"the container's old server (pid {old_pid}) is gone",
                 pids=[old_pid], killed=[])
    try:
        cli(runtime, "rename", old_id, aside, timeout=30)
        cli(runtime, "rename", new_id, name, timeout=30)
        cli(runtime, "start", new_id, timeout=120, what=f"{runtime} start {name}")
    except ContainerFailed as exc:
        raise ContainerFailed(_rollback(runtime, name, old_id, new_id, aside, policy,
                                        str(exc))) from None
    plan["container"] = {**box, "id": new_id}
    now = _state(plan)
    pid = _main_pid(now)
    kept = (f"; the container it replaced is kept, stopped, as {aside} (restart policy no); "
            f"to go back to it: `{restore}`; `{runtime} rm {aside}` removes it")
    if not pid:
        raise ContainerFailed(f"the new container {name} is not running after start (exit "
                              f"code {(now.get('State') or {}).get('ExitCode')})" + kept)
    # The console may leave (Ctrl+C): the step still waits for the outcome, so that the
    # container set aside is removed or named with its way back, never forgotten.
    follow_start(plan, status, pid, lambda: False, api_key,
                 f"new server pid {pid} (the container {name} made again: "
                 f"{new_id[:12]}, was {old_id[:12]})", failed_note=kept,
                 on_ready=lambda: _drop(runtime, old_id, aside, status))


def _quietly(runtime: str, *args: str) -> str:
    """One clean-up command; its error ("" when it worked)."""
    try:
        cli(runtime, *args, timeout=60)
    except ContainerFailed as exc:
        return str(exc)
    return ""


def _rollback(runtime: str, name: str, old_id: str, new_id: str, aside: str, policy: str,
              cause: str) -> str:
    """The old container put back (the new one removed, the name and restart policy given
    back, started); the message that says so, or, when a step of it fails, that the server
    is down, which container is where, and what to run."""
    steps: list[tuple[str, tuple[str, ...]]] = [
        (f"{runtime} rm -f {new_id[:12]}", ("rm", "-f", new_id)),
        (f"{runtime} rename {aside} {name}", ("rename", old_id, name))]
    if policy != "no":
        steps.append((f"{runtime} update --restart {policy} {name}",
                      ("update", "--restart", policy, old_id)))
    steps.append((f"{runtime} start {name}", ("start", old_id)))
    for at, (shown, args) in enumerate(steps):
        failed = _quietly(runtime, *args)
        if not failed:
            continue
        where = {0: f"the new container {new_id[:12]} is still there (maybe under the name "
                    f"{name}) and the old one is {aside}, stopped",
                 1: f"the new container is removed; the old one ({old_id[:12]}) is {aside}, "
                    "stopped"}.get(at, f"the new container is removed; the old one "
                                       f"({old_id[:12]}) is {name} again, stopped")
        todo = " && ".join(s for s, _ in steps[at:])
        return (f"the server is down: the new container did not start ({cause}); putting the "
                f"old one back failed at `{shown}` ({failed}). Now {where}. To bring the old "
                f"server back, fix that, then run: `{todo}`")
    return (f"the new container did not start ({cause}); it was removed, and the old "
            f"container {name} was started again as it was")

def _drop(runtime: str, old_id: str, aside: str, status: StatusFile) -> None:
    """The replaced container removed once the new server is ready (its anonymous volumes
    stay: the new container has them)."""
    try:
        cli(runtime, "rm", old_id, timeout=60)
    except ContainerFailed as exc:
        status.write("note", f"the old container {aside} could not be removed: {exc}")
