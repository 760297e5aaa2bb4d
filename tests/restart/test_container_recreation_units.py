"""A container's recreation, the parts that need no daemon: how an edited server command line
becomes the container's command (behind an init, under the image's entry point), the GPU
request, the private env file, and how an edit turns a container's plan into a recreation.
The real daemon's side is `tests/containers/test_container_recreate.py`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_console.console.hostside.restart import compose, recreate
from vllm_console.console.hostside.restart.container import ContainerFailed
from vllm_console.console.restart import RestartPlan
from vllm_console.console.restart.edit import edit_plan

SERVER = ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "/models/t", "--port", "8000"]


def test_an_edited_server_command_keeps_the_init_in_front_of_it() -> None:
    info = {"Path": "tini", "Args": ["--", *SERVER]}
    new = [*SERVER, "--max-model-len", "512"]
    assert recreate.full_command(info, SERVER, new) == ["tini", "--", *new]
    assert recreate.full_command({"Path": SERVER[0], "Args": SERVER[1:]}, SERVER, SERVER) \
        == SERVER


def test_a_command_that_does_not_end_with_the_server_is_not_edited() -> None:
    info = {"Path": "/bin/sh", "Args": ["-c", "vllm serve /models/t"]}
    with pytest.raises(ContainerFailed, match="nothing was stopped"):
        recreate.full_command(info, ["vllm", "serve", "/models/t"], ["vllm", "serve", "/x"])


def test_the_images_entry_point_is_kept_when_the_command_still_starts_with_it() -> None:
    image = {"Config": {"Entrypoint": ["vllm", "serve"], "Cmd": None}}
    assert recreate.command_args({}, image, ["vllm", "serve", "/m", "--port", "1"]) == \
        ([], ["/m", "--port", "1"])
    assert recreate.command_args({}, image, ["python3", "-m", "vllm"]) == \
        (["--entrypoint", "python3"], ["-m", "vllm"])
    # Nothing after the entry point while the image has a CMD: an empty command would let
    # the image's CMD in, so the entry point is given explicitly.
    with_cmd = {"Config": {"Entrypoint": ["vllm", "serve"], "Cmd": ["/default"]}}
    assert recreate.command_args({}, with_cmd, ["vllm", "serve"]) == \
        (["--entrypoint", "vllm"], ["serve"])


@pytest.mark.parametrize(("request_", "flag"), [
    ({"Count": -1, "Capabilities": [["gpu"]]}, "all"),
    ({"DeviceIDs": ["0", "2"], "Capabilities": [["gpu"]]}, '"device=0,2"'),
    ({"Count": 2, "Capabilities": [["gpu", "utility"]]}, "2,capabilities=utility"),
])
def test_the_gpu_request_is_carried_as_gpus(request_: dict[str, object], flag: str) -> None:
    assert recreate._gpus(request_) == flag


def test_the_environment_goes_through_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "env.list"
    recreate.env_file(str(path), {"HF_TOKEN": "hf_x", "A": "b=c d "})
    assert path.read_text() == "HF_TOKEN=hf_x\nA=b=c d \n"
    assert os.stat(path).st_mode & 0o777 == 0o600
    with pytest.raises(ContainerFailed, match="'B'"):
        recreate.env_file(str(path), {"B": "two\nlines"})


def _plan(**extra: object) -> RestartPlan:
    argv = ("/venv/bin/vllm", "serve", "/models/t", "--port", "8000")
    fields: dict[str, object] = dict(
        host="box", mode="container", command="docker restart vllm", pid=7, argv=argv,
        container_argv=argv, original_env={"LANG": "C"}, launch_env={"LANG": "C"},
        container=("docker", "vllm", "abc", "no"), port=8000)
    fields.update(extra)
    return RestartPlan(**fields)  # type: ignore[arg-type]


def test_an_edit_makes_a_containers_restart_a_recreation() -> None:
    plan = _plan()
    assert edit_plan(plan) is plan  # no change: `docker restart`, in place
    edited = edit_plan(plan, argv=(*plan.argv, "--max-model-len", "512"))
    assert edited.recreate
    assert edited.container_argv == plan.argv
    assert edited.command.startswith("docker create + start")
    assert "+ command: /venv/bin/vllm serve /models/t --port 8000 --max-model-len 512" in \
        edited.describe()
    assert edited.inputs == ()  # the container's paths: nothing on the host to check
    env = edit_plan(plan, env=(("VLLM_USE_V2_MODEL_RUNNER", "1"),))
    assert env.recreate
    assert env.launch_env["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    assert edit_plan(plan, env=(("LANG", "C"),)) is plan  # the same value: nothing to do


def test_a_compose_services_edit_goes_through_compose() -> None:
    edited = edit_plan(_plan(compose=("llm", "vllm")), env=(("A", "1"),))
    assert edited.recreate
    assert edited.command.startswith("docker compose up --force-recreate vllm (project llm")
    assert "+ env: A=1" in edited.describe()


def _compose_info(env: list[str], files: str = "compose.yml,/state/"
                  "vllm-console-compose-override-1.json") -> dict[str, object]:
    return {"Path": "/venv/bin/vllm", "Args": ["serve", "/models/t", "--port", "8000"],
            "Config": {"Env": env, "Labels": {
                compose.PROJECT: "llm", compose.SERVICE: "vllm", compose.FILES: files,
                compose.WORKDIR: "/srv/llm", compose.HASH: "h1"}}}


def test_a_compose_override_carries_only_the_change() -> None:
    """The override holds what differs from the container (a trace's env, naming the hook's
    copy inside the container, never a mount of the console's cache; an edited command),
    never the unchanged rest, and cannot unset a variable."""
    info = _compose_info(["PATH=/bin", "HF_TOKEN=x"])
    project = compose.project_of(info)
    assert project is not None
    assert project["files"] == ["/srv/llm/compose.yml"]
    assert project["hash"] == "h1"
    argv = ["/venv/bin/vllm", "serve", "/models/t", "--port", "8000"]
    plan = {"container": {"argv": argv}, "argv": argv,
            "env": {"PATH": "/bin", "HF_TOKEN": "x", "PYTHONPATH": "/h",
                    "VLLM_CONSOLE_TRACE_HOOK": "/h"}, "hook": {"dir": "/h"}}
    doc = compose.override(info, {}, plan, "vllm", "h1")
    assert doc == {"services": {"vllm": {
        "labels": {compose.BASE: "h1"},
        "environment": {"PYTHONPATH": "/vllm-console/h",
                        "VLLM_CONSOLE_TRACE_HOOK": "/vllm-console/h"}}}}
    edited = {**plan, "argv": [*argv, "--max-model-len", "512"], "hook": None,
              "env": {"PATH": "/bin", "HF_TOKEN": "x"}}
    doc = compose.override(info, {}, edited, "vllm", "h1")
    assert doc["services"]["vllm"]["entrypoint"] == ["/venv/bin/vllm"]
    assert doc["services"]["vllm"]["command"] == [*argv[1:], "--max-model-len", "512"]
    assert "environment" not in doc["services"]["vllm"]
    with pytest.raises(ContainerFailed, match="cannot unset HF_TOKEN"):
        compose.override(info, {}, {**edited, "env": {"PATH": "/bin"}}, "vllm", "h1")
    traced = _compose_info(["PATH=/bin", "PYTHONPATH=/h", "VLLM_CONSOLE_TRACE_HOOK=/h"])
    back = compose.override(traced, {}, {**edited, "argv": argv, "env": {"PATH": "/bin"}},
                            "vllm", "h1")
    assert back == {"services": {"vllm": {"labels": {compose.BASE: "h1"}}}}
