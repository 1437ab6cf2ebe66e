"""Read-side of job efficiency: summaries, months, groups, distributions and the users who
leave the most SU on the table, from the roll-ups only (``EfficiencyDaily``,
``EfficiencyBucket``, and ``UsageDaily`` for the jobs without usage data), never a scan of jobs.

The efficiency of any group of jobs is a ratio of sums (CPU = core-hours used / core-hours
held, and so on: docs/efficiency.md), so that a month, a user or a whole centre is weighted by
what its jobs held, not by how many jobs it ran. Jobs without usage data are in no efficiency
roll-up and so in no ratio; :attr:`EfficiencyTotals.unmeasured_jobs` counts them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final, Literal

from django.db.models import F, Q, QuerySet, Sum
from django.db.models.functions import TruncMonth

from accounting.clusters.efficiency import RATIO_QUANTUM
from accounting.models import (
    EfficiencyBucket,
    EfficiencyDaily,
    EfficiencyMonthly,
    Job,
    UsageDaily,
)
from kit.calendar import add_months
from projects.models import Project

_ZERO: Final = Decimal(0)
_ONE: Final = Decimal(1)
METRICS: Final = ("cpu", "memory", "gpu", "walltime")
BUCKETS: Final = 10  # tenths: bucket 0 is under 10 %, bucket 9 is 90 % to 100 %

EfficiencyGroup = Literal["user", "partition", "project"]
_GROUP_KEYS: Final[dict[str, str]] = {
    "user": "username",
    "partition": "partition__name",
    "project": "project__code",
}


@dataclass(frozen=True)
class EfficiencyFilters:
    """What the roll-ups are narrowed to; None leaves a column unfiltered. ``start`` and
    ``end`` are days (the cluster's local day the jobs ended), ``end`` exclusive."""

    project: str | None = None  # a project code
    username: str | None = None
    partition: str | None = None  # a partition name
    start: date | None = None
    end: date | None = None


@dataclass(frozen=True)
class EfficiencyTotals:
    """Sums of the efficiency roll-ups of a group of jobs, and the ratios made of them.

    ``jobs`` and ``charged_service_units`` count every charged job of the group, measured or
    not (from ``UsageDaily``); every other figure is of the ``measured_jobs`` only."""

    jobs: int = 0
    charged_service_units: Decimal = _ZERO
    measured_jobs: int = 0
    service_units: Decimal = _ZERO
    right_sized_service_units: Decimal = _ZERO
    core_hours_held: Decimal = _ZERO
    core_hours_used: Decimal = _ZERO
    memory_jobs: int = 0
    memory_mb_hours_held: Decimal = _ZERO
    memory_mb_hours_used: Decimal = _ZERO
    gpu_jobs: int = 0
    gpu_hours_held: Decimal = _ZERO
    gpu_hours_used: Decimal = _ZERO
    walltime_jobs: int = 0
    hours_run: Decimal = _ZERO
    hours_asked: Decimal = _ZERO

    @property
    def unmeasured_jobs(self) -> int:
        """Charged jobs without usage data: left out of every ratio."""
        return max(self.jobs - self.measured_jobs, 0)

    @property
    def su_left_on_the_table(self) -> Decimal:
        """What the measured jobs cost beyond what right-sized requests would have."""
        return self.service_units - self.right_sized_service_units

    @property
    def cpu(self) -> Decimal | None:
        return _ratio(self.core_hours_used, self.core_hours_held)

    @property
    def memory(self) -> Decimal | None:
        return _ratio(self.memory_mb_hours_used, self.memory_mb_hours_held)

    @property
    def gpu(self) -> Decimal | None:
        return _ratio(self.gpu_hours_used, self.gpu_hours_held)

    @property
    def walltime(self) -> Decimal | None:
        return _ratio(self.hours_run, self.hours_asked)


# The summed columns of EfficiencyDaily: every field of the totals but those of UsageDaily and
# ``measured_jobs``, which is EfficiencyDaily's ``jobs``.
_FROM_USAGE: Final = frozenset({"jobs", "charged_service_units"})
_SUMS: Final = tuple(
    field.name
    for field in fields(EfficiencyTotals)
    if field.name not in _FROM_USAGE | {"measured_jobs"}
)
_COUNTS: Final = frozenset({"memory_jobs", "gpu_jobs", "walltime_jobs"})


def _ratio(used: Decimal, held: Decimal) -> Decimal | None:
    """used / held, capped at 1 as each job's ratio is; None when nothing was held (nothing
    measured)."""
    if held <= 0:
        return None
    return min(used / held, _ONE).quantize(RATIO_QUANTUM)


@dataclass(frozen=True)
class EfficiencyRow:
    """The totals of one month or one user, partition or project."""

    key: str | date
    totals: EfficiencyTotals


def _narrowed(rows: QuerySet[Any], projects: QuerySet[Project], filters: EfficiencyFilters) -> Any:
    return _days(_who(rows, projects, filters), filters.start, filters.end)


def _who(rows: QuerySet[Any], projects: QuerySet[Project], filters: EfficiencyFilters) -> Any:
    """Roll-up rows of ``projects`` narrowed by project, user and partition."""
    rows = rows.filter(project__in=projects)
    if filters.project:
        rows = rows.filter(project__code=filters.project)
    if filters.username:
        rows = rows.filter(username=filters.username)
    if filters.partition:
        rows = rows.filter(partition__name=filters.partition)
    return rows


def _days(rows: QuerySet[Any], start: date | None, end: date | None, column: str = "day") -> Any:
    if start:
        rows = rows.filter(**{f"{column}__gte": start})
    if end:
        rows = rows.filter(**{f"{column}__lt": end})
    return rows


@dataclass(frozen=True)
class _Period:
    """A period [start, end) of days as the whole months inside it, read from
    EfficiencyMonthly (``months``: [first, after) of month firsts, a None bound open; None:
    no whole month), and the days at its ends, read from the daily tables (``days``)."""

    months: tuple[date | None, date | None] | None
    days: tuple[tuple[date, date], ...]


def _period(start: date | None, end: date | None) -> _Period:
    first = start if start is None or start.day == 1 else add_months(start.replace(day=1), 1)
    after = end if end is None or end.day == 1 else end.replace(day=1)
    if start and end and first and after and first >= after:  # no whole month inside
        return _Period(months=None, days=((start, end),))
    days: list[tuple[date, date]] = []
    if start is not None and first is not None and start < first:
        days.append((start, first))
    if end is not None and after is not None and after < end:
        days.append((after, end))
    return _Period(months=(first, after), days=tuple(days))


_ALL: Final = "all"  # the one group of an ungrouped read


def _grouped(
    projects: QuerySet[Project], filters: EfficiencyFilters, key: str | None
) -> dict[Any, EfficiencyTotals]:
    """The totals per group (``key``: "month", a field path, or None for one group) of the
    jobs that match ``filters``: whole months from EfficiencyMonthly (one query), and the
    days at either end of the period, if any, from EfficiencyDaily and UsageDaily (two more).
    Every figure is a sum, so the parts add up exactly."""
    period = _period(filters.start, filters.end)
    reads = []
    if period.months is not None:
        months = _days(_who(EfficiencyMonthly.objects.all(), projects, filters), *period.months,
                       column="month")  # fmt: skip
        sums = {**_sum_expressions(), **_usage_sums("all_jobs", "charged_service_units")}
        reads.append(_read(months, key, "month", sums))
    if period.days:
        spans = Q()
        for start, end in period.days:
            spans |= Q(day__gte=start, day__lt=end)
        for model, sums in ((EfficiencyDaily, _sum_expressions()), (UsageDaily, _usage_sums())):
            days = _who(model.objects.all(), projects, filters).filter(spans)
            reads.append(_read(days, key, "day", sums))
    groups: dict[Any, dict[str, Any]] = {} if key is not None else {_ALL: {}}
    for rows in reads:
        for row in rows:
            group = row.pop("group", _ALL)
            added = groups.setdefault(_month(group) if key == "month" else group, {})
            for name, value in row.items():
                added[name] = added.get(name, 0) + (value or 0)
    empty: dict[str, Any] = dict.fromkeys((*_SUMS, "measured_jobs"), 0)
    return {group: _totals({**empty, **sums}, sums) for group, sums in groups.items()}


def _read(
    rows: QuerySet[Any], key: str | None, date_column: str, sums: dict[str, Any]
) -> Iterable[dict[str, Any]]:
    """``sums`` of ``rows`` per group, as dicts with the group in "group" (none ungrouped)."""
    if key is None:
        return [rows.aggregate(**sums)]
    if key != "month":
        group: Any = F(key)
    elif date_column == "month":
        group = F("month")  # EfficiencyMonthly's rows are months already
    else:
        group = TruncMonth(date_column)
    return rows.values(group=group).annotate(**sums).order_by()


def _sum_expressions() -> dict[str, Any]:
    """The sums of the efficiency roll-ups, by their names in :class:`EfficiencyTotals`. (No
    Coalesce: a group has rows, and the one group of an empty aggregate reads None as 0.)"""
    return {**{name: Sum(name) for name in _SUMS}, "measured_jobs": Sum("jobs")}


def _usage_sums(jobs: str = "jobs", service_units: str = "service_units") -> dict[str, Any]:
    """Every charged job and its SU (UsageDaily's columns, or EfficiencyMonthly's)."""
    return {"total": Sum(jobs), "charged": Sum(service_units)}


def _totals(row: dict[str, Any], usage: dict[str, Any] | None) -> EfficiencyTotals:
    """Totals from a row of efficiency sums and the charged jobs (``total``, ``charged``) of
    the same group, which may be the same dict."""
    values: dict[str, Any] = {name: row[name] or 0 for name in (*_SUMS, "measured_jobs")}
    for name, value in values.items():
        values[name] = int(value) if name in _COUNTS or name == "measured_jobs" else Decimal(value)
    return EfficiencyTotals(
        jobs=int((usage or {}).get("total") or 0),
        charged_service_units=Decimal((usage or {}).get("charged") or 0),
        **values,
    )


def efficiency_summary(
    *, projects: QuerySet[Project], filters: EfficiencyFilters
) -> EfficiencyTotals:
    """The totals of ``projects``' jobs that match ``filters``."""
    return _grouped(projects, filters, None)[_ALL]


def totals_added(rows: Iterable[EfficiencyRow]) -> EfficiencyTotals:
    """The totals of several groups together: every field is a sum, so the months of a period
    add up to its summary (one pass over the roll-ups instead of two)."""
    added: dict[str, Any] = {field.name: 0 for field in fields(EfficiencyTotals)}
    for row in rows:
        for name in added:
            added[name] += getattr(row.totals, name)
    typed: dict[str, Any] = {
        name: value if name in _INTS else Decimal(value) for name, value in added.items()
    }
    return EfficiencyTotals(**typed)


_INTS: Final = frozenset(
    field.name for field in fields(EfficiencyTotals) if field.type in ("int", int)
)


def _month(value: date | datetime) -> date:
    return value.date() if isinstance(value, datetime) else value


def efficiency_by_month(
    *, projects: QuerySet[Project], filters: EfficiencyFilters
) -> list[EfficiencyRow]:
    """The totals per calendar month (its first day as ``key``), oldest first; a month with
    charged jobs but none measured is there with zero sums."""
    months = _grouped(projects, filters, "month")
    return [EfficiencyRow(key=month, totals=months[month]) for month in sorted(months)]


def efficiency_by(
    *, projects: QuerySet[Project], filters: EfficiencyFilters, group: EfficiencyGroup
) -> list[EfficiencyRow]:
    """The totals per user, partition or project, the most SU left on the table first."""
    groups = _grouped(projects, filters, _GROUP_KEYS[group])
    rows = [EfficiencyRow(key=name, totals=totals) for name, totals in groups.items()]
    return sorted(rows, key=lambda row: (-row.totals.su_left_on_the_table, str(row.key)))


def efficiency_distributions(
    *, projects: QuerySet[Project], filters: EfficiencyFilters
) -> dict[str, list[int]]:
    """Measured jobs per tenth of each metric (``cpu``, ``memory``, ``gpu``, ``walltime``: ten
    counts each, under 10 % first). The buckets are kept per month, so a month is counted
    whole when any of its days falls in [start, end): a period that starts or ends mid-month
    counts that month's jobs outside it too."""
    rows = EfficiencyBucket.objects.filter(project__in=projects)
    if filters.project:
        rows = rows.filter(project__code=filters.project)
    if filters.username:
        rows = rows.filter(username=filters.username)
    if filters.partition:
        rows = rows.filter(partition__name=filters.partition)
    if filters.start:
        rows = rows.filter(month__gte=filters.start.replace(day=1))
    if filters.end:
        rows = rows.filter(month__lt=filters.end)
    counts = {metric: [0] * BUCKETS for metric in METRICS}
    for row in rows.values("metric", "bucket").annotate(total=Sum("jobs")).order_by():
        if row["metric"] in counts and 0 <= row["bucket"] < BUCKETS:
            counts[row["metric"]][row["bucket"]] += int(row["total"] or 0)
    return counts


@dataclass(frozen=True)
class TopUser:
    """A user whose jobs left SU on the table, with the projects they ran them in."""

    username: str
    totals: EfficiencyTotals
    projects: list[str]


def efficiency_top_users(
    *, projects: QuerySet[Project], filters: EfficiencyFilters, limit: int = 20
) -> list[TopUser]:
    """The ``limit`` users whose measured jobs left the most SU on the table, the most first
    (ties by name). Three queries, whatever the number of users."""
    left = F("sum_service_units") - F("sum_right_sized")
    ranked = list(
        _narrowed(EfficiencyDaily.objects.all(), projects, filters)
        .values("username")
        .annotate(
            sum_service_units=Sum("service_units"),
            sum_right_sized=Sum("right_sized_service_units"),
        )
        .annotate(left=left)
        .filter(left__gt=0)
        .order_by("-left", "username")
        .values_list("username", flat=True)[:limit]
    )
    if not ranked:
        return []
    measured = (
        _narrowed(EfficiencyDaily.objects.all(), projects, filters)
        .filter(username__in=ranked)
        .values("username", "project__code")
        .annotate(**_sum_expressions())
        .order_by("username", "project__code")
    )
    jobs = (
        _narrowed(UsageDaily.objects.all(), projects, filters)
        .filter(username__in=ranked)
        .values("username")
        .annotate(**_usage_sums())
        .order_by()
    )
    usage = {row["username"]: row for row in jobs}
    per_user: dict[str, list[dict[str, Any]]] = {}
    for row in measured:
        per_user.setdefault(row["username"], []).append(row)
    top = []
    for username in ranked:
        rows = per_user.get(username, [])
        summed = {name: sum((row[name] for row in rows), 0) for name in (*_SUMS, "measured_jobs")}
        top.append(
            TopUser(
                username=username,
                totals=_totals(summed, usage.get(username)),
                projects=[row["project__code"] for row in rows],
            )
        )
    return top


def efficiency_top_jobs(
    *, project: Project, start: datetime, end: datetime, limit: int = 3
) -> list[Job]:
    """The project's measured jobs that ended in [start, end) and left the most SU on the
    table, the most first. Reads the project's jobs of the period (through the (project, end)
    index): for the monthly summary, never for a page."""
    return list(
        Job.objects.filter(
            project=project, end__gte=start, end__lt=end, right_sized_service_units__isnull=False
        )
        .annotate(left=F("service_units") - F("right_sized_service_units"))
        .filter(left__gt=0, charge_state=Job.ChargeState.CHARGED)
        .order_by("-left", "pk")[:limit]
    )


def projects_charged_in(*, start: date, end: date) -> QuerySet[Project]:
    """The projects with charged jobs that ended in [start, end) (days), by code."""
    ran = UsageDaily.objects.filter(day__gte=start, day__lt=end, jobs__gt=0)
    return (
        Project.objects.filter(pk__in=ran.values("project_id"))
        .select_related("pi")
        .order_by("code")
    )
