"""The real single-host Slurm (tests/slurm_testbed.py) for the tests that talk to Slurm.

The ``slurm_testbed`` fixture installs Slurm with apt when it is missing, starts the testbed on
first use and stops it when the session ends, unless it was already running before (a
developer's ``scripts/slurm-testbed start``), which it leaves running. When it cannot start, the
tests that need it skip, or fail under CI=true.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
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


@dataclass(frozen=True)
class Slurmrestd:
    url: str
    token_file: Path


@pytest.fixture
def slurmrestd(slurm_testbed: Testbed, tmp_path: Path) -> Iterator[Slurmrestd]:
    """The testbed's slurmrestd on a free loopback port, with a JWT from ``scontrol token`` in a
    file, as a site renews it. slurmrestd refuses to run as root or SlurmUser, so it drops to
    nobody; SLURM_JWT=daemon makes it take each client's token instead of one of its own."""
    token = slurm_testbed.run("scontrol", "token", "lifespan=900").stdout.strip()
    token_file = tmp_path / "slurmrestd.jwt"
    token_file.write_text(token + "\n")  # SLURM_JWT=...: the portal strips the prefix
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "slurmrestd.log").open("w")
    restd = subprocess.Popen(
        ["slurmrestd", "-a", "rest_auth/jwt", "-u", "nobody", "-g", "nogroup",
         f"127.0.0.1:{port}"],
        env={**os.environ, **slurm_testbed.env, "SLURM_JWT": "daemon"},
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip

    def listening() -> bool | None:
        with socket.socket() as client:
            return True if client.connect_ex(("127.0.0.1", port)) == 0 else None

    try:
        wait_for("slurmrestd to listen", listening)
        yield Slurmrestd(url=f"http://127.0.0.1:{port}", token_file=token_file)
    finally:
        restd.terminate()
        restd.wait(timeout=30)
        log.close()
