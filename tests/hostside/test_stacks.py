"""The `stacks` entry's parts that need no py-spy run (roles, watchdog lines in a log) and the
console's report from an answer of that entry: the contract's JSON, its exit status, and the one
line that says what to do when it could not run. The dumps themselves are real py-spy output
(`tests/data/py-spy/`); the whole path on a real engine is tests/real_vllm/test_real_vllm_stacks.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from vllm_console.console.hostclient.stacks import dump_pid, report_from_facts
from vllm_console.console.hostclient.stacks_text import render_stacks
from vllm_console.console.hostside.stacks import role, watchdog_paths

DATA = Path(__file__).resolve().parents[1] / "data" / "py-spy"
TOOL = {"name": "py-spy", "version": "0.4.3", "path": "/venv/bin/py-spy"}


@pytest.mark.parametrize(("pid", "title", "expected"), [
    (10, "/venv/bin/python /venv/bin/vllm serve m", "api-server"),
    (11, "VLLM::EngineCore", "engine-core"),
    (11, "VLLM::EngineCore_DP1", "engine-core"),
    (12, "VLLM::Worker", "worker"),
    (12, "VLLM::Worker_TP1", "worker"),
    (13, "VLLM::APIServer_1", "api-server"),
    (14, "/venv/bin/python -B -c from multiprocessing.resource_tracker import main;main(32)",
     "other"),
])
def test_roles_from_vllm_process_titles(pid: int, title: str, expected: str) -> None:
    assert role(pid, 10, title) == expected


def _proc(pid: int, role_: str, title: str, dump: str | None = None, *, exit_: int = 0,
          stderr: str = "", state: str = "S", uid: int = 1000) -> dict[str, Any]:
    out: dict[str, Any] = {"pid": pid, "ppid": 1, "comm": title[:15], "title": title,
                           "state": state, "uid": uid, "role": role_}
    out["dump"] = {"stdout": (DATA / dump).read_text() if dump else "", "stderr": stderr,
                   "exit": exit_, "timed_out": False, "seconds": 0.03}
    return out


def test_a_whole_tree_dumped_is_the_contracts_json_and_exit_0() -> None:
    facts = {"tool": TOOL, "access": {"uid": 1000},
             "processes": [_proc(13285, "api-server", "vllm serve", "idle-api-server.txt"),
                           _proc(14355, "engine-core", "VLLM::EngineCore",
                                 "stopped-engine-core-nonblocking.txt", state="T")],
             "watchdog": [{"path": "/tmp/d/VLLM_STACK_DUMP_for_engine_0_14355.log",
                           "mtime": 5.0, "text": (DATA.parent / "faulthandler" /
                                                  "all-threads.txt").read_text()}]}
    report = report_from_facts("gpu1", facts)
    data = report.as_json()
    assert report.exit_status == 0
    assert set(data) == {"host", "tool", "processes", "watchdog_dumps", "notes"}
    assert data["tool"] == TOOL
    engine = data["processes"][1]
    assert set(engine) == {"pid", "role", "name", "container", "threads", "error"}
    assert (engine["pid"], engine["role"], engine["error"]) == (14355, "engine-core", None)
    main = engine["threads"][0]
    assert set(main) == {"id", "name", "active", "frames"}
    assert main["frames"][0] == {"function": "sched_yield", "file": "vllm/distributed/utils.py",
                                 "line": 46}
    assert data["watchdog_dumps"] == [{"path": "/tmp/d/VLLM_STACK_DUMP_for_engine_0_14355.log",
                                       "pid": 14355, "at": 5.0}]
    assert any("stopped" in n and "14355" in n for n in data["notes"])
    text = "\n".join(render_stacks(report))
    assert "engine-core pid 14355 (stopped): VLLM::EngineCore" in text
    assert "> sched_yield (vllm/distributed/utils.py:46)" in text
    # the watchdog's dump is shown like a live one: its threads and frames
    assert "vLLM watchdog dump /tmp/d/VLLM_STACK_DUMP_for_engine_0_14355.log, pid 14355" in text
    assert "'current' (idle) [folded]: step (/tmp/h42_fh.py:8)" in text
    assert "run_busy_loop (/tmp/h42_fh.py:11)" in "\n".join(render_stacks(report, fold=False))


def test_a_process_py_spy_could_not_dump_says_why_and_exit_1() -> None:
    facts = {"tool": TOOL, "access": {"uid": 1000},
             "processes": [_proc(1, "api-server", "vllm serve", "idle-api-server.txt"),
                           _proc(2, "engine-core", "VLLM::EngineCore", exit_=1,
                                 stderr=(DATA / "no-such-pid.err").read_text())]}
    report = report_from_facts("gpu1", facts)
    assert report.exit_status == 1
    assert "Check that the process is running" in (report.processes[1].error or "")


def test_no_py_spy_is_one_line_saying_how_to_install_it_there() -> None:
    facts = {"tool": None, "looked": ["PATH", "/srv/venv/bin/py-spy"], "processes": []}
    report = report_from_facts("gpu1", facts, python="/srv/venv/bin/python")
    assert report.exit_status == 2
    assert report.problem == (
        "gpu1: py-spy is not installed (looked on PATH and in /srv/venv/bin/py-spy): install "
        "it with `/srv/venv/bin/python -m pip install py-spy` (the serving environment)")


@pytest.mark.parametrize(("access", "uid", "grant"), [
    ({"uid": 1001, "ptrace_scope": None, "cap_sys_ptrace": False}, 0,
     "they run as uid 0, not the login user (uid 1001): log in as that user or as root"),
    ({"uid": 1001, "ptrace_scope": 1, "cap_sys_ptrace": False}, 1001,
     "the kernel's Yama ptrace_scope is 1: `sudo sysctl kernel.yama.ptrace_scope=0`"),
    ({"uid": 0, "ptrace_scope": 0, "cap_sys_ptrace": False, "in_container": True}, 0,
     "lacks the SYS_PTRACE capability: run it with `--cap-add SYS_PTRACE`"),
])
def test_not_allowed_to_trace_names_what_to_grant(access: dict[str, Any], uid: int,
                                                  grant: str) -> None:
    denied = (DATA / "permission-denied.err").read_text()
    facts = {"tool": TOOL, "access": access,
             "processes": [_proc(5, "api-server", "vllm serve", exit_=1, stderr=denied, uid=uid),
                           _proc(6, "engine-core", "VLLM::EngineCore", exit_=1, stderr=denied,
                                 uid=uid)]}
    report = report_from_facts("gpu1", facts)
    assert report.exit_status == 2
    assert grant in report.problem
    assert "\n" not in report.problem


def test_watchdog_lines_of_the_log_name_this_runs_dumps(tmp_path: Path) -> None:
    old = tmp_path / "VLLM_STACK_DUMP_for_engine_0_111.log"
    new = tmp_path / "VLLM_STACK_DUMP_for_worker_1_222.log"
    old.write_text("old")
    new.write_text("new")
    os.utime(old, (1000, 1000))
    os.utime(new, (5000, 5000))
    log = tmp_path / "serve.log"
    log.write_text(f"(EngineCore pid=111) WARNING [Watchdog]Dumped stack to {old}\n"
                   "noise\n"
                   f"(Worker pid=222) WARNING [Watchdog]Dumped stack to {new}\n"
                   f"(Worker pid=222) WARNING [Watchdog]Dumped stack to {new}\n")
    assert watchdog_paths(str(log), None) == [str(old), str(new)]
    assert watchdog_paths(str(log), 4000.0) == [str(new)]
    assert watchdog_paths(str(tmp_path / "missing.log"), None) == []
    assert dump_pid(str(new)) == 222
    assert dump_pid("/x/other.log") is None
