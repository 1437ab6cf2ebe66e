"""A per-cluster lock so that scheduled imports of one cluster never overlap, and a lock per
time window for backfills.

On PostgreSQL it is a session advisory lock: held by the importing connection and released by
the server if the worker dies, so a killed worker never leaves a stale lock behind. SQLite
(the embedded demo) runs tasks eagerly in one process and needs none.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from django.db import OperationalError, connection

from accounting.models import Cluster


class ImportLockBusy(RuntimeError):
    """Another import of the same cluster holds the lock."""


def _key(cluster: Cluster) -> int:
    # Advisory locks take a bigint; a fixed namespace keeps ours apart from other users'.
    return (zlib.crc32(b"su-portal sacct import") << 31) ^ int(cluster.pk)


@contextmanager
def cluster_import_lock(cluster: Cluster) -> Iterator[None]:
    if connection.vendor != "postgresql":
        yield
        return
    key = _key(cluster)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        (acquired,) = cursor.fetchone()
    if not acquired:
        raise ImportLockBusy(f"an import of {cluster.name} is already running")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@contextmanager
def window_import_lock(cluster: Cluster, since: datetime, until: datetime) -> Iterator[None]:
    """A lock per cluster and time window: backfill tasks of disjoint windows of one cluster
    run at once, and the same window is never imported twice at the same time."""
    with named_lock(f"sacct window {cluster.pk} {since.isoformat()} {until.isoformat()}"):
        yield


# The server drops a killed process's locks once it notices its connection closed, which can
# come a moment after the process is gone: the import run's lock waits that long for them.
IMPORT_RUN_LOCK_WAIT_SECONDS = 5


def import_run_lock(run_id: int) -> AbstractContextManager[None]:
    """Held by the task that imports run ``run_id`` while it runs: a second delivery of the
    task stands down, and the recovery task never takes a live run for a dead one (the server
    drops the lock with the connection of a killed worker)."""
    return named_lock(f"import run {run_id}", wait_seconds=IMPORT_RUN_LOCK_WAIT_SECONDS)


@contextmanager
def named_lock(name: str, *, wait_seconds: int = 0) -> Iterator[None]:
    """A lock for periodic work that must never overlap (PostgreSQL advisory lock); taken at
    once or, with ``wait_seconds``, when its holder lets go within that time."""
    if connection.vendor != "postgresql":
        yield
        return
    key = zlib.crc32(f"su-portal {name}".encode()) << 20
    with connection.cursor() as cursor:
        if wait_seconds:
            acquired = _advisory_lock_within(cursor, key, wait_seconds)
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            (acquired,) = cursor.fetchone()
    if not acquired:
        raise ImportLockBusy(f"{name} is already running")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def cluster_row_lock(cluster: Cluster, *, exclusive: bool) -> None:
    """Lock the cluster's row until the end of the current transaction (PostgreSQL).

    Import batches take it shared, before reading the cluster's cost model versions; saving a
    version and each batch of a cost recomputation take it exclusive. So a batch prices its
    jobs with the versions in force when it commits, and a recomputation's sums are never
    overtaken by a batch (docs/costs.md). SQLite needs none: its writers take turns anyway.
    """
    if connection.vendor != "postgresql":
        return
    mode = "UPDATE" if exclusive else "SHARE"
    table = Cluster._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR {mode}", [cluster.pk])  # noqa: S608


def _advisory_lock_within(cursor: Any, key: int, wait_seconds: int) -> bool:
    """Take the session advisory lock ``key``, waiting up to ``wait_seconds`` for it (outside a
    transaction: a lock timeout would abort one)."""
    cursor.execute("SELECT current_setting('lock_timeout')")
    (previous,) = cursor.fetchone()
    cursor.execute("SELECT set_config('lock_timeout', %s, false)", [f"{wait_seconds}s"])
    try:
        cursor.execute("SELECT pg_advisory_lock(%s)", [key])
    except OperationalError as error:
        if getattr(error.__cause__, "sqlstate", None) != "55P03":  # lock_not_available
            raise
        return False
    finally:
        cursor.execute("SELECT set_config('lock_timeout', %s, false)", [previous])
    return True
