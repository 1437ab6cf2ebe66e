"""Start real ``celery worker`` processes on the PostgreSQL test database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    """DATABASE_URL of the database pytest-django created, for a worker process."""
    from django.db import connection

    conf = connection.settings_dict
    user = quote(conf.get("USER") or "")
    password = f":{quote(conf['PASSWORD'])}" if conf.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = f"{conf.get('HOST') or '127.0.0.1'}:{conf.get('PORT') or 5432}"
    return f"postgres://{auth}{host}/{conf['NAME']}"


def _answers(app: Any, name_prefix: str) -> bool:
    replies = app.control.ping(timeout=0.5) or []
    return any(name.startswith(name_prefix) for reply in replies for name in reply)


@contextmanager
def start_celery_worker(
    name: str = "test", *, env: dict[str, str] | None = None, pool: str = "solo"
) -> Iterator[subprocess.Popen[bytes]]:
    """A worker process (solo pool, the portal's queues) until the block ends; ``env`` adds
    to its environment (a fault hook, say); ``pool="prefork"`` runs tasks in one child
    process, as a deployment's worker does."""
    from portal.celery import app

    node = f"{name}-{os.getpid()}@"
    env = {
        **os.environ, "DATABASE_URL": test_database_url(), "PYTHONUNBUFFERED": "1", **(env or {})
    }  # fmt: skip
    test_process = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1 under make test
    log = ROOT / "var" / f"test-worker-{name}{'-' + test_process if test_process else ''}.log"
    log.parent.mkdir(exist_ok=True)
    with log.open("w") as log_file:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "portal", "worker",
                "--pool", pool, *(["--concurrency", "1"] if pool == "prefork" else []),
                "--queues", "portal,imports",
                "--hostname", f"{node}%h", "--without-gossip", "--without-mingle",
                "--loglevel", "INFO",
            ],
            cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not _answers(app, node):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the test Celery worker did not start; see {log}")
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@contextmanager
def others_not_consuming(queue: str = "imports") -> Iterator[None]:
    """While the block runs, no other worker of this test run takes tasks from ``queue`` (the
    session's worker stops consuming it and starts again after), and nothing left by an earlier
    test waits in the queues: a test whose own worker must be the one that runs a task (its
    environment differs) then runs only its own tasks and loses none to another worker."""
    from portal.celery import app

    session = f"session-{os.getpid()}@"
    replies = app.control.ping(timeout=0.5) or []
    nodes = [name for reply in replies for name in reply if name.startswith(session)]
    if nodes:
        app.control.cancel_consumer(queue, destination=nodes, reply=True)
    # A task an earlier test of this process left in the queue (each test process has a
    # broker database of its own, and its tests run one at a time) would go to this test's
    # worker first: a worker with a fault hook then died on it before it answered its
    # start-up ping ("did not start"). The block starts with the queues empty.
    app.control.purge()
    try:
        yield
    finally:
        if nodes:
            app.control.add_consumer(queue, destination=nodes, reply=True)
