"""The references of a batch of ledger rows, checked set-wise (docs/importing.md, "The lean
ledger").

The jobs table has no foreign-key constraints (migration 0022): a row-level check of seven keys
on every job, at commit, cost more than the COPY itself. Instead the import asks, for each
batch and inside its transaction, one query per referenced table for the batch's distinct ids,
and locks the rows it finds ``FOR KEY SHARE``, as a foreign key's check would: a concurrent
delete of a project, partition or rate version the batch points at waits for the batch's
commit (and then fails on its own protection), and one that committed first makes the batch
fail with an error naming what is missing, never an orphan row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, models

from accounting.models import (
    Cluster,
    CostModelVersion,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
)
from projects.models import Project


class ReferenceMissing(Exception):
    """A batch points at rows that are not there (deleted while the import ran)."""


def _referenced() -> tuple[tuple[str, str, type[models.Model]], ...]:
    # (the row's column, what to call it, the referenced model)
    return (
        ("cluster_id", "cluster", Cluster),
        ("partition_id", "partition", Partition),
        ("partition_version_id", "partition version", PartitionVersion),
        ("project_id", "project", Project),
        ("user_id", "user", get_user_model()),
        ("import_run_id", "import run", ImportRun),
        ("cost_model_version_id", "cost model version", CostModelVersion),
    )


def _distinct(mappings: list[Mapping[str, Any]], jobs: list[Job], name: str) -> set[Any]:
    """The distinct values of one column over the batch's rows."""
    values = {row.get(name) for row in mappings}
    values.update(getattr(job, name) for job in jobs)
    values.discard(None)
    return values


def references_check(
    rows: Iterable[Mapping[str, Any] | Job], more: Mapping[str, set[Any]] | None = None
) -> None:
    """Check that every row the batch writes (new rows as dicts, changed ones as jobs, and
    ``more`` distinct values per column of rows written as a frame) points at rows that
    exist, and keep those from being deleted until the batch commits. Call it in the batch's
    transaction, before the rows are written. Raises :class:`ReferenceMissing` naming each
    missing reference."""
    rows = list(rows)
    more = more or {}
    if not rows and not any(more.values()):
        return
    mappings = [row for row in rows if isinstance(row, Mapping)]
    jobs = [row for row in rows if not isinstance(row, Mapping)]
    missing: list[str] = []
    for column, label, model in _referenced():
        wanted = _distinct(mappings, jobs, column) | more.get(column, set())
        if not wanted:
            continue
        table = connection.ops.quote_name(model._meta.db_table)
        pk = connection.ops.quote_name(model._meta.pk.column or "id")
        ids = sorted(wanted)
        if connection.vendor == "postgresql":
            # In id order, as any other locker of these rows would take them.
            sql = f"SELECT {pk} FROM {table} WHERE {pk} = ANY(%s) ORDER BY {pk} FOR KEY SHARE"  # noqa: S608
            params: list[Any] = [ids]
        else:  # SQLite: one writer at a time, nothing to lock
            sql = f"SELECT {pk} FROM {table} WHERE {pk} IN ({', '.join(['%s'] * len(ids))})"  # noqa: S608
            params = ids
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = {value for (value,) in cursor.fetchall()}
        missing.extend(f"{label} {value}" for value in sorted(wanted - found))
    if missing:
        raise ReferenceMissing(
            "the batch refers to rows that no longer exist (deleted while the import ran?): "
            + ", ".join(missing)
            + "; nothing of the batch was written"
        )
