"""Reads of energy and carbon: a job's, and a project's per month from the daily and hourly
energy roll-ups (never a scan of jobs). The arithmetic is in ``footprint.py``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db.models import (
    Count,
    DecimalField,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce

from accounting.carbon.footprint import (
    Energy,
    EnergySums,
    Intensity,
    IntensityStep,
    MonthFootprint,
    epoch_hour_start,
    job_energy,
    monthly_footprint,
    run_footprint,
    run_hours,
)
from accounting.models import Cluster, EnergyHourly, GridIntensity, Job, UsageDaily
from projects.models import Project

_SUM = DecimalField(max_digits=24, decimal_places=6)


@dataclass(frozen=True)
class JobFootprint:
    """A job's best energy, the intensity over its run (its hours' means weighted by the energy
    in each) and its CO2e (None: not set)."""

    energy: Energy
    g_per_kwh: Decimal | None
    co2e_g: Decimal | None


def intensity_at(*, cluster: Cluster, when: datetime) -> Decimal | None:
    """The cluster's grid intensity at ``when``: the newest step of its series at or before
    it, else its constant, else None (one query)."""
    step = (
        GridIntensity.objects.filter(cluster=cluster, starts_at__lte=when)
        .order_by("-starts_at")
        .values_list("g_per_kwh", flat=True)
        .first()
    )
    return step if step is not None else cluster.grid_intensity_g_per_kwh


def job_footprint_get(*, job: Job) -> JobFootprint:
    """Energy (measured, else estimated) and CO2e over the hours of the job's run, each at the
    grid's mean intensity in that hour (``footprint.run_footprint``; one query)."""
    energy = job_energy(
        consumed_energy_joules=job.consumed_energy_joules, estimate_wh=job.energy_wh
    )
    if job.end is None:
        return JobFootprint(energy=energy, g_per_kwh=None, co2e_g=None)
    first, after = run_hours(job.start, job.end)
    intensity = cluster_intensity_get(cluster=job.cluster, start=first, end=after)
    run = run_footprint(energy_wh=energy.wh, start=job.start, end=job.end, intensity=intensity)
    return JobFootprint(energy=energy, g_per_kwh=run.g_per_kwh, co2e_g=run.co2e_g)


def cluster_intensity_get(*, cluster: Cluster, start: datetime, end: datetime) -> Intensity:
    """The cluster's intensity over [start, end): its steps there and the one in force at
    ``start``, over its constant (one query)."""
    in_force = (
        GridIntensity.objects.filter(cluster=cluster, starts_at__lte=start)
        .order_by("-starts_at")
        .values("pk")[:1]
    )
    rows = GridIntensity.objects.filter(cluster=cluster).filter(
        Q(starts_at__gt=start, starts_at__lt=end) | Q(pk=Subquery(in_force))
    )
    steps = [IntensityStep(starts_at=row.starts_at, g_per_kwh=row.g_per_kwh) for row in rows]
    return Intensity(steps=steps, constant=cluster.grid_intensity_g_per_kwh)


@dataclass(frozen=True)
class ClusterMonth:
    """A project's month on one cluster."""

    cluster: str
    intensity_set: bool  # False: the cluster has neither a series nor a constant
    footprint: MonthFootprint


def _energy_by_cluster_and_day(
    rows: QuerySet[UsageDaily],
) -> dict[int, list[tuple[date, EnergySums]]]:
    summed = (
        rows.values("partition__cluster_id", "day")
        .annotate(
            estimate=Coalesce(Sum("energy_wh"), Decimal(0), output_field=_SUM),
            measured=Coalesce(Sum("energy_measured_wh"), Decimal(0), output_field=_SUM),
            measured_estimate=Coalesce(
                Sum("energy_measured_estimate_wh"), Decimal(0), output_field=_SUM
            ),
            job_count=Coalesce(Sum("jobs"), 0, output_field=IntegerField()),
            measured_job_count=Coalesce(
                Sum("energy_measured_jobs"), 0, output_field=IntegerField()
            ),
        )
        .order_by("partition__cluster_id", "day")
    )
    days: dict[int, list[tuple[date, EnergySums]]] = {}
    for row in summed:
        days.setdefault(row["partition__cluster_id"], []).append(
            (
                row["day"],
                EnergySums(
                    estimate_wh=Decimal(row["estimate"]),
                    measured_wh=Decimal(row["measured"]),
                    measured_estimate_wh=Decimal(row["measured_estimate"]),
                    jobs=row["job_count"],
                    measured_jobs=row["measured_job_count"],
                ),
            )
        )
    return days


def _energy_by_cluster_and_hour(
    rows: QuerySet[EnergyHourly],
) -> dict[int, list[tuple[date, int, Decimal]]]:
    summed = (
        rows.values("partition__cluster_id", "day", "hour_start")
        .annotate(wh=Sum("energy_wh"))
        .order_by("partition__cluster_id", "day", "hour_start")
    )
    hours: dict[int, list[tuple[date, int, Decimal]]] = {}
    for row in summed:
        hours.setdefault(row["partition__cluster_id"], []).append(
            (row["day"], int(row["hour_start"].timestamp()) // 3600, Decimal(row["wh"]))
        )
    return hours


def project_footprint_monthly(*, project: Project, start: date, end: date) -> list[ClusterMonth]:
    """The project's energy and CO2e per month and cluster, for the days [start, end): energy
    from the daily roll-ups, CO2e from the hourly ones at each hour's intensity. Three queries
    and one per cluster the project ran on."""
    by_cluster = _energy_by_cluster_and_day(
        UsageDaily.objects.filter(project=project, day__gte=start, day__lt=end)
    )
    hours_by_cluster = _energy_by_cluster_and_hour(
        EnergyHourly.objects.filter(project=project, day__gte=start, day__lt=end)
    )
    result: list[ClusterMonth] = []
    for cluster in Cluster.objects.filter(pk__in=list(by_cluster)):
        hours = hours_by_cluster.get(cluster.pk, [])
        numbers = [hour for _, hour, _ in hours]
        intensity = (
            cluster_intensity_get(
                cluster=cluster,
                start=epoch_hour_start(min(numbers)),
                end=epoch_hour_start(max(numbers) + 1),
            )
            if numbers
            else Intensity(steps=(), constant=cluster.grid_intensity_g_per_kwh)
        )
        result += [
            ClusterMonth(cluster=cluster.name, intensity_set=intensity.is_set, footprint=month)
            for month in monthly_footprint(by_cluster[cluster.pk], hours, intensity)
        ]
    return sorted(result, key=lambda row: (row.footprint.month, row.cluster))


@dataclass(frozen=True)
class SeriesSummary:
    """What the staff page shows of a cluster's series: its extent and newest steps."""

    count: int
    first: datetime | None
    last: datetime | None
    newest: list[GridIntensity]


def grid_intensity_recent(*, cluster: Cluster, limit: int = 20) -> SeriesSummary:
    """The cluster's series: how many steps, from when to when, and the newest ``limit``."""
    rows = GridIntensity.objects.filter(cluster=cluster)
    extent = rows.aggregate(count=Count("pk"), first=Min("starts_at"), last=Max("starts_at"))
    return SeriesSummary(
        count=extent["count"],
        first=extent["first"],
        last=extent["last"],
        newest=list(rows.order_by("-starts_at")[:limit]),
    )
