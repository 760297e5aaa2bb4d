"""Recreating a container with a change (a traced restart, an edited launch), on the tests' own
real Docker daemon, with small containers (no vLLM: the real server's recreation is in
`test_container_discovery.py`): what the new container keeps of the old one's configuration,
and what happens when the new one cannot start (the old one back, under its name, running).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker import IMAGE, Dockerd, host_mounts
from tests.real_vllm.fixture import RealVllm
from vllm_console.console.hostside.restart import recreate
from vllm_console.console.hostside.restart.container import ContainerFailed
from vllm_console.console.hostside.restart.status import StatusFile

pytestmark = [pytest.mark.docker, pytest.mark.real_vllm, pytest.mark.timeout(300)]


@pytest.fixture
def docker_host(dockerd: Dockerd, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DOCKER_HOST", dockerd.host)
    return dockerd.host


@pytest.fixture
def names(dockerd: Dockerd) -> Iterator[list[str]]:
    """Containers and volumes to remove after the test, whatever happened."""
    made: list[str] = []
    yield made
    for name in made:
        dockerd.docker("rm", "-f", "-v", name, check=False, timeout=60)
        dockerd.docker("volume", "rm", "-f", name, check=False)


def inspect(dockerd: Dockerd, ref: str) -> dict[str, Any]:
    return dict(json.loads(dockerd.docker("inspect", ref).stdout)[0])


KEPT_HOST = ("Binds", "NetworkMode", "ShmSize", "RestartPolicy", "CapAdd", "Ulimits",
             "Tmpfs", "Memory", "NanoCpus", "ExtraHosts", "LogConfig", "GroupAdd", "Mounts")
KEPT_CONFIG = ("Env", "Labels", "User", "WorkingDir", "StopSignal", "Entrypoint", "Cmd",
               "Image")


def test_a_recreated_container_keeps_what_the_old_one_was_made_with(
        dockerd: Dockerd, real_vllm: RealVllm, docker_host: str, tmp_path: Path,
        names: list[str]) -> None:
    """A container made with many `docker run` options and recreated from its inspection
    alone: the new one's configuration equals the old one's, and it has the old one's
    anonymous volume, data and all."""
    old, new, volume = "vllm-console-carry-old", "vllm-console-carry-new", "vllm-console-carry"
    names += [old, new, volume]
    weights = tmp_path / "weights"
    weights.mkdir()
    dockerd.docker("volume", "create", volume)
    dockerd.docker(
        "run", "-d", "--name", old, "--network", "host", *host_mounts(real_vllm),
        "-v", f"{weights}:/weights:ro", "-v", f"{volume}:/cache", "-v", "/scratch",
        "--mount", f"type=bind,source={weights},target=/also-weights,readonly",
        "--tmpfs", "/tmp:size=64m", "--shm-size", "256m", "--restart", "on-failure:3",
        "--cap-add", "SYS_PTRACE", "--ulimit", "nofile=4096:8192",
        "--memory", "512m", "--cpus", "1.5", "--add-host", "models.internal:10.0.0.7",
        "--group-add", "44", "--log-opt", "max-size=10m", "--stop-signal", "SIGINT",
        "--user", "0:0", "--workdir", "/weights", "--label", "team=inference",
        "-e", "HF_TOKEN=hf_secret", "-e", "VLLM_LOGGING_LEVEL=DEBUG",
        "--entrypoint", "/usr/bin/sleep", IMAGE, "600")
    dockerd.docker("exec", old, "/bin/sh", "-c", "echo kept > /scratch/data")
    before = inspect(dockerd, old)
    image_ref, image = recreate.image_of(before, "docker")
    assert image_ref == IMAGE  # the tag still names the image it ran
    assert recreate.not_carried(before, image) == []
    entry, words = recreate.command_args(before, image, ["/usr/bin/sleep", "600"])
    env = tmp_path / "env.list"
    recreate.env_file(str(env), {"HF_TOKEN": "hf_secret", "VLLM_LOGGING_LEVEL": "DEBUG"})
    assert oct(os.stat(env).st_mode & 0o777) == "0o600"
    args = recreate.carried_args(before, image)
    assert "hf_secret" not in " ".join(args)  # the environment goes by the private file
    dockerd.docker("create", "--name", new, "--env-file", str(env), *args, *entry, image_ref,
                   *words)
    after = inspect(dockerd, new)
    scratch = [m["Name"] for m in before["Mounts"] if m["Destination"] == "/scratch"]
    for key in KEPT_HOST:
        if key == "Binds":  # the anonymous volume now named: the old one's, taken over
            assert set(after["HostConfig"][key]) == \
                set(before["HostConfig"][key]) | {f"{scratch[0]}:/scratch"}
        else:
            assert after["HostConfig"][key] == before["HostConfig"][key], key
    others = {k: (v, after["HostConfig"].get(k)) for k, v in before["HostConfig"].items()
              if k not in ("Binds", "Mounts") and after["HostConfig"].get(k) != v}
    assert others == {}, "every other host setting is the same"
    for key in KEPT_CONFIG:
        if key == "Env":  # the image's PATH first, then the same variables
            assert set(after["Config"][key]) == set(before["Config"][key])
        else:
            assert after["Config"][key] == before["Config"][key], key
    assert [m["Name"] for m in after["Mounts"] if m["Destination"] == "/scratch"] == scratch
    dockerd.docker("stop", "-t", "1", old)
    dockerd.docker("start", new)
    assert dockerd.docker("exec", new, "/bin/cat", "/scratch/data").stdout == "kept\n"


def test_a_new_container_that_cannot_start_gives_the_name_back_to_the_old_one(
        dockerd: Dockerd, real_vllm: RealVllm, docker_host: str, tmp_path: Path,
        names: list[str]) -> None:
    """An edited command line naming a program the image lacks: `create` accepts it, `start`
    fails; the new container is removed, the old one has its name back and runs again, and
    the step says so."""
    name = "vllm-console-rollback"
    names.append(name)
    dockerd.docker("run", "-d", "--name", name, "--network", "host", *host_mounts(real_vllm),
                   "--entrypoint", "/usr/bin/sleep", IMAGE, "600")
    before = inspect(dockerd, name)
    private = tmp_path / "private"
    private.mkdir()
    plan = {"id": "t1", "container": {"runtime": "docker", "ref": name, "id": before["Id"],
                                      "restart_policy": "no", "recreate": True,
                                      "argv": ["/usr/bin/sleep", "600"]},
            "argv": ["/usr/bin/no-such-program", "600"], "env": {"LANG": "C.UTF-8"},
            "pid": before["State"]["Pid"], "port": None, "url": "",
            "timeouts": {"term": 1, "kill": 5, "free": 5, "startup": 30},
            "paths": {"status": str(private / "restart-t1.status")}}
    status = StatusFile(plan["paths"]["status"])  # type: ignore[index]
    try:
        with pytest.raises(ContainerFailed) as failed:
            recreate.run(plan, status, lambda: False, "", lambda _plan: None)
    finally:
        status.close()
    message = str(failed.value)
    assert "the new container did not start" in message
    assert f"the old container {name} was started again as it was" in message
    after = inspect(dockerd, name)
    assert after["Id"] == before["Id"]
    assert after["State"]["Running"] is True
    left = dockerd.docker("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert not [n for n in left if n.startswith(f"{name}-vllm-console-")], left
    assert not list(private.glob("create-*")), "the env file is gone"
    steps = [json.loads(line)["step"] for line in
             (private / "restart-t1.status").read_text().splitlines()]
    assert "stopped" in steps


def test_a_container_with_a_setting_it_cannot_carry_is_not_recreated(
        dockerd: Dockerd, real_vllm: RealVllm, docker_host: str, tmp_path: Path,
        names: list[str]) -> None:
    """A read-only root file system is not among what a recreation carries over: the step
    refuses, names it, and the container runs on untouched."""
    name = "vllm-console-not-carried"
    names.append(name)
    dockerd.docker("run", "-d", "--name", name, "--network", "host", "--read-only",
                   *host_mounts(real_vllm), "--entrypoint", "/usr/bin/sleep", IMAGE, "600")
    before = inspect(dockerd, name)
    plan = {"id": "t2", "container": {"runtime": "docker", "ref": name, "id": before["Id"],
                                      "recreate": True, "argv": ["/usr/bin/sleep", "600"]},
            "argv": ["/usr/bin/sleep", "600"], "env": {}, "pid": before["State"]["Pid"],
            "port": None, "timeouts": {"term": 1, "kill": 5, "free": 5, "startup": 30},
            "paths": {"status": str(tmp_path / "s")}}
    status = StatusFile(str(tmp_path / "s"))
    try:
        with pytest.raises(ContainerFailed, match="nothing was stopped: .*ReadonlyRootfs"):
            recreate.run(plan, status, lambda: False, "", lambda _plan: None)
    finally:
        status.close()
    after = inspect(dockerd, name)
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]


def test_under_restart_always_the_daemons_start_is_never_this_restart(
        dockerd: Dockerd, real_vllm: RealVllm, docker_host: str, tmp_path: Path,
        names: list[str]) -> None:
    """`--restart always`: the console's `docker restart` starts a main process that exits at
    once, and the daemon starts the container again by itself. The step reports a failure that
    names the daemon's start, never the daemon's new process as this restart's server."""
    from vllm_console.console.hostside.restart import container as step

    name = "vllm-console-policy-always"
    names.append(name)
    state = tmp_path / "state"
    state.mkdir()
    # Run 1 (now) and run 3 (the daemon's) sleep; run 2 (the console's restart) exits 3.
    script = ("n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; "
              "[ $n = 2 ] && exit 3; exec /usr/bin/sleep 600")
    dockerd.docker("run", "-d", "--name", name, "--network", "host", "--restart", "always",
                   *host_mounts(real_vllm), "-v", f"{state}:/state",
                   "--entrypoint", "/bin/sh", IMAGE, "-c", script)
    before = inspect(dockerd, name)
    plan = {"id": "t3", "container": {"runtime": "docker", "ref": name, "id": before["Id"],
                                      "restart_policy": "always"},
            "argv": ["/bin/sh", "-c", script], "env": {}, "pid": before["State"]["Pid"],
            "port": None, "url": "http://127.0.0.1:9/",
            "timeouts": {"term": 1, "kill": 5, "free": 5, "startup": 30},
            "paths": {"status": str(tmp_path / "s")}}
    status = StatusFile(str(tmp_path / "s"))
    failure = ""
    try:
        step.run(plan, status, lambda: False, "")
    except step.ContainerFailed as exc:  # seen not running right after the restart
        failure = str(exc)
    finally:
        status.close()
    records = [json.loads(line) for line in (tmp_path / "s").read_text().splitlines()]
    final = next((r for r in records if r.get("final")), {})
    failure = failure or (final.get("message", "") if final.get("step") == "failed" else "")
    assert "that restart is the daemon's, not this one" in failure, records
    assert not [r for r in records if r["step"] == "ready"]
    after = inspect(dockerd, name)
    assert after["State"]["Running"] is True  # the daemon's start, left as it is
    assert (state / "n").read_text().strip() == "3"
