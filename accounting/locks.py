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

from django.db import connection

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


def import_run_lock(run_id: int) -> AbstractContextManager[None]:
    """Held by the task that imports run ``run_id`` while it runs: a second delivery of the
    task stands down, and the recovery task never takes a live run for a dead one (the server
    drops the lock with the connection of a killed worker)."""
    return named_lock(f"import run {run_id}")


@contextmanager
def named_lock(name: str) -> Iterator[None]:
    """A lock for periodic work that must never overlap (PostgreSQL advisory lock)."""
    if connection.vendor != "postgresql":
        yield
        return
    key = zlib.crc32(f"su-portal {name}".encode()) << 20
    with connection.cursor() as cursor:
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
