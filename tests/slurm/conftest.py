"""The real single-host Slurm (tests/slurm_testbed.py) for the tests that talk to Slurm.

The ``slurm_testbed`` fixture installs Slurm with apt when it is missing, starts the testbed on
first use and stops it when the session ends, unless it was already running before (a
developer's ``scripts/slurm-testbed start``), which it leaves running. When it cannot start, the
tests that need it skip, or fail under CI=true.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import NoReturn, TypeVar

import pytest

from tests.conftest import IN_CI
from tests.slurm_testbed import Testbed, TestbedError

T = TypeVar("T")
JOB_DEADLINE_SECONDS = 60.0


@pytest.fixture(scope="session")
def slurm_testbed() -> Iterator[Testbed]:
    try:
        testbed = Testbed.from_environ()
        testbed.install()
        already_running = all(testbed.running().values())
    except TestbedError as error:
        _unavailable(str(error))
    try:
        testbed.start()
    except TestbedError as error:
        if not already_running:
            testbed.stop()  # what did start, a daemon or two
        _unavailable(str(error))
    yield testbed
    if not already_running:
        testbed.stop()


def _unavailable(reason: str) -> NoReturn:
    if IN_CI:
        pytest.fail(f"the Slurm testbed must run in CI: {reason}")
    pytest.skip(f"the Slurm testbed cannot start: {reason}")


@pytest.fixture
def slurm_account(slurm_testbed: Testbed) -> str:
    """A new Slurm account that root (the user the tests run as) is associated with."""
    account = unique_name()
    slurm_testbed.run("sacctmgr", "-i", "add", "account", account, "description=tests")
    slurm_testbed.run("sacctmgr", "-i", "add", "user", "root", f"account={account}")
    return account


def unique_name(prefix: str = "tb") -> str:
    """A Slurm account or job name no earlier run has used (the testbed keeps its database)."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def wait_for(what: str, probe: Callable[[], T | None]) -> T:
    """Poll ``probe`` until it returns something, for a real event in Slurm (a job's end)."""
    deadline = time.monotonic() + JOB_DEADLINE_SECONDS
    while (found := probe()) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"waited {JOB_DEADLINE_SECONDS:.0f}s for {what}")
        time.sleep(0.2)
    return found
