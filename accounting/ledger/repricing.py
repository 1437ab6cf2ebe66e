"""What a project's charged jobs would cost at other rates: each job priced again by the
charging engine under the partition version (rate version) in force on a day, beside what it
was charged. A committee reads it on the applicant's record: the last twelve months of jobs at
the rates the round's grants will use.

This version is the simple, exact one: the charged jobs are grouped by partition and shape
(nodes, cores, GPUs, memory) and elapsed seconds, and each group is priced once, as one job
of that shape and length, times its number of jobs. The engine rounds each job to the SU
quantum, and every job of a group is the same job, so the sum is the per-job sum to the last
place. Jobs never appear one by one: the database sums them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum

from accounting.clusters import charging
from accounting.models import Cluster, Job, Partition, PartitionVersion

_ZERO = Decimal(0)


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
        return sum((item.charged_su for item in self.partitions), _ZERO)

    @property
    def repriced_su(self) -> Decimal:
        return sum((item.repriced_su for item in self.partitions), _ZERO)


def _midnight(day: date, cluster: Cluster) -> datetime:
    """The start of ``day`` on the cluster's clock: the ledger's days are its local days."""
    return datetime.combine(day, time.min, tzinfo=cluster.zoneinfo)


def _version_at(partition: Partition, at: date) -> PartitionVersion | None:
    """The version in force at the start of ``at`` on the partition's cluster: the latest one
    effective by then."""
    return (
        PartitionVersion.objects.select_related("partition")
        .filter(partition=partition, effective_from__lte=_midnight(at, partition.cluster))
        .order_by("-effective_from")
        .first()
    )


def _shapes(project_id: int, start: date, end: date) -> dict[int, list[dict[str, Any]]]:
    """The project's charged jobs that ended in [start, end) (each cluster's local days), as
    sums per partition, shape and elapsed seconds: one query per cluster the project ran on
    (the clusters of its daily usage)."""
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for cluster in Cluster.objects.filter(partitions__usage_days__project_id=project_id).distinct():
        rows = (
            Job.objects.filter(
                project_id=project_id,
                cluster=cluster,
                charge_state=Job.ChargeState.CHARGED,
                end__gte=_midnight(start, cluster),
                end__lt=_midnight(end, cluster),
            )
            .values("partition_id", "nnodes", "cpus", "gpus", "memory_mb", "elapsed_seconds")
            .annotate(jobs=Count("id"), charged_su=Sum("service_units"))
            .order_by()
        )
        for row in rows:
            found[row["partition_id"]].append(dict(row))
    return found


def _priced(version: PartitionVersion, row: dict[str, Any]) -> Decimal | None:
    """One job of the row's shape and length priced under ``version``; None when the engine
    cannot price it (a shape the version's nodes cannot hold). A job that held no node (it
    never ran; the ledger books it at 0) costs nothing at any rate."""
    if row["nnodes"] == 0:
        return _ZERO
    try:
        usage = charging.split_evenly(
            nodes=row["nnodes"], cores=row["cpus"], memory_mb=row["memory_mb"], gpus=row["gpus"]
        )
        return charging.service_units(version.spec, usage, elapsed_seconds=row["elapsed_seconds"])
    except (charging.ChargeError, charging.SpecError):
        return None


def reprice_project(project_id: int, start: date, end: date, *, at: date) -> Repricing:
    """The project's charged jobs that ended in [start, end), per partition: what they were
    charged, and what the charging engine prices them at under the partition version in force
    at ``at``. Jobs the version cannot price are counted in ``unpriced_jobs`` and left out of
    ``repriced_su`` (their charge stays in ``charged_su``)."""
    shapes = _shapes(project_id, start, end)
    partitions = Partition.objects.select_related("cluster").filter(pk__in=shapes)
    repriced = []
    for partition in sorted(partitions, key=lambda item: (item.cluster.name, item.name)):
        rows = shapes[partition.pk]
        version = _version_at(partition, at)
        jobs = sum(row["jobs"] for row in rows)
        charged = sum((row["charged_su"] or _ZERO for row in rows), _ZERO)
        total = _ZERO
        unpriced = 0
        for row in rows:
            one = _priced(version, row) if version is not None else None
            if one is None:
                unpriced += row["jobs"]
            else:
                total += one * row["jobs"]
        label = (
            f"{partition.name} from "
            f"{version.effective_from.astimezone(partition.cluster.zoneinfo):%Y-%m-%d}"
            if version is not None
            else f"{partition.name}: no rate version"
        )
        repriced.append(
            RepricedPartition(
                partition_id=partition.pk,
                partition_name=partition.name,
                version_id=version.pk if version is not None else None,
                version_label=label,
                jobs=jobs,
                charged_su=charged,
                repriced_su=total,
                unpriced_jobs=unpriced,
            )
        )
    return Repricing(start=start, end=end, at=at, partitions=tuple(repriced))
