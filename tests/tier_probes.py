"""Three tests of the fast tier for tests/test_tiers.py to run in a pytest of its own (the name
is not `test_*.py`: the suite never collects them). The first starts a program, so the
fast tier's guard (tests/conftest.py) must fail it; the second starts none, and its
module's fixture then starts one in its teardown, so it must pass; the third is the first in
its process to import asyncssh (as the console's SSH link does, lazily), whose import starts
programs of its own, and must pass too."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def ends_with_a_program() -> Iterator[None]:
    """As the Docker daemon's fixture ends the session: its teardown starts `umount`, at
    whichever test of the worker's is the last (a fast one failed CI's run for it)."""
    yield
    subprocess.run(["true"], check=True)


@pytest.mark.usefixtures("ends_with_a_program")
def test_a_fast_test_that_starts_a_program() -> None:
    subprocess.run(["true"], check=True)


@pytest.mark.usefixtures("ends_with_a_program")
def test_a_fast_test_after_which_a_fixture_ends_with_a_program() -> None:
    pass


def test_a_fast_test_that_is_the_first_to_import_asyncssh() -> None:
    import asyncssh

    assert asyncssh.__version__
