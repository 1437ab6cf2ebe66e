"""Test harness: real PostgreSQL and a real Celery worker on Redis when configured.

``make test`` points DATABASE_URL / CELERY_BROKER_URL at the local services when they answer
(scripts/test_services.py). Without them the suite runs on SQLite with eager Celery and says
so in its header; with CI=true it refuses to fall back and stops at once.
"""

from __future__ import annotations

import os
import runpy
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from django.conf import settings

from tests.redis_server import RedisServer, redis_missing_reason, redis_server
from tests.workers import start_celery_worker

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


def needs_real_services(what: str, *, broker: bool = False) -> None:
    """For a test whose other processes read its database (``--workers``, a second importer, a
    Celery worker): skip it when ``make test`` fell back to SQLite (an in-memory database no
    other process sees) or, with ``broker``, to eager Celery. In CI it fails instead, though
    the session stops at once there without PostgreSQL and Redis."""
    from django.db import connection

    missing = [] if connection.vendor == "postgresql" else ["PostgreSQL"]
    if broker and _real_broker() is None:
        missing.append("a real Celery broker")
    if not missing:
        return
    reason = f"{what} needs {' and '.join(missing)} (SQLite or eager Celery fallback in use)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def xdist_index() -> int:
    """This process's number among ``make test``'s parallel test processes (pytest-xdist's
    ``gw0``, ``gw1``, ...), 0 when the suite runs in one process."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") else 0


def _own_broker_database(url: str, index: int) -> str:
    """The broker URL of test process ``index``: the same Redis, database number ``index``
    below the given one (CI's 15 for ``gw0``, 14 for ``gw1``), so each process's Celery
    worker takes only its own process's tasks (each reads its own test database)."""
    parsed = urlparse(url)
    database = int(parsed.path.strip("/") or 0)
    return parsed._replace(path=f"/{(database - index) % 16}").geturl()


def pytest_configure(config: pytest.Config) -> None:
    # Hashing test passwords with PBKDF2 costs a third of a second per user; MD5 is enough here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    broker, index = _real_broker(), xdist_index()
    if broker is not None and index:
        own = _own_broker_database(broker, index)
        # Settings were read before this file; the worker processes the tests start read
        # the environment.
        os.environ["CELERY_BROKER_URL"] = own
        settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = own
        from portal.celery import app

        app.conf.update(broker_url=own, result_backend=own)


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


# Tests that measure wall-clock deadlines of the real web tier (see pytest_xdist_make_scheduler).
_TIMED_MODULES = ("tests/deploy/test_nginx_proxy.py",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """How ``make test``'s parallel run (pytest-xdist) shares the tests between its processes:
    a test module at a time, so that a module's fixtures (a shared world, a browser) are built
    once, and all of tests/slurm in one process, as they share the one Slurm testbed (fixed
    ports, one run directory, one slurmdbd database). pytest-xdist's own ``--dist loadgroup``
    cannot group under pytest 9 (it renames ``item._nodeid``, which pytest 9 no longer reads)."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module.startswith("tests/slurm/"):
                return "tests/slurm"
            if module.startswith("tests/browser/") or module in _TIMED_MODULES:
                # A test that holds the web tier to a deadline never runs beside Chromium:
                # on two cores a browser walking every page took its second from it.
                return "tests/browser"
            return module

    return ModuleScheduling(config, log)


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
    with start_celery_worker(name="session") as process:
        yield {"pid": process.pid, "broker": broker}


@pytest.fixture(autouse=True)
def _celery_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """Eager Celery, except for tests that take a real worker (fixture or ``worker`` marker)."""
    from portal.celery import app

    asks = "celery_worker" in request.fixturenames or request.node.get_closest_marker("worker")
    wants_worker = bool(asks) and _real_broker() is not None
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = not wants_worker
    yield
    app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    """Each test starts with an empty cache: cached chart data of one test's ledger must not
    meet another test's (in production the ledger's stamp keys it)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own, which the test may stop (tests/redis_server.py); the
    shared Redis of the test services is never stopped."""
    reason = redis_missing_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"the tests of a Redis outage need redis-server in CI: {reason}")
        pytest.skip(reason)
    with redis_server() as server:
        yield server


@pytest.fixture
def redis_cache(
    private_redis: RedisServer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> RedisServer:
    """The portal's cache, and so the API's throttles, on the private Redis: the CACHES that
    portal/settings.py makes when PORTAL_CACHE_URL is set, as in a deployment."""
    monkeypatch.setenv("PORTAL_CACHE_URL", private_redis.url(1))
    configured = runpy.run_path(str(Path(__file__).resolve().parents[1] / "portal" / "settings.py"))
    settings.CACHE_URL = configured["CACHE_URL"]
    settings.CACHES = configured["CACHES"]
    return private_redis
