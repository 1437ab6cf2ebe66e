"""Read-side queries of the accounting app."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone

from accounting.charging import Charge
from accounting.models import (
    Cluster,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
    QuarantinedRecord,
    UtilisationHourly,
)
from accounting.peak import PeakError, PeakPeriod, PeakTimeline, node_peak, peak_timeline
from accounting.quotes import QuoteRequest, quote_compute
from accounting.specs import CpuPeak, GpuPeak
from accounting.utilisation import (
    HourlyContribution,
    UtilisationWindow,
    utilisation_series_from_hours,
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


def charges_for_export(
    *,
    cluster: Cluster,
    start: datetime | None = None,
    end: datetime | None = None,
    project_code: str | None = None,
) -> QuerySet[Job]:
    """Finished jobs of ``cluster`` that ended in [start, end), oldest first, for export."""
    jobs = (
        Job.objects.filter(cluster=cluster, end__isnull=False)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .select_related("project", "partition")
        .order_by("end", "job_id_raw", "run")
    )
    if start is not None:
        jobs = jobs.filter(end__gte=start)
    if end is not None:
        jobs = jobs.filter(end__lt=end)
    if project_code:
        jobs = jobs.filter(project__code=project_code)
    return jobs


def import_runs_recent(*, limit: int = 50) -> QuerySet[ImportRun]:
    return ImportRun.objects.select_related("cluster", "started_by").order_by("-started_at")[:limit]


def quarantine_open(*, cluster: Cluster | None = None) -> QuerySet[QuarantinedRecord]:
    records = QuarantinedRecord.objects.filter(resolved_at__isnull=True).select_related("cluster")
    if cluster is not None:
        records = records.filter(cluster=cluster)
    return records.order_by("cluster__name", "-created_at", "line_number")


def partition_peak_timeline(*, partition: Partition) -> PeakTimeline:
    """P_peak of a partition over time, one period per version (node counts change)."""
    periods = []
    for version in partition.versions.order_by("effective_from"):
        cpu_parameters = (
            CpuPeak(
                n_stream=version.cpu_peak_n_stream,
                n_unit=version.cpu_peak_n_unit or 1,
                frequency_hz=version.cpu_peak_frequency_hz or Decimal(0),
            )
            if version.cpu_peak_n_stream
            else None
        )
        gpu_parameters = (
            GpuPeak(
                n_cuda=version.gpu_peak_n_cuda,
                n_tensor=version.gpu_peak_n_tensor or 0,
                matrix_order=version.gpu_peak_matrix_order or 0,
                frequency_hz=version.gpu_peak_frequency_hz or Decimal(0),
            )
            if version.gpu_peak_n_cuda is not None
            else None
        )
        try:
            node = node_peak(
                sockets=version.sockets, cores_per_socket=version.cores_per_socket,
                gpus=version.gpus, cpu_parameters=cpu_parameters,
                cpu_vendor_flops=version.cpu_peak_flops, gpu_parameters=gpu_parameters,
                gpu_vendor_flops=version.gpu_peak_flops,
            )  # fmt: skip
        except PeakError as error:
            raise PeakError(f"{partition} v{version.number}: {error}") from None
        periods.append(
            PeakPeriod(
                effective_from=version.effective_from, node_count=version.node_count, node=node
            )
        )
    return peak_timeline(periods)


def utilisation_series_get(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    step: str,
    partition: Partition | None = None,
) -> tuple[UtilisationWindow, ...]:
    """Q(T) (eq 12) and core/GPU-hour utilisation per bucket, from the hourly rows the import
    keeps: never a scan of the jobs. ``start`` and ``end`` must fall on the cluster's hours."""
    partitions = [partition] if partition else list(cluster.partitions.all())
    timelines = {str(item.pk): partition_peak_timeline(partition=item) for item in partitions}
    rows = UtilisationHourly.objects.filter(
        partition__in=partitions, hour_start__gte=start, hour_start__lt=end
    ).values_list("partition_id", "hour_start", "core_seconds", "gpu_seconds")
    hours = (
        HourlyContribution(
            partition=str(partition_id),
            hour_start=hour_start,
            core_seconds=cores,
            gpu_seconds=gpus,
        )
        for partition_id, hour_start, cores, gpus in rows.iterator(chunk_size=10000)
    )
    return utilisation_series_from_hours(
        hours=hours, partitions=timelines, start=start, end=end, step=step,
        timezone=cluster.zoneinfo,
    )  # fmt: skip
