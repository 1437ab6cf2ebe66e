"""Read-side queries of utilisation: peak timelines from rate versions and Q(T) reports from
the hourly roll-ups the import keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import (
    BigIntegerField,
    Func,
)
from django.utils import timezone

from accounting.clusters.specs import CpuPeak, GpuPeak
from accounting.models import (
    Cluster,
    Job,
    Partition,
    PartitionVersion,
    UtilisationHourly,
)
from accounting.utilisation.peak import (
    PeakError,
    PeakPeriod,
    PeakTimeline,
    node_peak,
    peak_timeline,
)
from accounting.utilisation.quality import (
    PeakInForce,
    Step,
    UtilisationWindow,
    peak_at,
    peaks_in_window,
    utilisation_series_from_hour_rows,
)


def _peak_period(version: PartitionVersion) -> PeakPeriod:
    """A rate version as a period of P_peak: its node count and its nodes' peak (eqs 1-8)."""
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
        raise PeakError(f"{version.partition} v{version.number}: {error}") from None
    return PeakPeriod(
        effective_from=version.effective_from, node_count=version.node_count, node=node
    )


def partition_peak_timeline(*, partition: Partition) -> PeakTimeline:
    """P_peak of a partition over time, one period per version (node counts change)."""
    return partition_peak_timelines(partitions=[partition])[partition.name]


def partition_peak_timelines(*, partitions: Sequence[Partition]) -> dict[str, PeakTimeline]:
    """P_peak over time of each partition (of one cluster), by name, in one query."""
    versions: dict[int, list[PeakPeriod]] = {partition.pk: [] for partition in partitions}
    by_id = {partition.pk: partition for partition in partitions}
    for version in PartitionVersion.objects.filter(partition__in=partitions).order_by(
        "partition_id", "effective_from"
    ):
        version.partition = by_id[version.partition_id]  # for messages, without a query
        versions[version.partition_id].append(_peak_period(version))
    timelines = {}
    for partition in partitions:
        try:
            timelines[partition.name] = peak_timeline(versions[partition.pk])
        except PeakError as error:
            raise PeakError(f"{partition}: {error}") from None
    return timelines


class _EpochSeconds(Func):
    """Whole seconds since the Unix epoch of a datetime column, as a bigint: converting 10,000s
    of timestamps into ``datetime`` objects costs more than all the Q(T) arithmetic."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)::bigint"
    output_field = BigIntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django keeps datetimes in SQLite as UTC text; '%%%%s' reaches SQLite as '%s'.
        template = "CAST(strftime('%%%%s', %(expressions)s) AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra)


def _cluster_partitions(*, cluster: Cluster, partition: Partition | None) -> list[Partition]:
    if partition is not None:
        return [partition]
    return list(cluster.partitions.order_by("name"))


def _utilisation_windows(
    *,
    cluster: Cluster,
    partitions: Sequence[Partition],
    timelines: Mapping[str, PeakTimeline],
    start: datetime,
    end: datetime,
    step: Step | str,
) -> tuple[UtilisationWindow, ...]:
    query = (
        UtilisationHourly.objects.filter(
            partition__in=partitions, hour_start__gte=start, hour_start__lt=end
        )
        .annotate(hour=_EpochSeconds("hour_start"))
        .order_by()
        .values_list("partition__name", "hour", "core_seconds", "gpu_seconds")
    )
    # The rows as the cursor gives them (str, int, int, int): the ORM's per-row converters
    # would cost half as much again as the fetch.
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return utilisation_series_from_hour_rows(
        rows=rows, partitions=timelines, start=start, end=end, step=step,
        timezone=cluster.zoneinfo,
    )  # fmt: skip


def utilisation_series_get(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    step: Step | str,
    partition: Partition | None = None,
) -> tuple[UtilisationWindow, ...]:
    """Q(T) (eq 12) and core/GPU-hour utilisation per bucket, from the hourly rows the import
    keeps: never a scan of the jobs. ``start`` and ``end`` must fall on the cluster's hours.
    Partitions are keyed by name; the total is over those asked for (all of the cluster's)."""
    partitions = _cluster_partitions(cluster=cluster, partition=partition)
    timelines = partition_peak_timelines(partitions=partitions)
    return _utilisation_windows(
        cluster=cluster, partitions=partitions, timelines=timelines, start=start, end=end,
        step=step,
    )  # fmt: skip


@dataclass(frozen=True)
class PartitionPeaks:
    """What the utilisation page says about one partition's P_peak."""

    name: str
    now: PeakInForce | None  # the hardware in force now (None: no version yet)
    in_window: list[PeakInForce]  # at the window's start and each change inside it


@dataclass(frozen=True)
class UtilisationReport:
    """A Q(T) series with what it was computed from (for the page and the API)."""

    cluster: Cluster
    partition: Partition | None  # None: every partition of the cluster
    start: datetime
    end: datetime
    step: Step
    windows: tuple[UtilisationWindow, ...]
    peaks: list[PartitionPeaks]


def utilisation_report_get(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    step: Step | str,
    partition: Partition | None = None,
    now: datetime | None = None,
) -> UtilisationReport:
    """:func:`utilisation_series_get` with each partition's peak source, P_peak now and the
    node-count changes inside the window (from the rate versions). Three queries."""
    partitions = _cluster_partitions(cluster=cluster, partition=partition)
    timelines = partition_peak_timelines(partitions=partitions)
    windows = _utilisation_windows(
        cluster=cluster, partitions=partitions, timelines=timelines, start=start, end=end,
        step=step,
    )  # fmt: skip
    moment = now or timezone.now()
    peaks = [
        PartitionPeaks(
            name=name,
            now=peak_at(timeline, moment),
            in_window=peaks_in_window(timeline, start, end),
        )
        for name, timeline in timelines.items()
    ]
    return UtilisationReport(
        cluster=cluster, partition=partition, start=start, end=end, step=Step(step),
        windows=windows, peaks=peaks,
    )  # fmt: skip


def jobs_in_window(
    *,
    cluster: Cluster,
    partition: Partition | None,
    start: datetime,
    end: datetime,
    limit: int = 20,
) -> list[Job]:
    """The jobs of ``cluster`` (``partition``) that ran during [start, end), the widest first:
    what a flagged, over-committed window is made of."""
    jobs = Job.objects.filter(cluster=cluster, start__lt=end, end__gt=start)
    if partition is not None:
        jobs = jobs.filter(partition=partition)
    return list(jobs.select_related("partition").order_by("-cpus", "start", "pk")[:limit])
