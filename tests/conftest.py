"""Test harness: real PostgreSQL and a real Celery worker on Redis when configured.

``make test`` points DATABASE_URL / CELERY_BROKER_URL at the local services when they answer
(scripts/test_services.py). Without them the suite runs on SQLite with eager Celery and says
so in its header; with CI=true it refuses to fall back and stops at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _real_broker() -> str | None:
    url = os.environ.get("CELERY_BROKER_URL", "").strip()
    return url or None


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or default_port), 2
        ):
            return True
    except OSError:
        return False


def pytest_report_header(config: pytest.Config) -> list[str]:
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        db_line = "database: SQLite (fallback: DATABASE_URL is not set)"
    else:
        vendor = database["ENGINE"].rsplit(".", 1)[-1]
        db_line = f"database: {vendor} at {database.get('HOST')}:{database.get('PORT')}"
    broker = _real_broker()
    celery_line = (
        f"celery: real worker process on {broker}"
        if broker
        else "celery: eager, in-process (fallback: CELERY_BROKER_URL is not set)"
    )
    return [db_line, celery_line]


def pytest_sessionstart(session: pytest.Session) -> None:
    if not IN_CI:
        return
    problems = []
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        problems.append("DATABASE_URL must point at PostgreSQL in CI")
    elif not _reachable(database_url, 5432):
        problems.append(f"PostgreSQL is unreachable at {database_url}")
    broker = _real_broker()
    if not broker or not broker.startswith("redis"):
        problems.append("CELERY_BROKER_URL must point at Redis in CI")
    elif not _reachable(broker, 6379):
        problems.append(f"Redis is unreachable at {broker}")
    if problems:
        pytest.exit(
            "CI=true and the real services are missing: " + "; ".join(problems), returncode=3
        )


def _database_url_of_test_db() -> str:
    """DATABASE_URL of the database pytest-django created, for the worker process."""
    from django.db import connection

    conf = connection.settings_dict
    user = quote(conf.get("USER") or "")
    password = f":{quote(conf['PASSWORD'])}" if conf.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = f"{conf.get('HOST') or '127.0.0.1'}:{conf.get('PORT') or 5432}"
    return f"postgres://{auth}{host}/{conf['NAME']}"


def _worker_answers(app: Any, name_prefix: str) -> bool:
    replies = app.control.ping(timeout=0.5) or []
    return any(name.startswith(name_prefix) for reply in replies for name in reply)


@pytest.fixture(scope="session")
def celery_worker(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, Any] | None]:
    """A real ``celery worker`` process on the test database, or ``None`` (eager fallback).

    Tests that use it must commit their data (``@pytest.mark.django_db(transaction=True)``),
    because the worker reads the database over its own connection.
    """
    broker = _real_broker()
    if broker is None:
        yield None
        return
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.fail("a real Celery worker needs the PostgreSQL test database (set DATABASE_URL)")
    from portal.celery import app

    app.control.purge()
    env = {**os.environ, "DATABASE_URL": _database_url_of_test_db(), "PYTHONUNBUFFERED": "1"}
    log = (ROOT / "var").joinpath("test-worker.log")
    log.parent.mkdir(exist_ok=True)
    with log.open("w") as log_file:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "portal", "worker",
                "--pool", "solo", "--queues", "portal,imports",
                "--hostname", f"test-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
                "--loglevel", "INFO",
            ],
            cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not _worker_answers(app, f"test-{os.getpid()}@"):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the test Celery worker did not start; see {log}")
            yield {"pid": process.pid, "broker": broker, "log": log}
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(autouse=True)
def _celery_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """Eager Celery for tests that do not ask for the real worker."""
    from portal.celery import app

    wants_worker = "celery_worker" in request.fixturenames and _real_broker() is not None
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = not wants_worker
    yield
    app.conf.task_always_eager = previous
