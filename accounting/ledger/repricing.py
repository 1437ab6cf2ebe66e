"""What a project's charged jobs of a period would cost at the rates in force on a date, beside
what they were charged (issue 28, a reviewer's record): each partition's jobs priced by the
charging engine under the partition version in force at ``at``.

Read from the shape roll-ups (``UsageShapeMonthly`` for the whole months of the period,
``UsageShapeDaily`` for the days at either end), never from the jobs: one grouped read, then
one engine call per partition and shape. Every charging model is linear in the elapsed
seconds, so a shape's summed seconds are priced once; the engine rounds each job, so that
differs from pricing each job by at most half an SU quantum per job and one more
(docs/allocations.md, "Re-pricing at the round's rates").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction

from accounting.clusters import charging
from accounting.ledger.impact import Shape
from accounting.models import (
    Cluster,
    Partition,
    PartitionVersion,
    UsageShapeDaily,
    UsageShapeMonthly,
)

_ZERO = Decimal(0)
_MB_QUANTUM = Decimal("0.001")


@dataclass(frozen=True)
class RepricedPartition:
    partition_id: int
    partition_name: str
    version_id: int | None  # the PartitionVersion in force at `at` (None: the partition has none)
    version_label: str  # e.g. "gpu from 2026-07-01" (effective_from), for the page
    jobs: int
    charged_su: Decimal  # what these jobs were charged (Job.service_units of charged jobs)
    repriced_su: Decimal  # the same jobs priced by the charging engine under version_id
    unpriced_jobs: int  # jobs the version cannot price (shape does not fit): counted, not priced


@dataclass(frozen=True)
class Repricing:
    start: date
    end: date  # exclusive
    at: date
    partitions: tuple[RepricedPartition, ...]

    @property
    def charged_su(self) -> Decimal:
        return sum((partition.charged_su for partition in self.partitions), _ZERO)

    @property
    def repriced_su(self) -> Decimal:
        return sum((partition.repriced_su for partition in self.partitions), _ZERO)


# (nnodes, cpus, gpus, memory_mb) -> [jobs, elapsed seconds, charged SU]
_Shapes = dict[tuple[int, int, int, Decimal], list[Any]]


def reprice_project(project_id: int, start: date, end: date, *, at: date) -> Repricing:
    """The charged jobs of ``project_id`` that ended on the local days ``[start, end)`` (the
    days of UsageDaily), per partition: their jobs and SU charged, and their SU under the
    partition's version in force at the end of ``at`` in its cluster's zone. A shape that
    version cannot hold (more GPUs than its nodes have) is counted in ``unpriced_jobs``."""
    shapes = _shapes_read(project_id, start, end)
    partitions = Partition.objects.select_related("cluster").in_bulk(list(shapes))
    versions = _versions_at(list(partitions.values()), at)
    repriced = [
        _partition_repriced(partitions[partition_id], versions.get(partition_id), sums)
        for partition_id, sums in shapes.items()
    ]
    repriced.sort(key=lambda row: (row.partition_name, row.partition_id))
    return Repricing(start=start, end=end, at=at, partitions=tuple(repriced))


def _first_of_next_month(day: date) -> date:
    return (day.replace(day=1) + timedelta(days=32)).replace(day=1)


def _periods(start: date, end: date) -> tuple[tuple[date, date] | None, list[tuple[date, date]]]:
    """``[start, end)`` as its whole months (first day of the first, first day after the
    last) and the day ranges before and after them."""
    first_month = start if start.day == 1 else _first_of_next_month(start)
    last_month = end.replace(day=1)
    if first_month >= last_month:
        return None, [(start, end)] if start < end else []
    edges = [(start, first_month), (last_month, end)]
    return (first_month, last_month), [(a, b) for a, b in edges if a < b]


def _shapes_read(project_id: int, start: date, end: date) -> dict[int, _Shapes]:
    """Per partition and shape, the sums of the period: one grouped read of the months and
    the edge days together."""
    shapes: dict[int, _Shapes] = defaultdict(dict)
    rows = _shape_sums("project_id = %s", [project_id], start, end)
    for _project, partition_id, nnodes, cpus, gpus, memory_mb, jobs, seconds, units in rows:
        shape = (int(nnodes), int(cpus), int(gpus), _decimal(memory_mb, _MB_QUANTUM))
        shapes[partition_id][shape] = [
            int(jobs),
            int(seconds),
            _decimal(units, charging.SU_QUANTUM),
        ]
    return shapes


def cluster_shapes_read(*, cluster: Cluster, start: date, end: date) -> list[Shape]:
    """The charged jobs of every project on ``cluster`` that ended on the local days
    ``[start, end)``, summed per project, partition and shape: the input of a rate draft's
    impact (``accounting.ledger.impact``). One grouped read of the shape roll-ups."""
    names = dict(Partition.objects.filter(cluster=cluster).values_list("pk", "name"))
    if not names:
        return []
    placeholders = ", ".join(["%s"] * len(names))
    rows = _shape_sums(f"partition_id IN ({placeholders})", list(names), start, end, wide=True)
    # Positional: a cluster's year is ~10^5 rows, and this loop is most of the Python time.
    return [
        Shape(
            project_id,
            names[partition_id],
            nnodes,
            cpus,
            gpus,
            _decimal(memory_mb, _MB_QUANTUM),
            int(jobs),
            int(seconds),
            _decimal(units, charging.SU_QUANTUM),
        )
        for project_id, partition_id, nnodes, cpus, gpus, memory_mb, jobs, seconds, units in rows
    ]


def _shape_sums(
    condition: str, values: list[int], start: date, end: date, *, wide: bool = False
) -> list[tuple[Any, ...]]:
    """Rows (project, partition, nnodes, cpus, gpus, memory_mb, jobs, seconds, SU) of the shape
    roll-ups matching ``condition`` (fixed SQL with ``values`` as its parameters) over
    ``[start, end)``: the whole months from the monthly table, the days at either end from the
    daily one, summed per project, partition and shape. ``wide``: a read over every project of
    a cluster (hundreds of thousands of rows to group)."""
    months, day_ranges = _periods(start, end)
    columns = (
        "project_id, partition_id, nnodes, cpus, gpus, memory_mb, jobs, elapsed_seconds, "
        "service_units"
    )
    parts: list[str] = []
    parameters: list[int | date] = []
    if months is not None:
        parts.append(
            f"SELECT {columns} FROM {UsageShapeMonthly._meta.db_table} "  # noqa: S608
            f"WHERE {condition} AND month >= %s AND month < %s"
        )
        parameters += [*values, *months]
    # A project's days are two index ranges; a cluster's are a scan of the table, made once
    # for both ends.
    for ranges in [day_ranges] if wide else [[day_range] for day_range in day_ranges]:
        if not ranges:
            continue
        days = " OR ".join(["(day >= %s AND day < %s)"] * len(ranges))
        parts.append(
            f"SELECT {columns} FROM {UsageShapeDaily._meta.db_table} "  # noqa: S608
            f"WHERE {condition} AND ({days})"
        )
        parameters += [*values, *(day for day_range in ranges for day in day_range)]
    if not parts:
        return []
    # Table names and fixed text only; every value is a parameter.
    sql = (
        "SELECT project_id, partition_id, nnodes, cpus, gpus, memory_mb, SUM(jobs), "  # noqa: S608
        f"SUM(elapsed_seconds), SUM(service_units) FROM ({' UNION ALL '.join(parts)}) AS periods "
        "GROUP BY project_id, partition_id, nnodes, cpus, gpus, memory_mb HAVING SUM(jobs) <> 0"
    )
    if not (wide and connection.vendor == "postgresql"):
        with connection.cursor() as cursor:
            cursor.execute(sql, parameters)
            return list(cursor.fetchall())
    with transaction.atomic(), connection.cursor() as cursor:
        # A cluster's year is ~10^5-10^6 roll-up rows: grouped in memory by hash, not sorted
        # on disk (4 MB default work_mem), and without JIT's compile time, which costs more
        # than it saves on a query of a second (docs/costs.md, "Performance"). LOCAL: for this
        # transaction only.
        cursor.execute("SET LOCAL work_mem = '64MB'")
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, parameters)
        return list(cursor.fetchall())


def _decimal(value: Any, quantum: Decimal) -> Decimal:
    """A numeric column's value as the Decimal it holds (SQLite's sums come back as floats)."""
    return value if isinstance(value, Decimal) else Decimal(str(value)).quantize(quantum)


def _versions_at(partitions: list[Partition], at: date) -> dict[int, PartitionVersion]:
    """Each partition's version in force at the end of the day ``at`` in its cluster's zone:
    the latest ``effective_from`` before the next local midnight."""
    versions: dict[int, PartitionVersion] = {}
    for partition in partitions:
        midnight = datetime.combine(at + timedelta(days=1), time(), partition.cluster.zoneinfo)
        version = (
            PartitionVersion.objects.filter(partition=partition, effective_from__lt=midnight)
            .order_by("-effective_from")
            .first()
        )
        if version is not None:
            version.partition = partition
            versions[partition.pk] = version
    return versions


def _partition_repriced(
    partition: Partition, version: PartitionVersion | None, shapes: _Shapes
) -> RepricedPartition:
    jobs, charged, repriced, unpriced = 0, _ZERO, _ZERO, 0
    for (nnodes, cpus, gpus, memory_mb), (shape_jobs, seconds, units) in shapes.items():
        jobs += shape_jobs
        charged += units
        if version is None:
            unpriced += shape_jobs
            continue
        try:
            usage = charging.split_evenly(nodes=nnodes, cores=cpus, memory_mb=memory_mb, gpus=gpus)
            repriced += charging.service_units(version.spec, usage, elapsed_seconds=seconds)
        except (charging.ChargeError, charging.SpecError):
            unpriced += shape_jobs
    if version is None:
        label = f"{partition.name}: no rate version"
    else:
        local = version.effective_from.astimezone(partition.cluster.zoneinfo)
        moment = f"{local:%Y-%m-%d}" if local.time() == time() else f"{local:%Y-%m-%d %H:%M}"
        label = f"{partition.name} from {moment}"
    return RepricedPartition(
        partition_id=partition.pk,
        partition_name=str(partition),
        version_id=version.pk if version is not None else None,
        version_label=label,
        jobs=jobs,
        charged_su=charged,
        repriced_su=repriced,
        unpriced_jobs=unpriced,
    )
