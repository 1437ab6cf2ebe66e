"""Read queries of the browser pages (jobs table, job detail, usage charts, quotes).

Small named functions beside ``accounting/selectors.py``: each reads a bounded number of rows
(a page of jobs, the roll-ups of one project) and never scans the whole ledger. Who may see
what is decided by the caller with ``allocations.selectors.projects_for_user``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

from django.db.models import DecimalField, F, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncMonth, TruncWeek

from accounting.models import Cluster, Job, Partition, PartitionVersion, UsageDaily
from allocations.models import Project

Step = Literal["day", "week", "month"]
UsageGroup = Literal["partition", "user"]

_ZERO = Decimal(0)
_SU_FIELD = DecimalField(max_digits=24, decimal_places=6)

# The sort keys of the jobs table: a URL value and the ordering it stands for (a stable tie-break
# on the primary key keeps pages from overlapping).
JOB_SORTS: dict[str, tuple[str, ...]] = {
    "end": ("end", "pk"),
    "-end": ("-end", "-pk"),
    "su": ("service_units", "pk"),
    "-su": ("-service_units", "-pk"),
    "elapsed": ("elapsed_seconds", "pk"),
    "-elapsed": ("-elapsed_seconds", "-pk"),
    "user": ("username", "-end", "-pk"),
    "-user": ("-username", "-end", "-pk"),
    "partition": ("partition__name", "-end", "-pk"),
    "-partition": ("-partition__name", "-end", "-pk"),
    "state": ("state", "-end", "-pk"),
    "-state": ("-state", "-end", "-pk"),
}


@dataclass(frozen=True)
class JobFilters:
    """What the jobs table is narrowed to; ``None`` leaves a column unfiltered."""

    username: str | None = None
    partition: Partition | None = None
    state: str | None = None
    ended_from: datetime | None = None
    ended_before: datetime | None = None


def jobs_of_project(
    *, project: Project, filters: JobFilters | None = None, sort: str = "-end"
) -> QuerySet[Job]:
    """The project's jobs (charged, refunded and still running), filtered and sorted."""
    jobs = Job.objects.filter(project=project).select_related("partition__cluster")
    filters = filters or JobFilters()
    if filters.username:
        jobs = jobs.filter(username=filters.username)
    if filters.partition is not None:
        jobs = jobs.filter(partition=filters.partition)
    if filters.state:
        jobs = jobs.filter(state=filters.state)
    if filters.ended_from is not None:
        jobs = jobs.filter(end__gte=filters.ended_from)
    if filters.ended_before is not None:
        jobs = jobs.filter(end__lt=filters.ended_before)
    return jobs.order_by(*JOB_SORTS.get(sort, JOB_SORTS["-end"]))


def job_usernames(*, project: Project) -> list[str]:
    """The Slurm users with charged jobs in the project (from the roll-ups, not the ledger)."""
    return list(
        UsageDaily.objects.filter(project=project)
        .order_by("username")
        .values_list("username", flat=True)
        .distinct()
    )


def job_get(*, pk: int, projects: QuerySet[Project]) -> Job | None:
    """One job with what its detail page shows, if it belongs to one of ``projects``."""
    return (
        Job.objects.select_related(
            "project",
            "partition__cluster",
            "partition_version__partition__cluster",
            "cost_model_version",
        )
        .filter(pk=pk, project__in=projects)
        .first()
    )


@dataclass(frozen=True)
class UsagePoint:
    period: date
    key: str
    service_units: Decimal


def _truncated(step: Step) -> Any:
    if step == "week":
        return TruncWeek("day")
    if step == "month":
        return TruncMonth("day")
    return F("day")


def usage_series(
    *, project: Project, start: date, end: date, step: Step, group: UsageGroup
) -> list[UsagePoint]:
    """SU per ``step`` (from each day's roll-up) and per partition or user, in [start, end)."""
    key = "partition__name" if group == "partition" else "username"
    period = _truncated(step)
    rows = (
        UsageDaily.objects.filter(project=project, day__gte=start, day__lt=end)
        .annotate(period=period)
        .values("period", key)
        .annotate(total=Coalesce(Sum("service_units"), Value(_ZERO), output_field=_SU_FIELD))
        .order_by("period", key)
    )
    points = []
    for row in rows:
        when = row["period"]
        if isinstance(when, datetime):
            when = when.date()
        points.append(UsagePoint(period=when, key=row[key], service_units=Decimal(row["total"])))
    return points


def usage_per_day(
    *, project: Project, partition_ids: Iterable[int], start: date, end: date
) -> dict[date, Decimal]:
    """SU per day of the project on some partitions (one pool), in [start, end)."""
    rows = (
        UsageDaily.objects.filter(
            project=project, partition_id__in=list(partition_ids), day__gte=start, day__lt=end
        )
        .values("day")
        .annotate(total=Sum("service_units"))
        .order_by("day")
    )
    return {row["day"]: Decimal(row["total"]) for row in rows}


def top_jobs(*, project: Project, ended_from: datetime, limit: int = 10) -> list[Job]:
    """The project's most expensive jobs that ended since ``ended_from``."""
    return list(
        Job.objects.filter(project=project, end__gte=ended_from, service_units__gt=0)
        .select_related("partition")
        .order_by("-service_units", "-end")[:limit]
    )


def partition_versions_in_effect(
    *, at: datetime, cluster: Cluster | None = None
) -> list[PartitionVersion]:
    """The version of every partition (of one cluster) in effect at ``at``, in name order.

    One query: the same version ``accounting.selectors.quote_get`` prices with.
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
