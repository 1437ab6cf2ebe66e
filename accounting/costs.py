"""Money cost estimates of ledger jobs (DESIGN section 6): the Django side of the cost models.

Reads finished jobs from the ledger -- streaming, only the columns the models need -- and hands
them to the pure modules: :mod:`accounting.costmodels` prices one job,
:mod:`accounting.coststats` many.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from decimal import Decimal

from django.db.models import Q

from accounting.costmodels import CostModel, JobCost, expand_nodelist, job_cost
from accounting.coststats import CostRow, CostTable, cost_table_build
from accounting.models import Cluster, Job
from accounting.selectors import NotFound

CHUNK_SIZE = 10_000
"""Rows per fetch from the server-side cursor: memory stays flat whatever the period."""


class JobNotFinished(ValueError):
    """The job is still running (its charge is pending): it has no final runtime yet."""


def cost_job_get(*, cluster: Cluster, job_id: str) -> Job:
    """A finished job of ``cluster`` by its JobIDRaw or JobID (``123``, ``123_4``, ``123+0``).

    A job that Slurm requeued has several runs; the current one is priced. Raises
    :class:`~accounting.selectors.NotFound` when there is no such job or the id names several
    jobs, and :class:`JobNotFinished` while it runs.
    """
    fields = (
        "cluster", "job_id_raw", "job_id", "run", "end", "charge_state", "elapsed_seconds",
        "nodelist", "consumed_energy_joules",
    )  # fmt: skip
    runs = list(
        Job.objects.filter(cluster=cluster)
        .filter(Q(job_id_raw=job_id) | Q(job_id=job_id))
        .only(*fields)
        .order_by("job_id_raw", "run")
    )
    if not runs:
        raise NotFound(f"no job {job_id!r} on cluster {cluster.name!r}")
    raw_ids = sorted({run.job_id_raw for run in runs})
    if len(raw_ids) > 1:
        raise NotFound(
            f"job id {job_id!r} names several jobs on cluster {cluster.name!r} "
            f"(JobIDRaw {', '.join(raw_ids)}): give the JobIDRaw"
        )
    # The current incarnation has an empty run; earlier ones are keyed by their start time.
    job = runs[0] if runs[0].run == "" else max(runs, key=lambda run: run.run)
    if job.end is None or job.charge_state == Job.ChargeState.PENDING:
        raise JobNotFinished(f"job {job.job_id} on cluster {cluster.name!r} has not finished yet")
    return job


def job_cost_get(*, model: CostModel, job: Job) -> JobCost:
    """The cost estimate of one ledger job (its node list, elapsed time and recorded energy)."""
    nodes = expand_nodelist(job.nodelist) if job.nodelist else []
    return job_cost(
        model,
        nodes=nodes,
        runtime_seconds=job.elapsed_seconds,
        energy_joules=job.consumed_energy_joules,
    )


def cost_job_records(
    *,
    cluster: Cluster,
    start: datetime | None = None,
    end: datetime | None = None,
    ordered: bool = False,
) -> Iterator[tuple[str, str, int, int | None]]:
    """Finished jobs of ``cluster`` that ended in [start, end) and ran on nodes, streamed as
    ``(job_id, nodelist, elapsed_seconds, consumed_energy_joules)`` (a
    :class:`~accounting.coststats.JobRecord`'s fields).

    Selecting on the end time counts each job in exactly one period; the report's selection of
    jobs active in the window over-represents long jobs (ch. 6). Refunded jobs are included:
    they cost the centre all the same. ``ordered`` sorts by end time (for a details table);
    statistics do not need it. Tuples, not model instances: a million rows stream in seconds.
    """
    jobs = (
        Job.objects.filter(cluster=cluster, end__isnull=False)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .exclude(nodelist="")
    )
    if start is not None:
        jobs = jobs.filter(end__gte=start)
    if end is not None:
        jobs = jobs.filter(end__lt=end)
    jobs = jobs.order_by("end", "id") if ordered else jobs.order_by()
    rows = jobs.values_list("job_id", "nodelist", "elapsed_seconds", "consumed_energy_joules")
    return rows.iterator(chunk_size=CHUNK_SIZE)


def cost_table_get(
    *,
    model: CostModel,
    cluster: Cluster,
    start: datetime | None = None,
    end: datetime | None = None,
    max_runtime_seconds: Decimal | int | None = None,
    on_row: Callable[[CostRow], None] | None = None,
) -> CostTable:
    """Price the finished jobs of a cluster and period with ``model`` (``coststats``).

    ``on_row`` receives each job's costs in end-time order as they stream in (``--details``).
    """
    records = cost_job_records(cluster=cluster, start=start, end=end, ordered=on_row is not None)
    return cost_table_build(model, records, max_runtime_seconds=max_runtime_seconds, on_row=on_row)
