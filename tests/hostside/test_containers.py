"""The container kind of "where the server runs", its pure parts: which container's main
command is a server, the port it answers on from the host, its start time, the one line for a
refused socket, and the order of a `docker logs --timestamps` output's two streams. (The real
daemon and a real vLLM in a container: tests/containers.)"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from vllm_console.console.hostside import containers
from vllm_console.console.hostside.discover import server_entry
from vllm_console.console.hostside.procfs import container_in_cgroup

SERVE = ["/opt/venv/bin/vllm", "serve", "/models/target", "--port", "8001"]


@pytest.mark.parametrize(("argv", "server"), [
    (SERVE, SERVE),
    (["/sbin/docker-init", "--", *SERVE], SERVE),
    (["tini", *SERVE], SERVE),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"],
     ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]),
    (["/bin/sh", "-c", "vllm serve /models/target"], None),  # a shell: not the server itself
    (["vllm", "bench", "serve"], None),
    ([], None),
])
def test_a_containers_main_command_is_a_server_or_not(argv: list[str],
                                                       server: list[str] | None) -> None:
    assert containers.server_argv(argv, server_entry) == server


def test_the_port_a_container_answers_on_from_the_host() -> None:
    host_network = {"HostConfig": {"NetworkMode": "host"}}
    published = {"HostConfig": {"NetworkMode": "bridge", "PortBindings": {
        "8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18000"}]}}}
    assert containers.host_port(host_network, 8001) == 8001
    assert containers.host_port(published, 8000) == 18000
    assert containers.host_port(published, 8001) == 0  # not published: not reachable


def test_started_at_reads_docker_nanoseconds_and_the_zero_time() -> None:
    when = containers.started_at({"State": {"StartedAt": "2026-12-04T13:32:05.123456789Z"}})
    assert when == pytest.approx(1796391125.123456)
    assert containers.started_at({"State": {"StartedAt": "0001-01-01T00:00:00Z"}}) is None
    assert containers.started_at({}) is None


def test_describe_gives_the_contracts_keys_and_compose_labels() -> None:
    info = {"Id": "abc", "Name": "/vllm", "Config": {"Image": "vllm/vllm-openai:v0.32.0",
            "Labels": {"com.docker.compose.project": "serving",
                       "com.docker.compose.service": "vllm"}},
            "HostConfig": {"RestartPolicy": {"Name": "unless-stopped"}},
            "State": {"StartedAt": "2026-12-04T13:32:05Z"}}
    described = containers.describe(info)
    assert described == {"runtime": "docker", "id": "abc", "name": "vllm",
                         "image": "vllm/vllm-openai:v0.32.0",
                         "started_at": pytest.approx(1796391125.0),
                         "restart_policy": "unless-stopped", "compose_project": "serving",
                         "compose_service": "vllm"}
    assert "starts it again by itself" in containers.restart_note(described)


@pytest.mark.programs
def test_no_docker_on_the_host_is_no_containers_and_no_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert containers.running_ids() == []


def test_a_refused_socket_is_one_line_saying_how_to_grant_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/other.sock")
    stderr = ("permission denied while trying to connect to the Docker daemon socket at "
              "unix:///run/other.sock: Get \"http://%2Frun%2Fother.sock/v1.24/containers/json"
              "\": dial unix /run/other.sock: connect: permission denied\n")
    line = containers._refusal("docker", stderr)
    assert line is not None
    assert "\n" not in line
    assert "/run/other.sock" in line
    assert "usermod -aG docker" in line
    monkeypatch.delenv("DOCKER_HOST")
    assert containers._refusal("docker", "Cannot connect to the Docker daemon at "
                                         "unix:///var/run/docker.sock. Is the docker daemon "
                                         "running?") is None


@pytest.mark.programs
def test_the_two_streams_are_put_back_in_the_order_of_their_stamps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`export_log` (read by `status` and the check's log probe) orders stdout's and stderr's
    lines by their stamps (docker trims the nanoseconds' trailing zeros), drops the stamps, and
    leaves only the merged file behind."""
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\n"
                    "printf '2026-12-04T13:32:45.1Z b\\n2026-12-04T13:32:45.3Z d\\n'\n"
                    "printf '2026-12-04T13:32:45Z a\\n2026-12-04T13:32:45.2Z c\\n' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path, why = containers.export_log("vllm", 1796391125.0)
    assert why == ""
    assert path is not None
    assert Path(path).read_text() == "a\nb\nc\nd\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker", Path(path).name]


@pytest.mark.programs
def test_a_long_run_comes_back_as_its_start_up_and_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\n"
                    "for i in 1 2 3 4 5 6 7 8 9; do echo \"2026-12-04T13:32:4$i.1Z line $i\"; "
                    "done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = containers.log_excerpt({"ref": "vllm", "since": None, "head_bytes": 15,
                                  "tail_bytes": 15})
    assert out["head"] == "line 1\nline 2\n"  # cut at a line's end
    assert out["tail"] == "line 8\nline 9\n"
    assert out["size"] == 63
    assert out["skipped"] == 63 - 28
    assert out["skipped"] + len(out["head"]) + len(out["tail"]) == out["size"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker"]


@pytest.mark.parametrize(("text", "expected"), [
    ("0::/system.slice/docker-" + "c" * 64 + ".scope\n", "c" * 64),
    ("12:memory:/docker/" + "d" * 64 + "\n0::/docker/" + "d" * 64 + "\n", "d" * 64),
    ("0::/machine.slice/libpod-" + "e" * 64 + ".scope/container\n", "e" * 64),
    ("0::/kubepods.slice/cri-containerd-" + "f" * 64 + ".scope\n", "f" * 64),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", ""),
    ("0::/system.slice/docker.service\n", ""),  # the daemon itself: no container
])
def test_the_container_of_a_process_is_read_from_its_cgroup(text: str, expected: str) -> None:
    assert container_in_cgroup(text) == expected
