"""Read-side queries of the ledger: import runs, quarantined lines, usage roll-ups, jobs."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

from django.core.cache import cache as shared_cache
from django.db import connection
from django.db.models import (
    Count,
    DecimalField,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, TruncMonth, TruncWeek

from accounting.carbon.footprint import job_energy
from accounting.clusters import charging
from accounting.clusters.hardware import HARDWARE_NAMES
from accounting.ledger.cursor import JobCursor
from accounting.ledger.month import MonthJob
from accounting.ledger_storage import (
    KEY_TABLE,
    is_partitioned,
    job_end_of,
    job_ends_of,
    month_of,
    partitions_list,
)
from accounting.models import (
    Cluster,
    CostModelVersion,
    ImportRun,
    ImportRunChange,
    Job,
    LedgerStamp,
    Partition,
    PartitionVersion,
    ProjectUsageDaily,
    QuarantinedRecord,
    UsageDaily,
)
from kit.calendar import add_months
from kit.sql import placeholders, sql_day, sql_decimal, table_names
from projects.models import PoolPartition, Project


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


@dataclass(frozen=True)
class RunProjectBookings:
    """What one import run's jobs book to one project, as the ledger holds them now."""

    project_code: str
    charged_jobs: int
    charged_service_units: Decimal
    corrected_jobs: int
    corrected_service_units: Decimal


@dataclass(frozen=True)
class RunBookings:
    """The jobs an import run last wrote, per project, and the first of its corrected jobs.

    A job the run booked for the first time (``charged_at`` at or after the run started) adds
    its SU to the balance. A corrected job was booked before the run and changed by it
    (``charged_at`` earlier): the ledger keeps only its record as now read, so the SU it had
    before, and with them the change, are not stored. A job written again by a later import
    belongs to that import."""

    projects: list[RunProjectBookings]
    corrected: list[Job]
    corrected_count: int
    charged_count: int

    @property
    def charged_service_units(self) -> Decimal:
        return sum((row.charged_service_units for row in self.projects), Decimal(0))

    @property
    def corrected_service_units(self) -> Decimal:
        return sum((row.corrected_service_units for row in self.projects), Decimal(0))


def import_run_bookings(*, run: ImportRun, limit: int = 200) -> RunBookings:
    """The jobs ``run`` charged or corrected (:class:`RunBookings`), at most ``limit`` of the
    corrected listed. A run that neither charged nor corrected reads nothing: the ledger has
    no index on a job's import run, so only such runs scan it (a staff page, one view)."""
    if not (run.charged or run.updated):
        return RunBookings(projects=[], corrected=[], corrected_count=0, charged_count=0)
    booked = (
        Job.objects.filter(cluster_id=run.cluster_id, import_run=run, charged_at__isnull=False)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .exclude(end__isnull=True)
    )
    corrected_now = Q(charged_at__lt=run.started_at)
    zero = Value(Decimal(0), output_field=_SUM_FIELD)
    rows = (
        booked.order_by()
        .values("project__code")
        .annotate(
            charged_jobs=Count("pk", filter=~corrected_now),
            charged_su=Coalesce(Sum("service_units", filter=~corrected_now), zero),
            corrected_jobs=Count("pk", filter=corrected_now),
            corrected_su=Coalesce(Sum("service_units", filter=corrected_now), zero),
        )
        .order_by("project__code")
    )
    projects = [
        RunProjectBookings(
            project_code=row["project__code"],
            charged_jobs=row["charged_jobs"],
            charged_service_units=row["charged_su"],
            corrected_jobs=row["corrected_jobs"],
            corrected_service_units=row["corrected_su"],
        )
        for row in rows
    ]
    corrected = list(
        booked.filter(corrected_now)
        .select_related("project", "partition")
        .order_by("project__code", "job_id_raw", "run")[:limit]
    )
    return RunBookings(
        projects=projects,
        corrected=corrected,
        corrected_count=sum(row.corrected_jobs for row in projects),
        charged_count=sum(row.charged_jobs for row in projects),
    )


@dataclass(frozen=True)
class RunProjectChange:
    """The net change a run's corrections made to one project's charges (new SU minus old)."""

    project_code: str
    corrected_jobs: int
    service_units: Decimal


def import_run_changes(*, run: ImportRun) -> list[RunProjectChange]:
    """What ``run``'s corrections changed, per project, as the import recorded it in each
    batch's transaction (``ImportRunChange``); empty for a run that corrected nothing, and
    for runs made before it was recorded."""
    if not run.updated:
        return []
    return [
        RunProjectChange(change.project.code, change.corrected_jobs, change.service_units)
        for change in ImportRunChange.objects.filter(run=run)
        .select_related("project")
        .order_by("project__code")
    ]


QuarantineState = Literal["open", "resolved", "all"]


def quarantine_open(*, cluster: Cluster | None = None) -> QuerySet[QuarantinedRecord]:
    return quarantine_records(cluster=cluster)


def quarantine_records(
    *, state: QuarantineState = "open", cluster: Cluster | None = None
) -> QuerySet[QuarantinedRecord]:
    """Quarantined lines: open (newest first per cluster), resolved (most recently resolved
    first, with what resolved them) or all."""
    records = QuarantinedRecord.objects.select_related("cluster")
    if cluster is not None:
        records = records.filter(cluster=cluster)
    if state == "open":
        records = records.filter(resolved_at__isnull=True)
        return records.order_by("cluster__name", "-created_at", "line_number")
    if state == "resolved":
        records = records.filter(resolved_at__isnull=False)
        return records.order_by("-resolved_at", "cluster__name", "line_number")
    return records.order_by(F("resolved_at").desc(nulls_first=True), "cluster__name", "-created_at")


def quarantine_retry_cluster() -> Cluster | None:
    """The cluster with the most open quarantined lines (the retry form's default), or None."""
    busiest = (
        quarantine_records()
        .order_by()
        .values("cluster")
        .annotate(lines=Count("pk"))
        .order_by("-lines", "cluster")
        .first()
    )
    return Cluster.objects.get(pk=busiest["cluster"]) if busiest else None


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


Step = Literal["day", "week", "month"]
UsageGroup = Literal["partition", "user"]
_ZERO = Decimal(0)


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


JOB_ID = re.compile(r"\d{1,12}([_+]\d{1,9})?")


@dataclass(frozen=True)
class JobFilters:
    """What the jobs table is narrowed to; ``None`` leaves a column unfiltered."""

    username: str | None = None
    partition: Partition | None = None
    state: str | None = None
    ended_from: datetime | None = None
    ended_before: datetime | None = None
    # A Slurm job ID (12345, an array task 12345_7, a het component 12345+1) or words of the
    # job's name.
    search: str | None = None


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
    if filters.search:
        text = filters.search.strip()
        if JOB_ID.fullmatch(text):
            jobs = jobs.filter(Q(job_id=text) | Q(job_id_raw=text))
        else:
            jobs = jobs.filter(job_name__icontains=text)
    return jobs.order_by(*JOB_SORTS.get(sort, JOB_SORTS["-end"]))


# --- A page of jobs by keyset, newest end first (the jobs API, docs/api.md) ------------------

# Running jobs (no end) first, then the newest end; among equal ends the newest id.
KEYSET_ORDER = (F("end").desc(nulls_first=True), F("id").desc())
# The months each query of a page reads, one window after the other while the page is not
# full: two, four, eight, then sixteen at a time. A query naming sixteen monthly partitions
# plans in one to two milliseconds, one naming all of six years' in 7 to 15 (docs/importing.md,
# "A hundred million jobs"); a page that walks six years (the last of a walk) takes six.
_WINDOW_MONTHS = (2, 4, 8)
_WIDEST_WINDOW = 16


def jobs_after(
    *,
    jobs: QuerySet[Job],
    after: JobCursor | None,
    size: int,
    columns: Iterable[str] | None,
    ended_from: datetime | None = None,
) -> list[Any]:
    """Up to ``size`` rows (``values(*columns)``; the jobs themselves when ``columns`` is None,
    for a page that renders them) of ``jobs`` in :data:`KEYSET_ORDER` that
    come after ``after`` (from the first when None): a keyset page, whose cost does not grow
    with the pages before it or the jobs after it.

    On the partitioned ledger the page is read a window of months at a time, newest first
    (the running jobs, then two months, four, eight, ... and at last everything older),
    stopping once it is full or at ``ended_from`` (the caller's lower bound of ``end``, if
    any): each query names a few partitions, so it plans in about the time of one."""
    wanted = None if columns is None else list(columns)

    def take(selected: QuerySet[Job], count: int) -> list[Any]:
        if wanted is None:
            return list(selected[:count])
        return list(selected.values(*wanted)[:count])

    if not is_partitioned():
        return take(_after(jobs, after).order_by(*KEYSET_ORDER), size)
    rows: list[Any] = []
    if ended_from is None and (after is None or after.end is None):  # no end: not in a window
        running = jobs.filter(end__isnull=True)
        if after is not None:
            running = running.filter(pk__lt=after.pk)
        rows += take(running.order_by("-id"), size)
    top = after.end if after is not None and after.end is not None else None
    ended = jobs.filter(end__isnull=False)
    if top is not None and after is not None:
        ended = ended.filter(Q(end__lt=top) | Q(end=top, pk__lt=after.pk))
    high, oldest = top, None
    windows = itertools.chain(_WINDOW_MONTHS, itertools.repeat(_WIDEST_WINDOW))
    for number, months in enumerate(windows):
        low: datetime | None = _months_before(_anchored(high) if number == 0 else high, months)
        if number == 1:  # past the first window: how far back the ledger's months go
            oldest = _oldest_month()
        if number and (oldest is None or (low is not None and low <= oldest)):
            low = None  # the last window: everything older (and the open partition's)
        if ended_from is not None:
            low = ended_from if low is None else max(low, ended_from)
        window = ended if low is None else ended.filter(end__gte=low)
        if high is not None and high != top:
            window = window.filter(end__lt=high)
        rows += take(window.order_by(*KEYSET_ORDER), size - len(rows))
        if low is None or len(rows) >= size or _reached(low, ended_from):
            break
        high = low
    return rows


# A cursor this far past now names no job's end (a crafted one, up to year 9999): its first
# window is counted back from the ledger's newest month, not from the cursor.
_FUTURE_SLACK = timedelta(days=62)


def _anchored(top: datetime | None) -> datetime | None:
    """Where a page's first window of months ends: ``top``, or for a cursor far in the future
    the end of the ledger's newest monthly partition. Counted back from year 9999 in windows of
    16 months, a crafted cursor made about 6,000 queries and held a worker for minutes; the
    first window still reaches up to the cursor (``end < top``), so nothing is skipped."""
    if top is None or top <= datetime.now(UTC) + _FUTURE_SLACK:
        return top
    months = [p.month for p in partitions_list() if p.month is not None]
    if not months or max(months) >= date(9999, 12, 1):
        return None  # no month after the newest: count back from now
    after = add_months(max(months).replace(day=1), 1)
    return datetime(after.year, after.month, 1, tzinfo=UTC)


def _oldest_month() -> datetime | None:
    """The first instant of the ledger's oldest monthly partition (None: none), read from the
    catalogue: below it only the open partition holds jobs, so the last window of a page is
    everything older."""
    months = [p.month for p in partitions_list() if p.month is not None]
    return datetime(months[0].year, months[0].month, 1, tzinfo=UTC) if months else None


def _reached(high: datetime | None, ended_from: datetime | None) -> bool:
    return high is not None and ended_from is not None and high <= ended_from


def _after(jobs: QuerySet[Job], after: JobCursor | None) -> QuerySet[Job]:
    if after is None:
        return jobs
    if after.end is None:
        return jobs.filter(Q(end__isnull=True, pk__lt=after.pk) | Q(end__isnull=False))
    return jobs.filter(Q(end__lt=after.end) | Q(end=after.end, pk__lt=after.pk))


def _months_before(moment: datetime | None, months: int) -> datetime | None:
    """The first instant (UTC) of the month ``months - 1`` before ``moment``'s month (now's
    when None): a window of ``months`` calendar months ending with ``moment``'s. None when
    that month would be before year 1 (a cursor near the calendar's start): no lower bound."""
    start = month_of(moment or datetime.now(UTC))
    if start.year * 12 + start.month - months < 12:  # the window's first month before 0001-01
        return None
    first = add_months(start, 1 - months)
    return datetime(first.year, first.month, 1, tzinfo=UTC)


# An exact count of a keyset page only where the filters bound it: one project's jobs that
# ended within this many days (read from that window's partitions of its (project, end) index).
COUNTED_DAYS = 366


def count_bounded(*, ended_from: datetime | None, ended_before: datetime | None) -> bool:
    """Whether one project's jobs between these ends are few enough to count exactly."""
    return (
        ended_from is not None
        and ended_before is not None
        and (ended_before - ended_from).days <= COUNTED_DAYS
    )


def keyset_page_count(
    *, jobs: QuerySet[Job], shown: int, first: bool, more: bool, bounded: bool
) -> int | None:
    """How many jobs a keyset page's filters select, where that costs no scan of the ledger:
    the page's own rows when the first page holds them all, a count where the filters bound
    it (:func:`count_bounded`), else None. The jobs API and the jobs page both ask here."""
    if first and not more:
        return shown
    return jobs_count(jobs=jobs) if bounded else None


def jobs_count(*, jobs: QuerySet[Job]) -> int:
    """How many of ``jobs`` there are (their count from the ``(project, end)`` index; call it
    only where a filter bounds them: docs/api.md, "Jobs")."""
    return jobs.count()


def jobs_count_from_rollups(*, project: Project, filters: JobFilters) -> int | None:
    """How many jobs the project's jobs page lists under ``filters``, without reading its jobs:
    the finished ones from the daily roll-ups (one row per project, partition, user and day)
    and the ones with no end yet. None where the roll-ups cannot tell (a state, a search or
    dates: those counts come from the jobs, where dates bound them)."""
    if filters.state or filters.search or filters.ended_from or filters.ended_before:
        return None
    days = UsageDaily.objects.filter(project=project)
    running = Job.objects.filter(project=project, end__isnull=True)
    if filters.username:
        days, running = (
            days.filter(username=filters.username),
            running.filter(username=filters.username),
        )
    if filters.partition is not None:
        days = days.filter(partition=filters.partition)
        running = running.filter(partition=filters.partition)
    finished = days.aggregate(jobs=Sum("jobs"))["jobs"] or 0
    return finished + running.count()


def job_partitions(*, project: Project) -> QuerySet[Partition]:
    """The partitions the project's jobs ran on (from the roll-ups), for the jobs filter."""
    ran_on = UsageDaily.objects.filter(project=project).values("partition_id").distinct()
    return (
        Partition.objects.filter(pk__in=ran_on)
        .select_related("cluster")
        .order_by("cluster__name", "name")
    )


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
    return job_find(
        jobs=Job.objects.select_related(
            "project",
            "cluster",
            "partition__cluster",
            "partition_version__partition__cluster",
            "cost_model_version",
        ).filter(project__in=projects),
        pk=pk,
    )


def job_find(*, jobs: QuerySet[Job], pk: int) -> Job | None:
    """Job ``pk`` among ``jobs``, read from its own monthly partition.

    A job's id is not the ledger's partition key, so ``id = pk`` alone plans a probe of every
    partition (15 ms of planning with six years of months). The key table keeps each job's end
    (migration 0025): read there first by its primary key, the end then prunes the ledger to
    one partition (the open one for a running job). Where the ledger has moved on meanwhile (a
    running job ended between the two reads), every partition is asked, as before."""
    if not is_partitioned():
        return jobs.filter(pk=pk).first()
    known, end = job_end_of(pk)
    if not known:
        return None  # every job of the ledger has its key row
    in_partition = jobs.filter(end__isnull=True) if end is None else jobs.filter(end=end)
    found = in_partition.filter(pk=pk).first()
    return found if found is not None else jobs.filter(pk=pk).first()


def jobs_by_id(*, pks: Iterable[int]) -> dict[int, Job]:
    """Jobs by id, for a list that points at a few of them (a project's adjustments), each
    read from its own monthly partition: their ends from the key table prune the ledger to
    the partitions that hold them (:func:`job_find`, for many)."""
    wanted = set(pks)
    if not wanted or not is_partitioned():
        return Job.objects.in_bulk(wanted) if wanted else {}
    ends = job_ends_of(wanted)
    ended = {end for end in ends.values() if end is not None}
    where = Q(end__in=ended) if ended else Q(pk__in=[])
    if None in ends.values():
        where |= Q(end__isnull=True)
    found = Job.objects.filter(where, pk__in=list(ends)).in_bulk()
    moved = set(ends) - set(found)  # ended between the two reads: asked everywhere
    return {**found, **(Job.objects.in_bulk(moved) if moved else {})}


def job_node_fractions(job: Job) -> list[dict[str, str]]:
    """The fractions of each node the job held, folded (``charging.node_fractions_folded``):
    derived from the job's shape and the rate version it was charged with, as the import
    computed them when it priced the job (docs/importing.md, "The lean ledger")."""
    version = job.partition_version
    if version is None:
        return []
    if version.partition_id == job.partition_id:
        version.partition = job.partition  # the spec's name: no query per job of a list
    return _node_fractions(
        version, nnodes=job.nnodes, cpus=job.cpus, memory_mb=job.memory_mb, gpus=job.gpus,
        ran=bool(job.nodelist) and job.start is not None,
    )  # fmt: skip


# What ``job_node_fractions_of_row`` reads of a job and its rate version with ``values()``.
JOB_FRACTION_COLUMNS = (
    "nnodes", "cpus", "memory_mb", "gpus", "nodelist", "start", "partition_version_id",
    "partition__name", "partition_version__node_local",
    *(f"partition_version__{name}" for name in HARDWARE_NAMES),
)  # fmt: skip


# What a job's fractions are computed from, apart from whether it ran: the cache's key.
_FRACTION_INPUTS = tuple(
    column for column in JOB_FRACTION_COLUMNS if column not in ("nodelist", "start")
)


def job_node_fractions_of_row(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """:func:`job_node_fractions` of a job read with ``values(*JOB_FRACTION_COLUMNS)`` (a page
    of the jobs API), without a model object or a query per job. A page's jobs share a few
    shapes: each shape's fractions are computed once per process (keyed on every value they
    are computed from, so a changed rate version is a new key), and every row gets its own
    copies."""
    if row["partition_version_id"] is None:
        return []
    ran = bool(row["nodelist"]) and row["start"] is not None
    # The node-local resources are a JSON object: their text, keys sorted, is the hashable key.
    shape = tuple(
        json.dumps(row[column], sort_keys=True) if column == _NODE_LOCAL else row[column]
        for column in _FRACTION_INPUTS
    )
    return [dict(entry) for entry in _fractions_of_shape(shape, ran)]


_NODE_LOCAL = "partition_version__node_local"
_Fractions = tuple[tuple[tuple[str, str], ...], ...]


@lru_cache(maxsize=1024)
def _fractions_of_shape(shape: tuple[Any, ...], ran: bool) -> _Fractions:
    row = dict(zip(_FRACTION_INPUTS, shape, strict=True))
    version = PartitionVersion(
        partition=Partition(name=row["partition__name"]),
        node_local=json.loads(row[_NODE_LOCAL]),
        **{name: row[f"partition_version__{name}"] for name in HARDWARE_NAMES},
    )
    fractions = _node_fractions(
        version, nnodes=row["nnodes"], cpus=row["cpus"], memory_mb=row["memory_mb"],
        gpus=row["gpus"], ran=ran,
    )  # fmt: skip
    return tuple(tuple(entry.items()) for entry in fractions)


def _node_fractions(
    version: PartitionVersion,
    *,
    nnodes: int,
    cpus: int,
    memory_mb: Decimal,
    gpus: int,
    ran: bool,
) -> list[dict[str, str]]:
    # A job that never ran held no node (the import stores no fractions for it).
    if nnodes == 0 or not ran:
        return []
    try:
        fractions = charging.node_fractions_even(
            version.spec, nodes=nnodes, cores=cpus, memory_mb=memory_mb, gpus=gpus
        )
    except (charging.ChargeError, charging.SpecError):
        return []  # a shape the import would have quarantined (a row written by hand)
    return charging.node_fractions_folded(fractions)


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


def ledger_stamp() -> str:
    """A value that moves whenever an import commits a batch (each adds one to ``LedgerStamp``
    in its own transaction): chart data cached under it is never stale. One row read by its
    key, however many import runs the years have left (an aggregate over them took 58 ms at
    630,000 runs)."""
    batches = LedgerStamp.objects.filter(pk=1).values_list("batches", flat=True).first()
    return f"batches.{batches or 0}"


def usage_series(
    *, project: Project, start: date, end: date, step: Step, group: UsageGroup
) -> list[UsagePoint]:
    """SU per ``step`` (from each day's roll-up) and per partition or user, in [start, end):
    per partition from the roll-up without the user (``ProjectUsageDaily``, the same sums)."""
    key = "partition__name" if group == "partition" else "username"
    period = _truncated(step)
    daily = ProjectUsageDaily if group == "partition" else UsageDaily
    rows = (
        daily.objects.filter(project_id=project.pk, day__gte=start, day__lt=end)
        .annotate(period=period)
        .values("period", key)
        .annotate(total=Coalesce(Sum("service_units"), Value(_ZERO), output_field=_SUM_FIELD))
        .order_by("period", key)
    )
    points = []
    for row in rows:
        when = row["period"]
        if isinstance(when, datetime):
            when = when.date()
        points.append(UsagePoint(period=when, key=row[key], service_units=Decimal(row["total"])))
    return points


# The costliest first; among equal SU the newest end, then the newest id: one order, ties too.
TOP_JOBS_ORDER = ("-service_units", "-end", "-id")
# A month's list is kept under its roll-ups' signature, so it is never stale: this only bounds
# what the cache holds.
TOP_JOBS_SECONDS = 30 * 86400


def top_jobs(
    *, project: Project, ended_from: datetime, ended_before: datetime, limit: int = 10
) -> list[Job]:
    """The project's most expensive jobs that ended in ``[ended_from, ended_before)`` (a budget
    period's days), :data:`TOP_JOBS_ORDER`.

    Kept per UTC month of the window (each the top ``limit`` of one monthly partition, read
    from its ``(project, end)`` index) in the cache, under the signature of the roll-ups of
    the month's days (:func:`_month_signatures`): a month an import did not touch is never
    read again, one it touched (the open month, after each import) is read alone. Both bounds
    prune each read to its month's partition. No index of the ledger serves it: the import's
    write path keeps only the lean ledger's three (docs/pages.md, "Performance")."""
    months = _month_slices(ended_from, ended_before)
    signatures = _month_signatures(project_id=project.pk, months=months)
    keys = {
        month: "top-jobs:" + hashlib.sha256(
            repr((project.pk, month, limit, signatures[month])).encode()
        ).hexdigest()
        for month in months
    }  # fmt: skip
    cached = shared_cache.get_many(list(keys.values()))
    missing = [month for month, key in keys.items() if key not in cached]
    fresh = _months_top(project=project, months=missing, limit=limit)
    if fresh:
        kept = {keys[month]: jobs for month, jobs in fresh.items()}
        shared_cache.set_many(kept, TOP_JOBS_SECONDS)
    found = [job for month, key in keys.items() for job in cached.get(key, fresh.get(month, []))]
    found.sort(key=lambda job: (job.service_units, job.end, job.pk), reverse=True)
    return found[:limit]


def _months_top(
    *, project: Project, months: list[tuple[datetime, datetime]], limit: int
) -> dict[tuple[datetime, datetime], list[Job]]:
    """The top ``limit`` jobs of each month slice, in two queries however many months: which
    they are (their id and end: a ``UNION ALL`` of one bounded read per month, each pruned to
    its month's partition, sorting narrow rows), then the jobs themselves by id within the
    ends found. Sorting the project's month of whole rows joined to their partition took twice
    as long (11 against 4 to 8 ms for a month of 5,542 jobs at ten million)."""
    if not months:
        return {}
    reads = [
        Job.objects.filter(project=project, end__gte=since, end__lt=until, service_units__gt=0)
        .order_by(*TOP_JOBS_ORDER)
        .values_list("pk", "end")[:limit]
        for since, until in months
    ]
    if len(reads) > 1 and connection.features.supports_slicing_ordering_in_compound:
        found = list(reads[0].union(*reads[1:], all=True))
    else:  # SQLite: one query a month
        found = [row for read in reads for row in read]
    jobs: list[Job] = []
    if found:
        ends = [end for _, end in found if end is not None]  # every one: end__gte filtered
        jobs = list(
            Job.objects.select_related("partition").filter(
                pk__in=[pk for pk, _ in found], end__gte=min(ends), end__lte=max(ends)
            )
        )
    by_month: dict[tuple[datetime, datetime], list[Job]] = {month: [] for month in months}
    for job in jobs:
        for since, until in months:
            if job.end is not None and since <= job.end < until:
                by_month[(since, until)].append(job)
    return by_month


def _month_slices(since: datetime, until: datetime) -> list[tuple[datetime, datetime]]:
    """``[since, until)`` cut at the first instant (UTC) of each month: one slice per ledger
    partition."""
    slices = []
    low = since.astimezone(UTC)
    while low < until:
        after = month_of(low)
        after = add_months(after, 1)
        high = min(until, datetime(after.year, after.month, 1, tzinfo=UTC))
        slices.append((low, high))
        low = high
    return slices


def _month_signatures(
    *, project_id: int, months: list[tuple[datetime, datetime]]
) -> dict[tuple[datetime, datetime], str]:
    """Per month slice, what the import's daily roll-ups hold of the days its jobs may have
    ended on (each cluster's local days: a day more each side): it moves whenever an import
    charges, re-prices or refunds a job of the slice, in the same transaction. One read of
    the roll-ups for the whole window (``ProjectUsageDaily``: a row per day and partition,
    whatever the number of users), never of the jobs."""
    if not months:
        return {}
    first, last = months[0][0].date() - timedelta(days=1), months[-1][1].date() + timedelta(days=1)
    days = list(
        ProjectUsageDaily.objects.filter(project_id=project_id, day__gte=first, day__lte=last)
        .values("day")
        .annotate(jobs=Sum("jobs"), units=Sum("service_units"))
        .order_by("day")
        .values_list("day", "jobs", "units")
    )
    return {
        (since, until): repr(
            [
                row
                for row in days
                if since.date() - timedelta(days=1) <= row[0] <= until.date() + timedelta(days=1)
            ]
        )
        for since, until in months
    }


# --- What the balance reads of the ledger ---------------------------------------------------


@dataclass(frozen=True)
class PoolLedger:
    """A project's ledger on some pools: each pool's partitions, SU and money charged per day,
    the pending SU of its running jobs and the reserved SU of its queued and running jobs
    (``Job.reserved_service_units``; a job imported before that column reserves its pending
    SU). Keys are pool ids."""

    partitions: dict[int, list[str]]
    used: dict[int, list[tuple[date, Decimal]]]
    spent: dict[int, list[tuple[date, Decimal]]]
    pending: dict[int, Decimal]
    reserved: dict[int, Decimal]


_USAGE_PER_DAY = (
    "SELECT 'usage', u.project_id, pp.pool_id, NULL, u.day, SUM(u.service_units), "
    "SUM(u.cost) FROM {usage} u JOIN {member} pp ON pp.partition_id = u.partition_id "
    "WHERE u.project_id IN {projects} AND pp.pool_id IN {pools} "
    "AND u.day >= %s AND u.day < %s GROUP BY u.project_id, pp.pool_id, u.day"
)
# The same sums per range of days asked for (b: project, pool, since, until). On PostgreSQL
# each range is read from the roll-up's (project, day, partition) key on its own (LATERAL):
# a join of all of them is planned as a scan of the whole roll-up.
_USAGE_PER_RANGE = (
    "SELECT 'usage', b.project, b.pool, NULL, b.since, s.units, s.cost "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::date[], %s::date[]) "
    "AS b(project, pool, since, until) CROSS JOIN LATERAL ("
    "SELECT SUM(u.service_units) AS units, SUM(u.cost) AS cost FROM {usage} u "
    "JOIN {member} pp ON pp.partition_id = u.partition_id WHERE pp.pool_id = b.pool "
    "AND u.project_id = b.project AND u.day >= b.since AND u.day < b.until) s "
    "WHERE s.units IS NOT NULL"
)
_USAGE_PER_RANGE_LISTED = (
    "SELECT 'usage', b.project, b.pool, NULL, b.since, SUM(u.service_units), SUM(u.cost) "
    "FROM (SELECT column1 AS project, column2 AS pool, column3 AS since, column4 AS until "
    "FROM (VALUES {values})) AS b JOIN {member} pp ON pp.pool_id = b.pool "
    "JOIN {usage} u ON u.project_id = b.project AND u.partition_id = pp.partition_id "
    "AND u.day >= b.since AND u.day < b.until GROUP BY b.project, b.pool, b.since"
)


@lru_cache(maxsize=256)
def _pool_ledger_sql(projects: int, pools: int, partitioned: bool, ranges: int | None) -> str:
    """The balance's one query; ``ranges``: None for a row per day, else the number of ranges
    of days whose sums are asked for (0 on PostgreSQL, where they travel as arrays)."""
    member, partition, usage, job = table_names(PoolPartition, Partition, ProjectUsageDaily, Job)
    if partitioned:
        # The running jobs' pending SU from the ledger's key table, which keeps them (and has
        # an index of them): the monthly partitions are not read at all.
        job = KEY_TABLE
    if ranges is None:
        used = _USAGE_PER_DAY.format(
            usage=usage, member=member, projects=placeholders(projects), pools=placeholders(pools)
        )
    elif connection.vendor == "postgresql":
        used = _USAGE_PER_RANGE.format(member=member, usage=usage)
    else:
        values = ", ".join(["(%s, %s, %s, %s)"] * ranges)
        used = _USAGE_PER_RANGE_LISTED.format(values=values, member=member, usage=usage)
    return (  # partitions of the pools; usage per project, pool and day or range; running jobs
        f"SELECT 'partition', NULL, pp.pool_id, pa.name, NULL, NULL, NULL "  # noqa: S608
        f"FROM {member} pp "
        f"JOIN {partition} pa ON pa.id = pp.partition_id WHERE pp.pool_id IN {placeholders(pools)} "
        f"UNION ALL {used} UNION ALL "
        "SELECT 'pending', j.project_id, pp.pool_id, NULL, NULL, SUM(j.pending_service_units), "
        "SUM(COALESCE(j.reserved_service_units, j.pending_service_units)) "
        f"FROM {job} j JOIN {member} pp ON pp.partition_id = j.partition_id "
        f"WHERE j.project_id IN {placeholders(projects)} AND pp.pool_id IN {placeholders(pools)} "
        "AND j.charge_state = %s GROUP BY j.project_id, pp.pool_id"
    )


@dataclass(frozen=True)
class LedgerWanted:
    """What the balance asks of one project's ledger: its pools and the days [since, until);
    with ``cuts``, per pool the days that bound the sums it needs (a period's start and end,
    the last 7 and 30 days...): the usage then comes as one sum per range between consecutive
    cuts, dated by the range's first day, instead of one per day. A sum from one cut to another
    is then the sum of its ranges, and the rows read grow with the cuts, not with the days."""

    pool_ids: list[int]
    since: date
    until: date
    cuts: Mapping[int, Collection[date]] | None = None

    def ranges(self) -> list[tuple[int, date, date]]:
        """(pool, first day, day after) of each range between the cuts inside [since, until)
        (one per day without cuts)."""
        found = []
        for pool in self.pool_ids:
            if self.cuts is None:
                days = (self.until - self.since).days
                inside = {self.since + timedelta(days=offset) for offset in range(1, days)}
            else:
                inside = {day for day in self.cuts.get(pool, ()) if self.since < day < self.until}
            edges = [self.since, *sorted(inside), self.until]
            found += [(pool, low, high) for low, high in itertools.pairwise(edges)]
        return found


def pool_ledger_get(
    *, project_id: int, pool_ids: list[int], since: date, until: date
) -> PoolLedger:
    """What the balance needs of the ledger, in one query over the daily roll-ups (the days in
    ``[since, until)``) and the queued and running jobs, never over the jobs' history. The
    balance itself is allocations' (``allocations.grants.selectors``); this is the only place
    that knows how the ledger stores charges."""
    wanted = {project_id: LedgerWanted(pool_ids=pool_ids, since=since, until=until)}
    return pools_ledger_get(wanted=wanted)[project_id]


def _array_literal(values: Iterable[int | date]) -> str:
    """PostgreSQL's text of an array of integers or dates (neither needs quoting)."""
    return "{" + ",".join(map(str, values)) + "}"


def pools_ledger_get(*, wanted: Mapping[int, LedgerWanted]) -> dict[int, PoolLedger]:
    """:func:`pool_ledger_get` for many projects at once (a page of the staff dashboard), keyed
    by project id, in the same one query: the roll-ups of every project and pool asked for over
    the union of their days. Each project keeps only its own pools and days, so its answer is
    exactly the one :func:`pool_ledger_get` gives it alone."""
    if not wanted:
        return {}
    project_ids = list(wanted)
    pool_ids = sorted({pool for asked in wanted.values() for pool in asked.pool_ids})
    result = {
        project: PoolLedger(
            partitions=defaultdict(list), used=defaultdict(list), spent=defaultdict(list),
            pending=defaultdict(Decimal), reserved=defaultdict(Decimal),
        )
        for project in project_ids
    }  # fmt: skip
    if not pool_ids:
        return result
    since = min(asked.since for asked in wanted.values())
    until = max(asked.until for asked in wanted.values())
    ranges: list[tuple[int, int, date, date]] | None = None
    if any(asked.cuts is not None for asked in wanted.values()):
        ranges = [
            (project, *pool_range)
            for project, asked in wanted.items()
            for pool_range in asked.ranges()
        ]
    if ranges is None:
        used: list[Any] = [*project_ids, *pool_ids, since, until]
    elif connection.vendor == "postgresql":
        # Array literals ('{1,2}', '{2026-01-01,...}'): psycopg's dumper of a Python list took
        # 3 ms of a staff dashboard's view for its 350 ranges.
        used = [_array_literal(column) for column in zip(*ranges, strict=True)] or ["{}"] * 4
    else:
        used = [value for row in ranges for value in row]
    # PostgreSQL's text is the same for any number of ranges (arrays); SQLite's lists them.
    count = None if ranges is None else 0 if connection.vendor == "postgresql" else len(ranges)
    sql = _pool_ledger_sql(len(project_ids), len(pool_ids), is_partitioned(), count)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*pool_ids, *used, *project_ids, *pool_ids, Job.ChargeState.PENDING])
        rows = cursor.fetchall()
    pools_of = {project: set(asked.pool_ids) for project, asked in wanted.items()}
    partitions: dict[int, list[str]] = defaultdict(list)
    for kind, _project, pool, name, *_ in rows:
        if kind == "partition":
            partitions[pool].append(name)
    for names in partitions.values():
        names.sort()
    for kind, project, pool, _name, day, amount, cost in rows:
        if kind == "partition":
            continue
        if pool not in pools_of[project]:
            continue
        ledger = result[project]
        if kind == "usage":
            on = sql_day(day)
            if not wanted[project].since <= on < wanted[project].until:
                continue
            ledger.used[pool].append((on, sql_decimal(amount)))
            ledger.spent[pool].append((on, sql_decimal(cost)))
        else:  # the pending SU and, in the money's place, the reserved SU
            ledger.pending[pool] = sql_decimal(amount)
            ledger.reserved[pool] = sql_decimal(cost)
    for project, ledger in result.items():
        for pool in wanted[project].pool_ids:
            if pool in partitions:
                ledger.partitions[pool] = list(partitions[pool])
    return result


# --- A project's month, for its statement (allocations.statements) ------------------------


@dataclass(frozen=True)
class MonthPartitionCharge:
    """What the daily roll-ups hold of a project's month on one partition."""

    pool_id: int | None  # the pool the partition charges; None when it is in none
    pool: str
    cluster: str
    partition: str
    jobs: int
    service_units: Decimal
    cost: Decimal


@dataclass(frozen=True)
class MonthLedger:
    charges: list[MonthPartitionCharge]
    jobs: list[MonthJob]
    last_import: Mapping[str, tuple[tzinfo, datetime | None]]
    """Per cluster among the jobs' and charges', its time zone and when its newest import
    finished (None: never)."""


def project_month_get(*, project_id: int, first_day: date, next_first_day: date) -> MonthLedger:
    """A project's booked usage on the days [first_day, next_first_day): the SU per partition
    from the daily roll-ups (what the balance counts), and the jobs that ended on those days
    (each cluster's local days, as the roll-ups count them) with their stored money cost."""
    days = UsageDaily.objects.filter(
        project_id=project_id, day__gte=first_day, day__lt=next_first_day
    )
    charges = [
        MonthPartitionCharge(
            pool_id=row["partition__pool_membership__pool"],
            pool=row["partition__pool_membership__pool__name"] or "",
            cluster=row["partition__cluster__name"],
            partition=row["partition__name"],
            jobs=row["jobs"],
            service_units=row["service_units"],
            cost=row["cost"],
        )
        for row in days.values(
            "partition__pool_membership__pool",
            "partition__pool_membership__pool__name",
            "partition__cluster__name",
            "partition__name",
        )
        .annotate(
            jobs=Coalesce(Sum("jobs"), Value(0)),
            service_units=Coalesce(Sum("service_units"), Value(_ZERO), output_field=_SUM_FIELD),
            cost=Coalesce(Sum("cost"), Value(_ZERO), output_field=_SUM_FIELD),
        )
        .order_by("partition__pool_membership__pool__name", "partition__cluster__name",
                  "partition__name")
    ]  # fmt: skip
    jobs: list[MonthJob] = []
    clusters = list(
        Cluster.objects.filter(partitions__usage_days__in=days).distinct().order_by("name")
    )
    for cluster in clusters:
        versions = {version.pk: version for version in cluster.cost_models.all()}
        zone = cluster.zoneinfo
        since = datetime.combine(first_day, datetime.min.time(), tzinfo=zone)
        until = datetime.combine(next_first_day, datetime.min.time(), tzinfo=zone)
        rows = (
            Job.objects.filter(project_id=project_id, cluster=cluster, end__isnull=False)
            .filter(end__gte=since, end__lt=until)
            .exclude(charge_state=Job.ChargeState.PENDING)
            .order_by("end", "job_id_raw", "run")
            .values_list(
                "job_id", "partition__name", "username", "state", "charge_state", "start", "end",
                "elapsed_seconds", "nnodes", "service_units", "energy_wh",
                "consumed_energy_joules", "cost", "cost_model_version_id",
            )
        )  # fmt: skip
        for (job_id, partition, username, state, charge_state, start, end, elapsed, nodes,
             service_units, estimate_wh, joules, cost, version_id) in rows:  # fmt: skip
            version = versions.get(version_id)
            model = f"{cluster.name} v{version.number} {version.name}" if version else ""
            jobs.append(
                MonthJob(
                    job_id=job_id, cluster=cluster.name, partition=partition, username=username,
                    state=state, charge_state=charge_state, start=start, end=end or since,
                    elapsed_seconds=elapsed, nodes=nodes, service_units=service_units,
                    energy_wh=job_energy(consumed_energy_joules=joules, estimate_wh=estimate_wh).wh,
                    cost=cost,
                    cost_model=model,
                    currency=version.currency if version else "",
                )
            )  # fmt: skip
    last_import = {
        cluster.name: (
            cluster.zoneinfo,
            ImportRun.objects.filter(cluster=cluster, finished_at__isnull=False)
            .order_by("-finished_at")
            .values_list("finished_at", flat=True)
            .first(),
        )
        for cluster in clusters
    }
    return MonthLedger(charges=charges, jobs=jobs, last_import=last_import)
