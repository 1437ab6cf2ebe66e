"""True overhead in canonical units over the portal's jobs (DESIGN.md section 5): services and
selectors. The maths is ``accounting/utilisation/canonical.py``; this module feeds it the ledger
and keeps its results.

``overhead_run_compute`` reads the partitions (node list and node size from the
``PartitionVersion`` in force, the canonical unit from the ``Partition``), streams the jobs that
overlap the window, sweeps them with per-job fair shares and stores, in one transaction, one
``OverheadPartitionResult`` per partition and one ``JobFairShare`` per placed job.

A partition whose version changes inside the window (nodes added or removed, a node resized):
the window is cut at every such change and each piece is swept with the versions in force
during it; the pieces are then joined (``overhead_reports_combine``), so every instant is
measured against the nodes that existed then. A partition's node count in the results is that
of the last piece.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounting.locks import ImportLockBusy, named_lock
from accounting.models import (
    Cluster,
    Job,
    JobFairShare,
    OverheadPartitionResult,
    OverheadRun,
    Partition,
    PartitionVersion,
)
from accounting.utilisation.canonical import (
    CanonicalUnit,
    NodeJob,
    NodeResources,
    OverheadPartition,
    OverheadReport,
    overhead_reports_combine,
    true_overhead_report,
)
from accounting.utilisation.quality import Step
from kit.errors import ApplicationError
from kit.queue import task_enqueue

logger = logging.getLogger(__name__)

JOB_CHUNK: Final = 10_000  # rows per fetch while streaming jobs
SHARE_BATCH: Final = 5_000  # JobFairShare rows per INSERT where COPY is not available
UNPLACED_SAMPLE: Final = 20  # unplaced jobs kept, with their reasons, on the run
MAX_WINDOW: Final = timedelta(days=400)
# A run still "running" after this has lost its worker: the task's hard limit is 60 minutes.
RUN_STALE_AFTER: Final = timedelta(minutes=65)


class OverheadError(ApplicationError):
    """A window or step that cannot be computed; the message says why."""


# --- Partitions ------------------------------------------------------------------------------


def canonical_unit_of(partition: Partition) -> CanonicalUnit | None:
    """The partition's canonical unit, or ``None`` for the paper's default for its nodes."""
    thresholds = (
        partition.canonical_cores,
        partition.canonical_memory_mb,
        partition.canonical_gpus,
    )
    if all(value is None for value in thresholds):
        return None
    cores, memory_mb, gpus = thresholds
    return CanonicalUnit(cores=cores, memory_mb=memory_mb, gpus=gpus)


def _overhead_partition(version: PartitionVersion) -> OverheadPartition:
    return OverheadPartition(
        name=version.partition.name,
        nodelist=version.nodelist,
        node=NodeResources(
            cores=version.cores_per_node, memory_mb=version.memory_mb, gpus=version.gpus
        ),
        unit=canonical_unit_of(version.partition),
    )


@dataclass(frozen=True)
class _Piece:
    """A part of the window during which no partition of the cluster changed version."""

    start: datetime
    end: datetime
    partitions: tuple[OverheadPartition, ...]


def _pieces(*, cluster: Cluster, start: datetime, end: datetime) -> list[_Piece]:
    """The window cut at every version change inside it, each piece with its versions."""
    versions = list(
        PartitionVersion.objects.filter(partition__cluster=cluster, effective_from__lt=end)
        .select_related("partition")
        .order_by("partition__name", "effective_from")
    )
    cuts = sorted({start, end} | {v.effective_from for v in versions if start < v.effective_from})
    pieces = []
    for piece_start, piece_end in itertools.pairwise(cuts):
        in_force: dict[int, PartitionVersion] = {}
        for version in versions:  # by name, then time: the last one started wins
            if version.effective_from <= piece_start:
                in_force[version.partition_id] = version
        pieces.append(
            _Piece(piece_start, piece_end, tuple(map(_overhead_partition, in_force.values())))
        )
    return pieces


# --- Jobs ------------------------------------------------------------------------------------


def _jobs(*, cluster: Cluster, start: datetime, end: datetime, now: datetime) -> Iterator[NodeJob]:
    """Jobs of the cluster that held nodes during ``[start, end)``, streamed.

    A job still running (no end yet) holds its nodes until now. Memory is rounded to whole MiB.
    """
    rows = (
        Job.objects.filter(cluster=cluster, start__isnull=False, start__lt=end)
        .filter(Q(end__gt=start) | Q(end__isnull=True))
        .order_by()
        .values_list("pk", "start", "end", "nodelist", "cpus", "memory_mb", "gpus")
    )
    for pk, job_start, job_end, nodelist, cpus, memory_mb, gpus in rows.iterator(
        chunk_size=JOB_CHUNK
    ):
        assert job_start is not None  # filtered above
        if job_end is None:
            job_end = max(job_start, min(now, end))
        yield NodeJob(
            job_id=str(pk),
            start=job_start,
            end=job_end,
            nodelist=nodelist,
            cores=cpus,
            memory_mb=int(Decimal(memory_mb).to_integral_value()),
            gpus=gpus,
        )


def overhead_report_get(
    *, cluster: Cluster, start: datetime, end: datetime, step: Step | str = Step.HOUR
) -> OverheadReport:
    """The true-overhead report of the cluster's jobs over ``[start, end)``, with fair shares,
    computed now from the ledger (nothing is stored)."""
    now = timezone.now()
    reports = [
        true_overhead_report(
            jobs=_jobs(cluster=cluster, start=piece.start, end=piece.end, now=now),
            partitions=piece.partitions,
            start=piece.start,
            end=piece.end,
            step=step,
            timezone=cluster.zoneinfo,
            fair_shares=True,
        )
        for piece in _pieces(cluster=cluster, start=start, end=end)
    ]
    if len(reports) == 1:
        return reports[0]
    return overhead_reports_combine(reports=reports, step=step, timezone=cluster.zoneinfo)


# --- Services --------------------------------------------------------------------------------


def _check_window(start: datetime, end: datetime, step: str) -> None:
    if timezone.is_naive(start) or timezone.is_naive(end):
        raise OverheadError("the window's start and end need a time zone")
    if end <= start:
        raise OverheadError("the window must end after it starts")
    if end - start > MAX_WINDOW:
        raise OverheadError(f"the window may be at most {MAX_WINDOW.days} days long")
    if step not in Step._value2member_map_:
        raise OverheadError(f"step must be one of {', '.join(Step)}, not {step!r}")


@transaction.atomic
def overhead_run_start(
    *, cluster: Cluster, start: datetime, end: datetime, step: str = "hour", started_by: Any = None
) -> OverheadRun:
    """Record a run and enqueue its computation (after the commit): what the staff page does."""
    _check_window(start, end, step)
    run = OverheadRun.objects.create(
        cluster=cluster, window_start=start, window_end=end, step=step,
        started_by=started_by if started_by is not None and started_by.pk else None,
    )  # fmt: skip
    task_enqueue(
        name="accounting.tasks.overhead_compute",
        args=(cluster.pk, start.isoformat(), end.isoformat(), step),
        kwargs={"run_id": run.pk},
        on_unsent=lambda unsent: _run_unsent(run.pk, unsent),
    )
    return run


def _run_unsent(run_id: int, unsent: Exception) -> None:
    """A run the task queue did not take fails at once, saying why (it would have shown
    "running" for a worker that never comes)."""
    OverheadRun.objects.filter(pk=run_id, status=OverheadRun.Status.RUNNING).update(
        status=OverheadRun.Status.FAILED,
        finished_at=timezone.now(),
        error=f"not computed: it could not be handed to a worker: {unsent}. Start it again",
    )


def overhead_run_compute(
    *,
    cluster: Cluster,
    start: datetime,
    end: datetime,
    step: str = "hour",
    started_by: Any = None,
    run: OverheadRun | None = None,
) -> OverheadRun:
    """Compute true overhead and fair shares over ``[start, end)`` and store them.

    The results of a run are written in one transaction, so a run is either done with all its
    rows or failed with none; a failure is recorded on the run (``error``), not raised.
    ``run`` is the row ``overhead_run_start`` made; without it a new one is recorded.
    """
    _check_window(start, end, step)
    if run is None:
        run = OverheadRun.objects.create(
            cluster=cluster, window_start=start, window_end=end, step=step,
            started_by=started_by if started_by is not None and started_by.pk else None,
        )  # fmt: skip
    try:
        with named_lock(_lock_name(cluster, start, end)):
            report = overhead_report_get(cluster=cluster, start=start, end=end, step=step)
            with transaction.atomic():
                _store(run, cluster, report)
    except ImportLockBusy:
        return overhead_run_fail(
            run=run, reason="another computation of this cluster and window was running"
        )
    except Exception as error:  # recorded on the run, which staff see; the task ends cleanly
        logger.exception("overhead run %s of %s failed", run.pk, cluster.name)
        overhead_run_fail(run=run, reason=f"{type(error).__name__}: {error}")
    return run


def _lock_name(cluster: Cluster, start: datetime, end: datetime) -> str:
    # One lock per cluster and window, whoever asks (the page, the daily task, a shell), so
    # two computations of the same window never overlap (PostgreSQL; SQLite runs tasks eagerly).
    return f"overhead {cluster.pk} {start.timestamp():.0f} {end.timestamp():.0f}"


def overhead_runs_expire(*, now: datetime | None = None) -> int:
    """Mark failed the runs still ``running`` past the task's hard time limit: their worker
    was lost, and they would otherwise block their window (and the page's refresh) for good."""
    cutoff = (now or timezone.now()) - RUN_STALE_AFTER
    return OverheadRun.objects.filter(
        status=OverheadRun.Status.RUNNING, started_at__lt=cutoff
    ).update(
        status=OverheadRun.Status.FAILED,
        finished_at=now or timezone.now(),
        error="no result within the time limit: the worker computing it was lost; compute again",
    )


def overhead_run_fail(*, run: OverheadRun, reason: str) -> OverheadRun:
    """Mark a run failed with the reason staff will read on its page; it keeps no results."""
    run.status = OverheadRun.Status.FAILED
    run.error = reason[:10_000]
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def _store(run: OverheadRun, cluster: Cluster, report: OverheadReport) -> None:
    partitions = {p.name: p for p in Partition.objects.filter(cluster=cluster)}
    OverheadPartitionResult.objects.bulk_create(
        OverheadPartitionResult(
            run=run,
            partition=partitions[name],
            unit_cores=part.unit.cores or 0,
            unit_memory_mb=part.unit.memory_mb or 0,
            unit_gpus=part.unit.gpus or 0,
            node_count=part.node_count,
            buckets=[
                [bucket.start.isoformat(), bucket.end.isoformat(), bucket.unit_seconds]
                for bucket in part.buckets
            ],
            histogram={str(units): seconds for units, seconds in part.histogram.items()},
            occupied_node_seconds=part.occupied_node_seconds,
            allocated_core_seconds=part.allocated.core_seconds,
            allocated_memory_mb_seconds=part.allocated.memory_mb_seconds,
            allocated_gpu_seconds=part.allocated.gpu_seconds,
            billable_core_seconds=part.billable.core_seconds,
            billable_memory_mb_seconds=part.billable.memory_mb_seconds,
            billable_gpu_seconds=part.billable.gpu_seconds,
        )
        for name, part in report.partitions.items()
    )
    _fair_shares_insert(run, report)
    run.jobs_unplaced = len(report.unplaced)
    # A job may be placed in one piece of a cut window and unplaced in another: count it once.
    seen = {share.job_id for share in report.fair_shares}
    seen.update(job.job_id for job in report.unplaced)
    run.jobs_seen = len(seen)
    run.unplaced_sample = [
        [_job_label(job.job_id), job.reason] for job in report.unplaced[:UNPLACED_SAMPLE]
    ]
    run.status = OverheadRun.Status.DONE
    run.error = ""
    run.finished_at = timezone.now()
    run.save()


def _job_label(pk: str) -> str:
    """A job's Slurm id for people (the sweep knows jobs by primary key)."""
    job = Job.objects.filter(pk=int(pk)).values_list("job_id", flat=True).first()
    return job or pk


_SHARE_COLUMNS: Final = (
    "run_id", "job_id", "allocated_core_seconds", "allocated_memory_mb_seconds",
    "allocated_gpu_seconds", "billed_core_seconds", "billed_memory_mb_seconds",
    "billed_gpu_seconds",
)  # fmt: skip


def _fair_shares_insert(run: OverheadRun, report: OverheadReport) -> None:
    """One JobFairShare per placed job: COPY on PostgreSQL (a month is a million rows)."""
    rows = (
        (
            run.pk, int(share.job_id), share.allocated_core_seconds,
            share.allocated_memory_mb_seconds, share.allocated_gpu_seconds,
            share.billed_core_seconds, share.billed_memory_mb_seconds, share.billed_gpu_seconds,
        )
        for share in report.fair_shares
    )  # fmt: skip
    if connection.vendor == "postgresql":
        table = JobFairShare._meta.db_table
        sql = f"COPY {table} ({', '.join(_SHARE_COLUMNS)}) FROM STDIN"
        with (
            connection.wrap_database_errors,
            connection.cursor() as cursor,
            cursor.cursor.copy(sql) as copy,
        ):
            for row in rows:
                copy.write_row(row)
        return
    batch: list[JobFairShare] = []
    for row in rows:
        batch.append(JobFairShare(**dict(zip(_SHARE_COLUMNS, row, strict=True))))
        if len(batch) >= SHARE_BATCH:
            JobFairShare.objects.bulk_create(batch)
            batch = []
    JobFairShare.objects.bulk_create(batch)


def overhead_compute_daily(*, now: datetime | None = None) -> list[OverheadRun]:
    """Compute yesterday (each cluster's own day) for every cluster that has no done run of it.

    Idempotent: beat may call it every hour; a day is computed once.
    """
    now = now or timezone.now()
    overhead_runs_expire(now=now)
    runs = []
    for cluster in Cluster.objects.order_by("name"):
        today = now.astimezone(cluster.zoneinfo).date()
        end = datetime.combine(today, datetime.min.time(), tzinfo=cluster.zoneinfo)
        start = datetime.combine(
            today - timedelta(days=1), datetime.min.time(), tzinfo=cluster.zoneinfo
        )
        done = OverheadRun.objects.filter(
            cluster=cluster, window_start=start, window_end=end,
            status__in=[OverheadRun.Status.DONE, OverheadRun.Status.RUNNING],
        )  # fmt: skip
        if not done.exists():
            runs.append(overhead_run_compute(cluster=cluster, start=start, end=end, step="hour"))
    return runs


# --- Selectors -------------------------------------------------------------------------------


def overhead_runs_recent(*, cluster: Cluster | None = None, limit: int = 20) -> list[OverheadRun]:
    """The newest runs (any status), newest first."""
    runs: QuerySet[OverheadRun] = OverheadRun.objects.select_related("cluster", "started_by")
    if cluster is not None:
        runs = runs.filter(cluster=cluster)
    return list(runs.order_by("-started_at", "-pk")[:limit])


def overhead_run_get(*, pk: int) -> OverheadRun | None:
    return OverheadRun.objects.select_related("cluster").filter(pk=pk).first()


def overhead_run_latest(*, cluster: Cluster, start: datetime, end: datetime) -> OverheadRun | None:
    """The newest done run of the cluster whose window covers ``[start, end)``."""
    return (
        OverheadRun.objects.select_related("cluster")
        .filter(
            cluster=cluster,
            status=OverheadRun.Status.DONE,
            window_start__lte=start,
            window_end__gte=end,
        )
        .order_by("-finished_at", "-pk")
        .first()
    )


def overhead_results(*, run: OverheadRun) -> list[OverheadPartitionResult]:
    """The run's per-partition results, in partition name order."""
    return list(run.partitions.select_related("partition").order_by("partition__name"))


def fair_rates(
    result: OverheadPartitionResult,
) -> tuple[Fraction | None, Fraction | None, Fraction | None]:
    """Section 3.3 rates over the window (cores, memory, GPUs): billable over allocated."""

    def rate(billable: int, allocated: int) -> Fraction | None:
        return Fraction(billable, allocated) if allocated else None

    return (
        rate(result.billable_core_seconds, result.allocated_core_seconds),
        rate(result.billable_memory_mb_seconds, result.allocated_memory_mb_seconds),
        rate(result.billable_gpu_seconds, result.allocated_gpu_seconds),
    )


def unit_label(result: OverheadPartitionResult) -> str:
    """The canonical unit in words: "1 core + 2 GiB", "1 GPU"."""
    parts = []
    if result.unit_cores:
        parts.append(f"{result.unit_cores} core{'s' if result.unit_cores != 1 else ''}")
    if result.unit_memory_mb:
        memory = result.unit_memory_mb
        parts.append(f"{memory // 1024} GiB" if memory % 1024 == 0 else f"{memory} MiB")
    if result.unit_gpus:
        parts.append(f"{result.unit_gpus} GPU{'s' if result.unit_gpus != 1 else ''}")
    return " + ".join(parts)


@dataclass(frozen=True)
class ResourceFairShare:
    """One resource of a job: held and fair-billed amounts (hours) and their ratio."""

    name: str
    unit: str
    allocated: Decimal
    billed: Decimal
    factor: Fraction | None

    @property
    def percent(self) -> Decimal | None:
        if self.factor is None:
            return None
        return Decimal(self.factor.numerator * 100) / Decimal(self.factor.denominator)


@dataclass(frozen=True)
class JobFairShareView:
    """A job's section 3.3 fair share, summed over the runs it comes from."""

    runs: tuple[OverheadRun, ...]  # disjoint windows, in time order
    covers_job: bool  # False: the runs' windows hold only part of the job's run
    resources: tuple[ResourceFairShare, ...]


def _hours(resource_seconds: int, per: int = 1) -> Decimal:
    return Decimal(resource_seconds) / Decimal(3600 * per)


_SHARE_SUMS = (
    "allocated_core_seconds", "billed_core_seconds", "allocated_memory_mb_seconds",
    "billed_memory_mb_seconds", "allocated_gpu_seconds", "billed_gpu_seconds",
)  # fmt: skip


def _disjoint_newest_first(shares: list[JobFairShare]) -> list[JobFairShare]:
    """The newest shares whose runs' windows do not overlap, in time order (overlapping runs
    measured the same hours: counting both would bill them twice)."""
    picked: list[JobFairShare] = []
    for share in shares:
        run = share.run
        if all(
            run.window_end <= other.run.window_start or other.run.window_end <= run.window_start
            for other in picked
        ):
            picked.append(share)
    return sorted(picked, key=lambda share: share.run.window_start)


def job_fair_share_get(*, job: Job) -> JobFairShareView | None:
    """The job's fair share, or ``None`` when no done run holds it.

    The newest run whose window covers the job's whole run, if any; otherwise the shares of
    the newest runs with disjoint windows added up (the daily runs split a job that crosses
    midnight), and ``covers_job`` says whether together they hold all of it. A job still
    running is measured up to now.
    """
    if job.start is None:
        return None
    end = job.end or timezone.now()
    shares = list(
        JobFairShare.objects.filter(job=job, run__status=OverheadRun.Status.DONE)
        .select_related("run")
        .order_by("-run__finished_at", "-run__pk")
    )
    if not shares:
        return None
    covering = [
        share
        for share in shares
        if share.run.window_start <= job.start and share.run.window_end >= end
    ]
    chosen = covering[:1] or _disjoint_newest_first(shares)
    covered_until = job.start
    for share in chosen:
        if share.run.window_start > covered_until:
            break
        covered_until = max(covered_until, share.run.window_end)
    totals = {name: sum(getattr(share, name) for share in chosen) for name in _SHARE_SUMS}

    def resource(name: str, unit: str, kind: str, per: int = 1) -> ResourceFairShare:
        allocated, billed = totals[f"allocated_{kind}_seconds"], totals[f"billed_{kind}_seconds"]
        factor = Fraction(billed, allocated) if allocated else None
        return ResourceFairShare(name, unit, _hours(allocated, per), _hours(billed, per), factor)

    resources = [
        resource("cores", "core-hours", "core"),
        resource("memory", "GiB-hours", "memory_mb", per=1024),
    ]
    if totals["allocated_gpu_seconds"] or totals["billed_gpu_seconds"]:
        resources.append(resource("GPUs", "GPU-hours", "gpu"))
    return JobFairShareView(
        runs=tuple(share.run for share in chosen),
        covers_job=covered_until >= end,
        resources=tuple(resources),
    )


def overhead_window_problem(*, start: datetime, end: datetime, step: str) -> str | None:
    """Why a window cannot be computed, or ``None``: for forms and the API."""
    try:
        _check_window(start, end, step)
    except OverheadError as error:
        return str(error)
    return None
