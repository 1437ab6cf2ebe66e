"""Migration 0022, the lean ledger, on a database made by the release before it (accounting
0021): every job, its key row and its monthly partition are still there, the stored per-node
fractions are what the pages now derive from each job's shape, and the ledger has lost only
its foreign keys, the indexes no page reads and the key table's triggers for the import."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounting.ledger.pipeline import jobs_import
from accounting.ledger.selectors import (
    JOB_FRACTION_COLUMNS,
    job_node_fractions,
    job_node_fractions_of_row,
)
from accounting.ledger.serializers import JobOutputSerializer
from accounting.ledger_storage import KEY_TABLE, OPEN_PARTITION
from accounting.models import Job, PartitionVersion
from benchmarks.sacct_generator import sacct_lines
from projects.models import Project
from tests.conftest import needs_real_services
from tests.factories import example_cluster

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE: list[tuple[str, str | None]] = [("accounting", "0021_usage_shape_monthly")]


@pytest.fixture(autouse=True)
def _postgresql_only():
    needs_real_services("the partitioned ledger")


def _migrate(targets: list[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest() -> list[tuple[str, str | None]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _fetch(sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchall()


def _fractions_as_stored(job: Mapping[str, Any], version: PartitionVersion) -> list[dict[str, str]]:
    """What the release before wrote for a finished job's totals split evenly, worked out here
    from eqs 8-9 on their own: f_c = k / C, f_m = ceil(mem * C / M) / C, f_g = g / G."""
    nodes, cores_per_node = job["nnodes"], version.sockets * version.cores_per_socket
    cores, memory = Decimal(job["cpus"]) / nodes, Decimal(job["memory_mb"]) / nodes
    gpus = Decimal(job["gpus"]) / nodes
    quotient, remainder = divmod(memory * cores_per_node, version.memory_mb)
    units = quotient + 1 if remainder else quotient  # the ceiling of eq 9
    return [
        {
            "nodes": str(nodes),
            "cores": str(Decimal(int(cores)) / cores_per_node),
            "memory": str(Decimal(int(units)) / cores_per_node),
            "gpus": str(Decimal(int(gpus)) / version.gpus) if version.gpus else "0",
        }
    ]


_COLUMNS = (
    'id, cluster_id, job_id_raw, run, project_id, partition_id, partition_version_id, "end", '
    "charge_state, service_units, pending_service_units, reserved_service_units, weight, "
    "dominant_resource, energy_wh, source_hash, tableoid::regclass::text"
)


def _ledger() -> list[tuple[Any, ...]]:
    return _fetch(f"SELECT {_COLUMNS} FROM accounting_job ORDER BY id")  # noqa: S608


def _keys() -> list[tuple[Any, ...]]:
    return _fetch(f"SELECT * FROM {KEY_TABLE} ORDER BY job_id")  # noqa: S608


def _foreign_keys() -> list[str]:
    """The foreign-key constraints of the ledger and of every partition of it."""
    return [
        name
        for (name,) in _fetch(
            "SELECT c.conname FROM pg_constraint c WHERE c.contype = 'f' AND c.conrelid IN ("
            " SELECT 'accounting_job'::regclass UNION ALL"
            " SELECT inhrelid FROM pg_inherits WHERE inhparent = 'accounting_job'::regclass)"
        )
    ]


def _indexes(table: str) -> set[str]:
    return {definition.split(" USING ")[1] for (definition,) in _fetch(
        "SELECT indexdef FROM pg_indexes WHERE tablename = %s", [table]
    )}  # fmt: skip


def test_a_ledger_of_the_release_before_keeps_every_row_key_and_figure() -> None:
    latest = _latest()
    cluster = example_cluster("slurm-testbed")
    for code in ("pawsey0001", "pawsey0002", "pawsey0003", "pawsey0004"):
        Project.objects.get_or_create(code=code)
    now = timezone.now().replace(microsecond=0)
    dump = list(
        sacct_lines(
            lines=150, seed=5, start=now - timedelta(days=200), mean_gap_seconds=86400, now=now,
            allocations=True,
        )
    )  # fmt: skip
    # The rows are written by the import of today's code, then the database goes back to
    # 0021: the ledger as the release before kept it, foreign keys, indexes, triggers and a
    # node_fractions column that the release filled at import, which the test fills here.
    jobs_import(cluster=cluster, lines=dump, source="before the lean ledger")
    versions = {version.pk: version for version in PartitionVersion.objects.all()}
    stored: dict[int, list[dict[str, str]]] = {}
    try:
        _migrate(BEFORE)
        assert len(_foreign_keys()) >= 7  # the release before: seven per table
        jobs = Job.objects.values(
            "pk", "nnodes", "cpus", "memory_mb", "gpus", "partition_version_id", "start",
            "nodelist",
        )  # fmt: skip
        for job in jobs:
            ran = job["partition_version_id"] and job["nnodes"] and job["start"]
            if ran and job["nodelist"] and job["cpus"] % job["nnodes"] == 0:
                stored[job["pk"]] = _fractions_as_stored(job, versions[job["partition_version_id"]])
            else:
                stored[job["pk"]] = []
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE accounting_job SET node_fractions = %s WHERE id = %s",
                    [json.dumps(stored[job["pk"]]), job["pk"]],
                )
        ledger, keys = _ledger(), _keys()
        assert len(keys) == len(ledger) == len(stored) > 100
        months = {row[-1] for row in ledger}
        assert len(months - {OPEN_PARTITION}) >= 6  # several monthly partitions
        assert sum(1 for fractions in stored.values() if fractions) > 100
    finally:
        _migrate(latest)

    # Every row, every key row and every partition as they were.
    assert _ledger() == ledger
    # The key rows as they were, and since migration 0025 each with its job's end.
    assert [row[: len(keys[0])] for row in _keys()] == keys
    ends = dict(Job.objects.values_list("pk", "end"))
    assert [row[-1] for row in _keys()] == [ends[row[0]] for row in keys]
    # The figures the job page and the job API show: the stored JSON, now derived.
    serializer = JobOutputSerializer()
    for read in Job.objects.select_related("partition", "partition_version"):
        assert job_node_fractions(read) == stored[read.pk], read.job_id_raw
        assert serializer.to_representation(read)["node_fractions"] == stored[read.pk]
    for row in Job.objects.values("pk", *JOB_FRACTION_COLUMNS):
        assert job_node_fractions_of_row(row) == stored[row["pk"]]

    # What the migration took away, and what it kept.
    assert _foreign_keys() == []
    assert "node_fractions" not in {column.name for column in connection.introspection.
        get_table_description(connection.cursor(), "accounting_job")}  # fmt: skip
    month = next(name for name in months if name != OPEN_PARTITION)
    assert _indexes(month) == {
        "btree (id)",
        'btree (cluster_id, "end")',
        'btree (project_id, "end")',
    }
    triggers = dict(
        _fetch(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = 'accounting_job'::regclass AND NOT tgisinternal"
        )
    )
    assert "portal.ledger_import" in triggers[f"{KEY_TABLE}_insert"]
    assert "portal.ledger_import" in triggers[f"{KEY_TABLE}_update"]

    # A re-import of the same dump changes nothing, and other writers keep the key table.
    _, summary = jobs_import(cluster=cluster, lines=dump, source="after the lean ledger")
    assert summary.charged == summary.updated == 0
    assert _ledger() == ledger
    charged = Job.objects.filter(charge_state=Job.ChargeState.CHARGED).first()
    assert charged is not None
    Job.objects.filter(pk=charged.pk).update(charge_state=Job.ChargeState.REFUNDED)
    key_sql = f"SELECT charge_state FROM {KEY_TABLE} WHERE job_id = %s"  # noqa: S608
    assert _fetch(key_sql, [charged.pk]) == [("refunded",)]
