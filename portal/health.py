"""What /healthz/ and /readyz/ check: the database, the cache and the broker, each by name.

Each check answers ``"ok"`` or a short sentence naming the error, and waits at most
``PORTAL_HEALTH_TIMEOUT_SECONDS`` for the cache and the broker, so a Redis that does not answer
cannot hold the check (docs/configuration.md, "Health and readiness").
"""

from __future__ import annotations

from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

OK = "ok"
_ERROR_CHARS = 200


def _error(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text[:_ERROR_CHARS]}"


def database_status() -> str:
    """The database answers a query."""
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return _error(error)
    return OK


def _redis_status(url: str) -> str:
    """A PING to the Redis at ``url`` on a connection of its own, with bounded waits."""
    seconds = settings.PORTAL_HEALTH_TIMEOUT_SECONDS
    client = redis.Redis.from_url(
        url, socket_connect_timeout=seconds, socket_timeout=seconds, retry=Retry(NoBackoff(), 0)
    )
    try:
        client.ping()
    except RedisError as error:
        return _error(error)
    finally:
        client.close()
    return OK


def cache_status() -> str:
    """Redis, asked directly (not through the local-memory fallback), when it is the cache;
    a local-memory cache is always ``ok``."""
    if not settings.CACHE_URL:
        return OK
    return _redis_status(settings.CACHE_URL)


def broker_status() -> str:
    """Celery's broker answers; ``ok`` without one (tasks run in-process)."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return OK
    url = str(settings.CELERY_BROKER_URL)
    scheme = urlsplit(url).scheme
    if scheme not in {"redis", "rediss"}:
        return f"not checked: only a Redis broker is checked, not {scheme}://"
    return _redis_status(url)


def health() -> tuple[bool, dict[str, str]]:
    """Whether the database answers, and each part by name (/healthz/)."""
    parts = {"database": database_status(), "cache": cache_status(), "broker": broker_status()}
    database_ok = parts["database"] == OK
    if not database_ok:
        overall = "down"
    elif all(value == OK for value in parts.values()):
        overall = "ok"
    else:
        overall = "degraded"
    return database_ok, {"status": overall, **parts}


# Migrations do not go away under a running process: once all were seen applied, that is kept.
_migrations_applied = False


def migrations_status() -> str:
    """Every migration of the code is applied to the database."""
    global _migrations_applied
    if _migrations_applied:
        return OK
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as error:
        return _error(error)
    if plan:
        return f"{len(plan)} not applied, the first {plan[0][0].app_label}.{plan[0][0].name}"
    _migrations_applied = True
    return OK


def readiness() -> tuple[bool, dict[str, str]]:
    """Whether this process should be sent requests (/readyz/): the database answers and its
    schema is the code's. The cache and the broker are left out on purpose: the portal serves
    without them (the cache degrades to local memory, tasks wait in the queue), and a Redis blip
    must not take every web process out of the load balancer at once."""
    parts = {"database": database_status()}
    parts["migrations"] = migrations_status() if parts["database"] == OK else "not checked"
    ready = all(value == OK for value in parts.values())
    return ready, {"status": "ready" if ready else "not ready", **parts}
