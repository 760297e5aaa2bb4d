"""Shared fixtures: a real sshd on loopback for the session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.sshd import Sshd, start_sshd

# The tests must not pick up the developer's agent or keys by accident.
os.environ.pop("SSH_AUTH_SOCK", None)


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    try:
        server = start_sshd()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server
    server.kill()
    shutil.rmtree(server.directory, ignore_errors=True)


def _report_tasks_that_outlive_their_test() -> None:
    """When a test's event loop closes, its leftover tasks are cancelled and awaited. A task
    that will not end then hangs the run until pytest-timeout, whose dump shows only threads.
    Seen rarely at the teardown of the first app test of a run and not reproduced since: if a
    teardown takes over 10 s, print each task still pending with its stack, so the log of the
    run that hangs says which one. (Reads asyncio's private `_cancel_all_tasks`; diagnostics
    only, nothing is changed or skipped.)"""
    import asyncio.runners
    import sys
    import threading

    cancel_all = getattr(asyncio.runners, "_cancel_all_tasks", None)
    if cancel_all is None:
        return

    def cancel_all_and_report(loop: asyncio.AbstractEventLoop) -> None:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]

        def report() -> None:
            for task in pending:
                if not task.done():
                    print(f"\n[conftest] task still pending at loop teardown: {task!r}",
                          file=sys.stderr)
                    task.print_stack(file=sys.stderr)

        timer = threading.Timer(10.0, report)
        timer.daemon = True
        timer.start()
        try:
            cancel_all(loop)
        finally:
            timer.cancel()

    asyncio.runners._cancel_all_tasks = cancel_all_and_report  # type: ignore[attr-defined]


_report_tasks_that_outlive_their_test()
