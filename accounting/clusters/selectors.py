"""Read-side queries of clusters, partitions and their rate versions, and quotes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from django.db.models import F, Max, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from accounting.clusters.charging import Charge
from accounting.clusters.quotes import QuoteRequest, quote_compute
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
)


class NotFound(LookupError):
    """A named cluster, partition or version does not exist; the message says which."""


def cluster_get(*, name: str) -> Cluster:
    try:
        return Cluster.objects.get(name=name)
    except Cluster.DoesNotExist:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
        raise NotFound(f"unknown cluster {name!r} (known: {known})") from None


def partition_get(*, cluster: Cluster, name: str) -> Partition:
    try:
        return Partition.objects.select_related("cluster").get(cluster=cluster, name=name)
    except Partition.DoesNotExist:
        known = ", ".join(cluster.partitions.values_list("name", flat=True)) or "none"
        raise NotFound(
            f"unknown partition {name!r} on cluster {cluster.name!r} (known: {known})"
        ) from None


def partition_version_at(*, partition: Partition, at: datetime) -> PartitionVersion:
    """The version in effect at ``at``: the latest one that started at or before it."""
    version = (
        PartitionVersion.objects.select_related("partition__cluster")
        .filter(partition=partition, effective_from__lte=at)
        .order_by("-effective_from")
        .first()
    )
    if version is None:
        raise NotFound(
            f"partition {partition} has no specification in effect at {at:%Y-%m-%d %H:%M}"
        )
    return version


def partition_version_current(*, partition: Partition) -> PartitionVersion:
    """The newest version (it may start in the future when staff scheduled a change)."""
    version = (
        PartitionVersion.objects.select_related("partition__cluster")
        .filter(partition=partition)
        .order_by("-effective_from")
        .first()
    )
    if version is None:
        raise NotFound(f"partition {partition} has no specification")
    return version


def partition_versions_current(*, cluster: Cluster | None = None) -> list[PartitionVersion]:
    """The newest version of every partition (of one cluster), in name order."""
    versions: QuerySet[PartitionVersion] = PartitionVersion.objects.select_related(
        "partition__cluster"
    ).order_by("partition__cluster__name", "partition__name", "-effective_from")
    if cluster is not None:
        versions = versions.filter(partition__cluster=cluster)
    newest: dict[int, PartitionVersion] = {}
    for version in versions:
        newest.setdefault(version.partition_id, version)
    return list(newest.values())


def quote_get(
    *, partition: Partition, request: QuoteRequest, at: datetime | None = None
) -> tuple[PartitionVersion, Charge]:
    """Price a planned job on ``partition`` with the rate version in effect ``at`` (now)."""
    when = at or timezone.now()
    version = partition_version_at(partition=partition, at=when)
    return version, quote_compute(version.spec, request)


def partition_versions_in_effect(
    *, at: datetime, cluster: Cluster | None = None
) -> list[PartitionVersion]:
    """The version of every partition (of one cluster) in effect at ``at``, in name order.

    One query: the same version ``accounting.clusters.selectors.quote_get`` prices with.
    """
    versions = (
        PartitionVersion.objects.select_related("partition__cluster")
        .filter(effective_from__lte=at)
        .order_by("partition__cluster__name", "partition__name", "-effective_from")
    )
    if cluster is not None:
        versions = versions.filter(partition__cluster=cluster)
    newest: dict[int, PartitionVersion] = {}
    for version in versions:
        newest.setdefault(version.partition_id, version)
    return list(newest.values())


def clusters_by_recent_data(clusters: Iterable[Cluster] | None = None) -> list[Cluster]:
    """``clusters`` (every cluster by default), the one whose sacct data arrived last first,
    then by name: a staff page opens on a cluster with something to show, not on the first by
    name (a paper's example system with no job at all)."""
    pool = list(Cluster.objects.all() if clusters is None else clusters)
    last_import = dict(
        ImportRun.objects.filter(cluster__in=pool)
        .values("cluster")
        .annotate(last=Max("started_at"))
        .values_list("cluster", "last")
    )
    never = datetime.min.replace(tzinfo=UTC)
    return sorted(
        sorted(pool, key=lambda cluster: cluster.name),
        key=lambda cluster: last_import.get(cluster.pk) or never,
        reverse=True,
    )


def cluster_last_import(*, cluster: Cluster) -> datetime | None:
    """When sacct data of ``cluster`` last arrived, or None if it never did."""
    found: datetime | None = ImportRun.objects.filter(cluster=cluster).aggregate(
        last=Max("started_at")
    )["last"]
    return found


def clusters_by_latest_data(*, at: datetime) -> list[Cluster]:
    """Every cluster, the one whose ledger holds the latest job end first; clusters without a
    finished job follow, the one with the newest partition version in effect at ``at`` first;
    then by name. The explorer opens on the first with a CPU and a GPU partition."""
    latest_end = (
        Job.objects.filter(cluster=OuterRef("pk"), end__isnull=False)
        .order_by("-end")
        .values("end")[:1]
    )  # one index probe per cluster (job_cluster_end)
    clusters = Cluster.objects.annotate(
        latest_end=Subquery(latest_end),
        newest_version=Max(
            "partitions__versions__effective_from",
            filter=Q(partitions__versions__effective_from__lte=at),
        ),
    ).order_by(
        F("latest_end").desc(nulls_last=True), F("newest_version").desc(nulls_last=True), "name"
    )
    return list(clusters)


def partition_pair_main(
    versions: Iterable[PartitionVersion],
) -> tuple[PartitionVersion, PartitionVersion] | None:
    """A cluster's main CPU and main GPU partition (the most nodes, then the first by name), or
    None when it lacks either kind."""
    by_size = sorted(versions, key=lambda version: (-version.node_count, version.partition.name))
    cpu = next((version for version in by_size if not version.is_gpu), None)
    gpu = next((version for version in by_size if version.is_gpu), None)
    return (cpu, gpu) if cpu is not None and gpu is not None else None
