"""A recreated container is the old one, field by field (issue 44, item 5), on the tests' own
real Docker daemon: every field of `docker inspect` before and after a recreation, over a
matrix of the settings people run vLLM with, differs only where a new container must (its id,
name, times, state, paths of its own) or where the recreation says it does (an anonymous
volume named, so that the new container has its data). A setting the console cannot carry is
refused by name before anything is stopped, never dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.containers import sim_box
from tests.docker import IMAGE, Dockerd
from tests.sim.test_sim_serve import free_port
from vllm_console.console.hostside.containers import main_argv
from vllm_console.console.hostside.restart import recreate
from vllm_console.console.hostside.restart.container import ContainerFailed
from vllm_console.console.hostside.restart.status import StatusFile

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

NETWORK = "vllm-console-adv-net"

# What a new container has of its own, whatever it was made from.
OWN = ("Id", "Created", "Name", "State", "ResolvConfPath", "HostnamePath", "HostsPath",
       "LogPath", "RestartCount", "GraphDriver", "SizeRw", "SizeRootFs", "MountLabel",
       "ProcessLabel", "AppArmorProfile", "ExecIDs", "Platform", "Driver", "Path", "Args",
       "NetworkSettings.SandboxID", "NetworkSettings.SandboxKey", "NetworkSettings.Ports",
       "NetworkSettings.Bridge", "NetworkSettings.HairpinMode",
       "NetworkSettings.LinkLocalIPv6Address", "NetworkSettings.LinkLocalIPv6PrefixLen",
       "NetworkSettings.SecondaryIPAddresses", "NetworkSettings.SecondaryIPv6Addresses",
       "NetworkSettings.EndpointID", "NetworkSettings.Gateway", "NetworkSettings.IPAddress",
       "NetworkSettings.IPPrefixLen", "NetworkSettings.MacAddress",
       "NetworkSettings.GlobalIPv6Address", "NetworkSettings.GlobalIPv6PrefixLen",
       "NetworkSettings.IPv6Gateway", "Config.Hostname",
       # What `docker start --attach` would attach: `create` always sets stdout and stderr,
       # `run -d` none; a detached start (the console's) reads none of them.
       "Config.AttachStdin", "Config.AttachStdout", "Config.AttachStderr")
_PER_NETWORK = ("NetworkID", "EndpointID", "Gateway", "IPAddress", "IPPrefixLen",
                "IPv6Gateway", "GlobalIPv6Address", "GlobalIPv6PrefixLen", "MacAddress",
                "DriverOpts", "DNSNames")


def flat(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf of an inspection by its dotted path (lists whole: their order is theirs)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flat(item, f"{path}.{key}" if path else str(key)))
        return out
    return {path: value}


def owned(path: str, old_id: str) -> bool:
    if any(path == p or path.startswith(p + ".") for p in OWN):
        return True
    head, _, last = path.rpartition(".")
    return head.startswith("NetworkSettings.Networks.") and last in _PER_NETWORK


@pytest.fixture
def made(dockerd: Dockerd, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Containers to remove after the test; DOCKER_HOST naming the tests' daemon."""
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    names: list[str] = []
    dockerd.docker("network", "create", NETWORK, check=False)
    yield names
    for name in names:
        dockerd.docker("rm", "-f", "-v", name, check=False, timeout=60)
    dockerd.docker("network", "rm", NETWORK, check=False)
    dockerd.docker("volume", "rm", "-f", "vllm-console-adv-named", check=False)


def recreated(dockerd: Dockerd, old: str, new: str, env: dict[str, str]) -> dict[str, Any]:
    """`new` made from `old`'s inspection alone, as a recreation makes it, and started in its
    place (a running container's network settings are those its start adds)."""
    before = sim_box.inspect(dockerd, old)
    image_ref, image = recreate.image_of(before, "docker")
    assert recreate.not_carried(before, image) == []
    entry, words = recreate.command_args(before, image, main_argv(before))
    with tempfile.TemporaryDirectory() as tmp:
        envs = os.path.join(tmp, "env.list")
        recreate.env_file(envs, env)
        carried, _files = recreate.off_argv(recreate.carried_args(before, image),
                                            os.path.join(tmp, "create-"))
        dockerd.docker("create", "--name", new, "--env-file", envs, *carried, *entry,
                       image_ref, *words)
    dockerd.docker("stop", "-t", "1", old)
    dockerd.docker("start", new)
    return sim_box.inspect(dockerd, new)


def test_every_field_of_docker_inspect_is_carried_across_a_recreation(
        dockerd: Dockerd, made: list[str], tmp_path: Path) -> None:
    """The settings of the adversarial pass (network alias, tmpfs size and mode, a
    non-recursive bind, a no-copy volume, --expose, a seccomp profile of its own, whose JSON
    inspect gives where `create` wants a file) and the ones it found carried, on one
    container: after the recreation, no field differs but those the new container owns and
    the anonymous volumes, now named (the same volumes)."""
    old, new = "vllm-console-adv-old", "vllm-console-adv-new"
    made += [old, new]
    bind = tmp_path / "weights"
    bind.mkdir()
    profile = tmp_path / "seccomp.json"
    profile.write_text('{"defaultAction": "SCMP_ACT_ALLOW"}')
    dockerd.docker("volume", "create", "vllm-console-adv-named")
    dockerd.docker(
        "run", "-d", "-t", "--name", old, "--network", NETWORK, "--network-alias", "adv-llm",
        *sim_box.system_mounts(),
        "--mount", "type=tmpfs,target=/scratch,tmpfs-size=2097152,tmpfs-mode=0700",
        "--mount", f"type=bind,source={bind},target=/weights,readonly,bind-nonrecursive=true",
        "--mount", "type=volume,source=vllm-console-adv-named,target=/named,volume-nocopy",
        "--mount", "type=volume,target=/anonmount", "-v", "/anon",
        "--expose", "9999", "--restart", "on-failure:3", "--cap-add", "SYS_PTRACE",
        "--security-opt", "no-new-privileges", "--security-opt", f"seccomp={profile}",
        "--ulimit", "nofile=1024:2048",
        "--shm-size", "64m", "--tmpfs", "/t:size=1m", "--label", "team=inference",
        "--label", "multi=line one\nline two", "--user", "0:0", "--workdir", "/tmp",
        "--add-host", "models.internal:10.0.0.7", "--stop-signal", "SIGINT",
        "--stop-timeout", "7", "--cpus", "1", "--memory", "256m", "--log-opt", "max-size=1m",
        "--hostname", "adv-host", "--dns", "10.0.0.53", "--ipc", "shareable",
        "-e", "HF_TOKEN=hf_secret", "--entrypoint", "/usr/bin/sleep", IMAGE, "600")
    before = sim_box.inspect(dockerd, old)
    env = dict(e.split("=", 1) for e in before["Config"]["Env"])
    after = recreated(dockerd, old, new, env)
    assert after["State"]["Running"] is True
    a, b = flat(before), flat(after)
    differs = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
               if a.get(k) != b.get(k) and not owned(k, str(before["Id"]))}
    anon = {m["Destination"]: m["Name"] for m in before["Mounts"]
            if m["Type"] == "volume" and m["Destination"] in ("/anon", "/anonmount")}
    binds = differs.pop("HostConfig.Binds", (None, None))
    assert set(binds[1] or []) - set(binds[0] or []) == {f"{anon['/anon']}:/anon"}, binds
    mounts = differs.pop("HostConfig.Mounts", None)
    if mounts is not None:  # the anonymous --mount now names its volume; nothing else
        named = [{**m, "Source": anon["/anonmount"]} if m["Target"] == "/anonmount" else m
                 for m in mounts[0]]
        assert named == mounts[1], mounts
    kept = {m["Destination"]: m["Name"] for m in after["Mounts"] if m["Type"] == "volume"}
    assert kept["/anon"] == anon["/anon"]
    assert kept["/anonmount"] == anon["/anonmount"]
    differs.pop("Mounts", None)  # the same volumes, listed in another order
    # `-v /anon` declared it in Config.Volumes; the new container has it by name instead.
    assert differs.pop("Config.Volumes./anon", None) in (None, ({}, None))
    aliases = "NetworkSettings.Networks." + NETWORK + ".Aliases"
    if aliases in differs:  # each container's short id is an alias the daemon gives it
        old_aliases, new_aliases = differs.pop(aliases)
        assert [x for x in old_aliases if x != before["Id"][:12]] == \
            [x for x in new_aliases if x != after["Id"][:12]]
    assert differs == {}, json.dumps(differs, indent=1, default=str)


@pytest.mark.parametrize(("option", "named"), [("--network", f"{NETWORK}-2"),
                                                ("-i", "`docker run -d -i`: OpenStdin with "
                                                       "StdinOnce false"),
                                                ("--log-opt", "splunk-token"),
                                                ("-e", "BIG is 122880 bytes long")])
def test_a_setting_that_cannot_be_carried_is_refused_by_name_before_anything_stops(
        dockerd: Dockerd, made: list[str], tmp_path: Path, option: str, named: str) -> None:
    """A second network (one `create` cannot attach two), `run -d -i` (whose StdinOnce
    false `create -i` cannot make) and a secret log option (`create` takes it on its command
    line only, which `ps` shows) and a 120 KB environment value (longer than an env file's
    line) are refused, naming it (not "Run 'docker create --help'"); the container runs on
    untouched."""
    name = "vllm-console-adv-refused"
    made.append(name)
    splunk = ["--log-driver", "splunk", "--log-opt", "splunk-token=SeCrEt",
              "--log-opt", "splunk-url=http://127.0.0.1:9", "--log-opt",
              "splunk-verify-connection=false"] if option == "--log-opt" else []
    big = ["-e", "BIG=" + "x" * 120 * 1024] if option == "-e" else []
    run_args = ("run", "-d", *(["-i"] if option == "-i" else []), *splunk, *big,
                "--name", name, "--network", NETWORK, *sim_box.system_mounts(),
                "--entrypoint", "/usr/bin/sleep", IMAGE, "600")
    try:
        dockerd.docker(*run_args)
    except RuntimeError as exc:
        # The setup, not what is tested: docker 20.10's containerd failed this start once in
        # three fresh-clone runs ("failed to retrieve spec: unexpected EOF", the 120 KB
        # environment). The container is made once more; anything else fails the test.
        if "failed to retrieve spec" not in str(exc):
            raise
        dockerd.docker("rm", "-f", name, check=False)
        dockerd.docker(*run_args)
    dockerd.docker("network", "create", f"{NETWORK}-2")
    try:
        if option == "--network":
            dockerd.docker("network", "connect", f"{NETWORK}-2", name)
        before = sim_box.inspect(dockerd, name)
        plan = {"id": "t9", "container": {"runtime": "docker", "ref": name,
                                          "id": before["Id"], "recreate": True,
                                          "argv": ["/usr/bin/sleep", "600"]},
                "argv": ["/usr/bin/sleep", "600"], "pid": before["State"]["Pid"],
                "env": dict(e.split("=", 1) for e in before["Config"]["Env"] or []),
                "port": None, "timeouts": {"term": 1, "kill": 5, "free": 5, "startup": 30},
                "paths": {"status": str(tmp_path / "s")}}
        status = StatusFile(str(tmp_path / "s"))
        try:
            with pytest.raises(ContainerFailed, match="nothing was stopped: ") as refused:
                recreate.run(plan, status, lambda: False, "", lambda _plan: None)
        finally:
            status.close()
        assert named in str(refused.value)
        if option == "-i":  # what to do about it, not only what it is
            assert "run without -i, the container can be made again" in str(refused.value)
        after = sim_box.inspect(dockerd, name)
        assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    finally:
        dockerd.docker("rm", "-f", name, check=False)
        dockerd.docker("network", "rm", f"{NETWORK}-2", check=False)


def test_no_secret_of_the_containers_config_reaches_ps_during_a_recreation(
        dockerd: Dockerd, made: list[str], tmp_path: Path) -> None:
    """Every local user's `ps` shows command lines: sampled every few milliseconds through a
    traced restart (the container made again), no command line holds the container's secrets
    (a label with credentials, an environment variable), and the new container has them."""
    base = Path(tempfile.mkdtemp(prefix="sim-box-", dir="/tmp"))
    base.chmod(0o755)
    tree = sim_box.sim_tree(base, free_port())
    name = "vllm-console-secrets"
    made.append(name)
    label = "basicauth.users=admin:$apr1$Hq9SeCrEt"
    try:
        sim_box.run(dockerd, tree, name, "--label", label, "-e", "HF_TOKEN=hf_SeCrEt42")
        seen: set[str] = set()
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for pid in os.listdir("/proc"):
                    if pid.isdigit():
                        with contextlib.suppress(OSError):
                            seen.add(Path(f"/proc/{pid}/cmdline").read_bytes()
                                     .replace(b"\0", b" ").decode(errors="replace"))
                time.sleep(0.002)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            hosts = tmp_path / "h"
            hosts.write_text(f'[hosts.box]\nlocal = true\n[hosts.box.serve]\nurl = "{tree.url}"\n')
            done = sim_box.run_cli(dockerd, "restart", "box", "--config", str(hosts), "--yes",
                                   "--trace")
        finally:
            stop.set()
            sampler.join(10)
        assert done.returncode == 0, done.stdout + done.stderr
        creates = [c for c in seen if " create " in c and "--name" in c]
        assert creates, "the sampler saw the `docker create`"
        leaked = [c for c in seen if "SeCrEt" in c]
        assert leaked == [], leaked
        after = sim_box.inspect(dockerd, name)
        assert after["Config"]["Labels"]["basicauth.users"] == "admin:$apr1$Hq9SeCrEt"
        assert "HF_TOKEN=hf_SeCrEt42" in after["Config"]["Env"]
    finally:
        sim_box.kill_host_servers(tree)
        shutil.rmtree(base, ignore_errors=True)
