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
