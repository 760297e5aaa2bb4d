"""The debug restart's edits and the plain restart's, on plans as the planner makes them: the
dialog shows them as an environment (and command-line) diff; a second plan from the debug run
takes them out again."""

from __future__ import annotations

import json

import pytest

from vllm_console.console.restart import RestartError, RestartPlan
from vllm_console.console.restart.debug import (
    DEBUG_MARK,
    debug_changes,
    debug_plan,
    is_debug,
    plain_changes,
    plain_plan,
    version_tuple,
)
from vllm_console.console.restart.edit import edit_plan

ARGV = ("/venv/bin/vllm", "serve", "/models/t", "--port", "8000")


def _process_plan(env: dict[str, str] | None = None, argv: tuple[str, ...] = ARGV
                  ) -> RestartPlan:
    env = env if env is not None else {"LANG": "C", "HF_TOKEN": "hf_x"}
    return RestartPlan(host="box", mode="process", command=" ".join(argv), argv=argv,
                       log="/srv/logs/serve.log", pid=7, port=8000, original_env=env,
                       launch_env=dict(env))


def _relaunched(plan: RestartPlan) -> RestartPlan:
    """The plan the next restart makes from the relaunched server."""
    return _process_plan(dict(plan.launch_env), plan.argv)


def test_a_debug_restart_on_a_cpu_032_server_is_an_env_diff() -> None:
    plan = _process_plan()
    env, argv = debug_changes(plan, gpu=False, version="0.32.0+cpu")
    assert argv == ()  # no watchdog before 0.33
    debug = edit_plan(plan, env=env, argv=argv, url="http://127.0.0.1:8000")
    shown = debug.describe()
    assert [line for line in shown.splitlines() if "env:" in line] == \
        ["- env: VLLM_LOGGING_LEVEL unset", "+ env: VLLM_LOGGING_LEVEL=DEBUG",
            "- env: NCCL_DEBUG unset", "+ env: NCCL_DEBUG=INFO",
            f"- env: {DEBUG_MARK} unset", f"+ env: {DEBUG_MARK}=VLLM_LOGGING_LEVEL,NCCL_DEBUG"]
    assert "CUDA_LAUNCH_BLOCKING" not in shown
    assert debug.launch_env["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert debug.launch_env["HF_TOKEN"] == "hf_x"  # the rest kept
    assert not is_debug(plan)
    assert is_debug(_relaunched(debug))


def test_on_a_gpu_with_033_it_adds_cuda_launch_blocking_and_the_watchdog() -> None:
    plan = _process_plan()
    env, argv = debug_changes(plan, gpu=True, version="0.33.1+cu128")
    assert ("CUDA_LAUNCH_BLOCKING", "1") in env
    assert argv[:len(ARGV)] == ARGV
    assert argv[-2] == "--watchdog-config"
    assert json.loads(argv[-1]) == {"dump_dir": "/srv/logs/vllm-console-stack-dumps"}
    debug = edit_plan(plan, env=env, argv=argv, url="http://127.0.0.1:8000")
    assert "--watchdog-config" in debug.describe()


def test_the_plain_restart_takes_every_switch_out_and_nothing_else() -> None:
    plan = _process_plan()
    env, argv = debug_changes(plan, gpu=True, version="0.34.0")
    running = _relaunched(edit_plan(plan, env=env, argv=argv, url="http://127.0.0.1:8000"))
    env, argv = plain_changes(running)
    assert dict(env) == {"VLLM_LOGGING_LEVEL": None, "NCCL_DEBUG": None,
                         "CUDA_LAUNCH_BLOCKING": None, DEBUG_MARK: None}
    assert argv == ARGV
    plain = edit_plan(running, env=env, argv=argv, url="http://127.0.0.1:8000")
    assert "- env: VLLM_LOGGING_LEVEL=DEBUG" in plain.describe()
    assert "VLLM_LOGGING_LEVEL" not in plain.launch_env
    assert plain.launch_env["HF_TOKEN"] == "hf_x"
    assert not is_debug(_relaunched(plain))


def test_a_watchdog_the_person_configured_is_left_alone() -> None:
    own = (*ARGV, "--watchdog-config", '{"dump_dir": "/data/dumps"}')
    plan = _process_plan(argv=own)
    assert debug_changes(plan, gpu=False, version="0.33.0")[1] == ()
    assert plain_changes(plan) == ((), ())


def test_a_containers_debug_restart_recreates_it_with_the_switches() -> None:
    plan = RestartPlan(host="box", mode="container", command="docker restart vllm", pid=7,
                       argv=ARGV, container_argv=ARGV, original_env={"LANG": "C"},
                       launch_env={"LANG": "C"}, container=("docker", "vllm", "abc", "no"),
                       port=8000)
    env, argv = debug_changes(plan, gpu=True, version="0.33.0")
    assert json.loads(argv[-1]) == {"dump_dir": "/tmp/vllm-console-stack-dumps"}
    debug = edit_plan(plan, env=env, argv=argv, url="http://127.0.0.1:8000")
    assert debug.recreate
    assert debug.launch_env["NCCL_DEBUG"] == "INFO"


@pytest.mark.parametrize(("text", "expected"), [("0.33.1+cu128", (0, 33)), ("0.32.0+cpu",
                         (0, 32)), ("dev", ()), (None, ()), ("1", (1,))])
def test_versions(text: str | None, expected: tuple[int, ...]) -> None:
    assert version_tuple(text) == expected


def test_a_switch_the_person_set_is_kept_by_the_plain_restart() -> None:
    """The plain restart (every plain restart, `r` and the CLI's) takes out only what the
    debug launch named: a `VLLM_LOGGING_LEVEL=DEBUG` the person launched with stays."""
    plan = _process_plan({"LANG": "C", "VLLM_LOGGING_LEVEL": "DEBUG"})
    assert not is_debug(plan)
    assert plain_plan(plan) is plan
    debug = debug_plan(plan, gpu=False, version="0.32.0", url="http://127.0.0.1:8000")
    assert debug.launch_env[DEBUG_MARK] == "NCCL_DEBUG"
    running = _relaunched(debug)
    plain = plain_plan(running, url="http://127.0.0.1:8000")
    assert plain.launch_env == {"LANG": "C", "VLLM_LOGGING_LEVEL": "DEBUG"}


def test_a_units_debug_restart_is_refused_by_name_with_the_drop_in() -> None:
    """A unit's environment is the unit's (as its traced restart, refused): the refusal names
    the unit and the `systemctl edit` drop-in that does it there."""
    plan = RestartPlan(host="box", mode="unit", command="systemctl restart vllm.service",
                       argv=ARGV, unit="vllm.service", pid=7, original_env={"LANG": "C"},
                       launch_env={"LANG": "C"})
    with pytest.raises(RestartError) as refused:
        debug_plan(plan, gpu=True, version="0.32.0")
    said = str(refused.value)
    assert "vllm.service is a systemd unit" in said
    assert "systemctl edit vllm.service" in said
    assert "Environment=VLLM_LOGGING_LEVEL=DEBUG NCCL_DEBUG=INFO CUDA_LAUNCH_BLOCKING=1" in said
    assert plain_plan(plan) is plan  # a unit's own environment is never taken out
