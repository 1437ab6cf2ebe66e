"""Read-side queries of the accounting app."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import (
    BigIntegerField,
    DecimalField,
    Exists,
    F,
    Func,
    OuterRef,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, TruncMonth, TruncWeek
from django.utils import timezone

from accounting.charging import Charge
from accounting.models import (
    Cluster,
    CostModelVersion,
    ImportRun,
    Job,
    Partition,
    PartitionVersion,
    QuarantinedRecord,
    UsageDaily,
    UtilisationHourly,
)
from accounting.peak import PeakError, PeakPeriod, PeakTimeline, node_peak, peak_timeline
from accounting.quotes import QuoteRequest, quote_compute
from accounting.specs import CpuPeak, GpuPeak
from accounting.utilisation import (
    PeakInForce,
    Step,
    UtilisationWindow,
    peak_at,
    peaks_in_window,
    utilisation_series_from_hour_rows,
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


# --- Usage from the daily roll-ups --------------------------------------------------------------

_SUM_FIELD = DecimalField(max_digits=24, decimal_places=6)
_USAGE_KEYS = ("period", "project", "user", "cluster", "partition")
_USAGE_SUMS = ("service_units", "core_hours", "gpu_hours", "energy_wh", "cost", "jobs")


@dataclass(frozen=True)
class Usage:
    """Usage rows (a queryset to page through) and the currency of each cluster they cover."""

    rows: QuerySet[Any] | list[dict[str, Any]]
    currencies: Mapping[str, str | None]  # cluster name -> its newest cost model's currency

    def row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A row with every key: grouping keys not asked for are None; ``currency`` is the
        money's; ``cost`` is None when the row sums clusters billing in different currencies
        (group by partition to get each cluster's money)."""
        result = {
            **{name: row.get(f"group_{name}") for name in _USAGE_KEYS},
            **{name: row.get(f"sum_{name}", row.get(name)) for name in _USAGE_SUMS},
        }
        if result["cluster"] is not None:
            result["currency"] = self.currencies.get(result["cluster"])
            return result
        billed = {currency for currency in self.currencies.values() if currency}
        if len(billed) > 1:
            result["cost"], result["currency"] = None, None
        else:
            result["currency"] = next(iter(billed), None)
        return result


def usage_get(
    *,
    projects: QuerySet[Any],
    granularity: str,
    group_by: set[str],
    filters: Mapping[str, Any],
) -> Usage:
    """Daily roll-ups (``UsageDaily``) of ``projects`` summed per day, ISO week, month or in
    total, and per project, user and/or partition. Reads the roll-ups only, never jobs.

    Rows hold ``period`` (the first day of the day/week/month) and the grouping keys asked
    for; a total with no grouping is one row, zeros when nothing was used. Money is summed per
    cluster currency: :meth:`Usage.row` withholds a sum across currencies."""
    rows = UsageDaily.objects.filter(project__in=projects)
    lookups = {
        "project": "project__code",
        "pool": "partition__pool_membership__pool__name",
        "cluster": "partition__cluster__name",
        "partition": "partition__name",
        "user": "username",
    }
    rows = rows.filter(
        **{lookups[name]: value for name, value in filters.items() if name in lookups}
    )
    if filters.get("start"):
        rows = rows.filter(day__gte=filters["start"])
    if filters.get("end"):
        rows = rows.filter(day__lt=filters["end"])
    currencies = _usage_currencies(rows)
    keys: dict[str, Any] = {}
    if granularity != "total":
        keys["period"] = {"day": F("day"), "week": TruncWeek("day"), "month": TruncMonth("day")}[
            granularity
        ]
    if "project" in group_by:
        keys["project"] = F("project__code")
    if "user" in group_by:
        keys["user"] = F("username")
    if "partition" in group_by:
        keys["cluster"] = F("partition__cluster__name")
        keys["partition"] = F("partition__name")
    sums = {
        name: Coalesce(Sum(name), Value(0), output_field=_SUM_FIELD)
        for name in _USAGE_SUMS
        if name != "jobs"
    }
    sums["jobs"] = Coalesce(Sum("jobs"), Value(0))
    if not keys:
        return Usage(rows=[rows.aggregate(**sums)], currencies=currencies)
    # Annotation names must not clash with the model's fields: group under aliases.
    aliases = {f"group_{name}": expression for name, expression in keys.items()}
    grouped = (
        rows.values(**aliases)
        .annotate(**{f"sum_{name}": expression for name, expression in sums.items()})
        .order_by(*aliases)
    )
    return Usage(rows=grouped, currencies=currencies)


def _usage_currencies(rows: QuerySet[UsageDaily]) -> dict[str, str | None]:
    """Cluster name -> currency of its newest cost model version, for the clusters with rows
    among ``rows`` (one query: an index probe per partition, not a scan of the roll-ups)."""
    newest = (
        CostModelVersion.objects.filter(cluster=OuterRef("pk"))
        .order_by("-effective_from")
        .values("currency")[:1]
    )
    used = Partition.objects.filter(Exists(rows.filter(partition=OuterRef("pk"))))
    clusters = (
        Cluster.objects.filter(partitions__in=used)
        .distinct()
        .annotate(currency=Subquery(newest))
        .values_list("name", "currency")
    )
    return dict(clusters)
