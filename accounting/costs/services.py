"""Money cost estimates of ledger jobs (DESIGN section 6): the Django side of the cost models.

Reads finished jobs from the ledger -- streaming, only the columns the models need -- and hands
them to the pure modules: :mod:`accounting.costs.costmodels` prices one job,
:mod:`accounting.costs.coststats` many.

Cost models are attached to clusters as :class:`~accounting.models.CostModelVersion` rows,
versioned like rates: a new version appends after the newest, never edits one. A finished job
is priced by the import under the version in force at its end (``Job.cost``), its day's
roll-up carries the sum (``UsageDaily.cost``), and a new version is applied to the jobs that
ended since it took effect by :func:`job_costs_recompute` (a Celery task).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any, Final, NamedTuple

from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import IntegerField, Q, Value
from django.utils import timezone

from accounting.clusters import charging
from accounting.clusters.selectors import NotFound
from accounting.costs.costmodels import (
    JSON_QUANTUM,
    CostModel,
    CostModelError,
    JobCost,
    NodelistError,
    NodeSet,
    Rate,
    cost_model_parse,
    expand_nodelist,
    job_cost,
    node_hour_cost_range,
    node_hour_costs,
    nodelist_node_set_counts,
    rate_cost,
)
from accounting.costs.coststats import (
    ColumnStatistics,
    Concentration,
    CostRow,
    CostTable,
    column_statistics,
    cost_concentration,
    cost_statistics,
    cost_table_build,
)
from accounting.locks import cluster_row_lock
from accounting.models import (
    Cluster,
    CostModelVersion,
    ImportRun,
    Job,
    PartitionVersion,
    ProjectUsageDaily,
    UsageDaily,
)
from accounting.quarantine import quarantine_retry_enqueue
from kit.access import is_staff, require
from kit.errors import ApplicationError
from kit.queue import task_enqueue

logger = logging.getLogger(__name__)

CHUNK_SIZE = 10_000
"""Rows per fetch from the server-side cursor: memory stays flat whatever the period."""


FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2999, 12, 31)  # periods the pickers accept


class JobNotFinished(ApplicationError):
    """The job is still running (its charge is pending): it has no final runtime yet."""


def cost_job_get(*, cluster: Cluster, job_id: str) -> Job:
    """A finished job of ``cluster`` by its JobIDRaw or JobID (``123``, ``123_4``, ``123+0``).

    A job that Slurm requeued has several runs; the current one is priced. Raises
    :class:`~accounting.clusters.selectors.NotFound` when there is no such job or the id names
    several jobs, and :class:`JobNotFinished` while it runs.
    """
    fields = (
        "cluster", "job_id_raw", "job_id", "run", "end", "charge_state", "elapsed_seconds",
        "nodelist", "consumed_energy_joules", *JobShape._fields,
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


class JobShape(NamedTuple):
    """What a job held, as the ledger keeps it (sacct's AllocTRES, its node count and the rate
    version it was charged under): enough to derive its share of each node."""

    partition_version_id: int | None
    nnodes: int
    cpus: int
    memory_mb: Decimal
    gpus: int

    @classmethod
    def of(cls, job: Job) -> JobShape:
        return cls(job.partition_version_id, job.nnodes, job.cpus, job.memory_mb, job.gpus)


_SHARE_LIMIT: Final = 100_000


class NodeShares:
    """Jobs' shares of each of their nodes, eq 1's max fraction, derived from their shapes by
    the charging engine (:func:`accounting.clusters.charging.node_share_even`): what a shared
    cost model charges time rates for. Shapes repeat, so each is measured once, and each rate
    version is read once.

    None for a job whose share cannot be derived (no rate version, a shape the engine refuses:
    the import quarantines those): it is priced as holding its nodes whole.
    """

    def __init__(self) -> None:
        self._specs: dict[int, charging.PartitionSpec] = {}
        self._shares: dict[tuple[int | None, int, int, Decimal, int], Fraction | None] = {}

    def of(self, shape: tuple[int | None, int, int, Decimal, int]) -> Fraction | None:
        """The share of a job of this shape (a :class:`JobShape` or a plain tuple of its
        fields, as a ledger row gives them: equal tuples hash equal)."""
        try:
            return self._shares[shape]
        except KeyError:
            pass
        shape = JobShape(*shape)
        share = None
        if shape.partition_version_id is not None and shape.nnodes:
            spec = self._spec(shape.partition_version_id)
            try:
                share = charging.node_share_even(
                    spec, nodes=shape.nnodes, cores=shape.cpus, memory_mb=shape.memory_mb,
                    gpus=shape.gpus,
                )  # fmt: skip
            except (charging.ChargeError, charging.SpecError):
                share = None
        if len(self._shares) >= _SHARE_LIMIT:
            self._shares.clear()
        self._shares[shape] = share
        return share

    def remember(self, version: PartitionVersion) -> None:
        """Use this already loaded rate version instead of reading it again."""
        self._specs[version.pk] = version.spec

    def _spec(self, version_id: int) -> charging.PartitionSpec:
        spec = self._specs.get(version_id)
        if spec is None:
            version = PartitionVersion.objects.select_related("partition").get(pk=version_id)
            spec = self._specs[version_id] = version.spec
        return spec


def job_node_share(*, model: CostModel, job: Job) -> Fraction | None:
    """The share of each node a ledger job pays under ``model``'s rule: None (whole nodes)
    under an exclusive model, else eq 1's max fraction of its shape (:class:`NodeShares`)."""
    if model.nodes_are == "exclusive":
        return None
    shares = NodeShares()
    if Job.partition_version.is_cached(job) and job.partition_version is not None:
        shares.remember(job.partition_version)  # the job page loaded it: no query
    return shares.of(JobShape.of(job))


def job_cost_get(*, model: CostModel, job: Job) -> JobCost:
    """The cost estimate of one ledger job (its node list, elapsed time and recorded energy,
    and under a shared model its share of each node)."""
    nodes = expand_nodelist(job.nodelist) if job.nodelist else []
    return job_cost(
        model,
        nodes=nodes,
        runtime_seconds=job.elapsed_seconds,
        energy_joules=job.consumed_energy_joules,
        node_share=job_node_share(model=model, job=job),
    )


def cost_job_records(
    *,
    cluster: Cluster,
    start: datetime | None = None,
    end: datetime | None = None,
    ordered: bool = False,
    with_shares: bool = False,
) -> Iterator[tuple[str, str, int, int | None, Fraction | None]]:
    """Finished jobs of ``cluster`` that ended in [start, end) and ran on nodes, streamed as
    ``(job_id, nodelist, elapsed_seconds, consumed_energy_joules, node_share)`` (a
    :class:`~accounting.costs.coststats.JobRecord`'s fields). ``node_share`` is None unless
    ``with_shares`` asks for it (a shared cost model): then it is each job's share of each of
    its nodes, derived from its shape (:class:`NodeShares`).

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
    columns = ("job_id", "nodelist", "elapsed_seconds", "consumed_energy_joules")
    if not with_shares:
        # No share: a NULL column, so the rows stream as tuples without a Python step.
        rows = jobs.annotate(no_share=Value(None, output_field=IntegerField()))
        return rows.values_list(*columns, "no_share").iterator(chunk_size=CHUNK_SIZE)
    share_of = NodeShares().of
    shaped = jobs.values_list(*columns, *JobShape._fields).iterator(chunk_size=CHUNK_SIZE)
    return ((row[0], row[1], row[2], row[3], share_of(row[4:])) for row in shaped)


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
    records = cost_job_records(
        cluster=cluster, start=start, end=end, ordered=on_row is not None,
        with_shares=model.nodes_are == "shared",
    )  # fmt: skip
    return cost_table_build(model, records, max_runtime_seconds=max_runtime_seconds, on_row=on_row)


# --- Cost model versions ------------------------------------------------------------------------

BEGINNING: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The start of a cluster's first cost model when no date is given: every job it has run."""

COST_QUANTUM: Final = JSON_QUANTUM
"""A job's stored cost keeps 6 places (rounded half up), like the ledger's SU."""

_PARSED_LIMIT: Final = 64


# Job.cost and UsageDaily.cost are numeric(24, 6): 18 digits before the point.
COST_LIMIT: Final = Decimal(10) ** 18


class CostOutOfRange(ApplicationError):
    """A job's money cost does not fit the ledger (a model with absurd rates)."""


class CostModelRejected(ApplicationError):
    """A cost model version that cannot be saved; ``line_number`` is set for a parse error."""

    def __init__(self, message: str, *, line_number: int | None = None) -> None:
        self.message = message
        self.line_number = line_number
        super().__init__(f"line {line_number}: {message}" if line_number else message)


# Versions are never edited, so a parsed model is keyed by the version's id for the process.
_parsed: dict[int, CostModel] = {}


def cost_model_of(version: CostModelVersion) -> CostModel:
    """The parsed model of a saved version, parsed once per process."""
    model = _parsed.get(version.pk)
    if model is None:
        model = cost_model_parse(version.text, source=f"{version.cluster_id}:v{version.number}")
        if len(_parsed) >= _PARSED_LIMIT:
            _parsed.clear()
        _parsed[version.pk] = model
    return model


def cost_model_check(
    *, cluster: Cluster, text: str, effective_from: datetime | None = None
) -> CostModel:
    """Parse ``text`` and check it may become the cluster's next version (without saving).

    Raises :class:`CostModelRejected`: a parse error (with its line number), a currency other
    than the one of the cluster's earlier versions (costs of one cluster add up only in one
    currency), or a start not after the newest version's (versions only append, as rates do).
    """
    try:
        model = cost_model_parse(text, source="model")
    except CostModelError as error:
        raise CostModelRejected(error.message, line_number=error.line_number) from None
    latest = cost_model_versions(cluster=cluster)[:1]
    if latest:
        newest = latest[0]
        if model.currency != newest.currency:
            raise CostModelRejected(
                f"the model's currency is {model.currency!r} but the earlier versions of "
                f"{cluster.name} are in {newest.currency!r}: a cluster's costs stay in one "
                "currency (convert the rates, or set 'currency "
                f"{newest.currency}')"
            )
        if effective_from is not None and effective_from <= newest.effective_from:
            raise CostModelRejected(
                f"a new version must start after version {newest.number} "
                f"({newest.effective_from.isoformat()}), not at {effective_from.isoformat()}"
            )
    return model


@transaction.atomic
def cost_model_version_create(
    *,
    cluster: Cluster,
    name: str,
    text: str,
    effective_from: datetime | None = None,
    created_by: User | None = None,
    change_note: str = "",
) -> CostModelVersion:
    """Attach a cost model to ``cluster`` from ``effective_from`` on, as its next version.

    The rules of :func:`cost_model_check`. Without a date the first version covers the
    cluster's whole past and a later one starts now. After the commit, the jobs that ended
    since the version took effect are priced again (:func:`job_costs_recompute`, a task).
    """
    # Lock the cluster row: two versions saved at once must not both take the same number, and
    # import batches pricing with the versions before this one commit first (docs/costs.md).
    cluster_row_lock(cluster, exclusive=True)
    latest = cost_model_versions(cluster=cluster)[:1]
    when = effective_from or (BEGINNING if not latest else datetime.now(UTC).replace(microsecond=0))
    model = cost_model_check(cluster=cluster, text=text, effective_from=when)
    version = CostModelVersion.objects.create(
        cluster=cluster,
        number=(latest[0].number + 1) if latest else 1,
        name=name.strip()[:100] or f"v{(latest[0].number + 1) if latest else 1}",
        effective_from=when,
        text=text,
        currency=model.currency,
        created_by=created_by if created_by is not None and created_by.pk else None,
        change_note=change_note,
    )
    _parsed[version.pk] = model
    job_costs_reprice_enqueue(version=version)
    # Lines quarantined because a cost did not fit the ledger may fit under this version.
    quarantine_retry_enqueue(cluster=cluster)
    return version


def job_costs_reprice_enqueue(*, version: CostModelVersion) -> None:
    """Hand the pricing again of the jobs since ``version`` took effect to a worker, after the
    commit. When the task queue does not take it, the version says why (the cost models page
    shows it and offers to ask again): the version stays, its earlier jobs keep their costs."""
    CostModelVersion.objects.filter(pk=version.pk).exclude(reprice_error="").update(
        reprice_error=""
    )

    def unsent(error: Exception) -> None:
        CostModelVersion.objects.filter(pk=version.pk).update(
            reprice_error=(
                "the jobs that ended since it took effect were not priced again: the work"
                f" could not be handed to a worker ({error})"
            )
        )

    task_enqueue(name="accounting.tasks.cost_recompute", args=(version.pk,), on_unsent=unsent)


@transaction.atomic
def job_costs_reprice_request(*, version: CostModelVersion, actor: User) -> None:
    """Staff ask again for the jobs since ``version`` to be priced with it."""
    require(is_staff(actor), "only centre staff price jobs again")
    job_costs_reprice_enqueue(version=version)


def cost_model_versions(*, cluster: Cluster) -> list[CostModelVersion]:
    """The cluster's cost model versions, newest first."""
    return list(CostModelVersion.objects.filter(cluster=cluster).order_by("-effective_from"))


def cost_model_version_at(*, cluster: Cluster, at: datetime) -> CostModelVersion | None:
    """The version in force at ``at`` (the newest that took effect by then), or None."""
    return (
        CostModelVersion.objects.filter(cluster=cluster, effective_from__lte=at)
        .order_by("-effective_from")
        .first()
    )


def cost_model_at(*, cluster: Cluster, at: datetime) -> tuple[CostModelVersion, CostModel] | None:
    """The version in force at ``at`` with its parsed model, or None."""
    version = cost_model_version_at(cluster=cluster, at=at)
    return (version, cost_model_of(version)) if version is not None else None


@dataclass(frozen=True)
class NodeSetSummary:
    """A node set of a model as the cost model page lists it."""

    name: str
    node_count: int
    hostlists: str
    rates: tuple[Rate, ...]
    node_hour_cost: Decimal


@dataclass(frozen=True)
class CostModelSummary:
    currency: str
    node_sets: tuple[NodeSetSummary, ...]
    node_hour_min: Decimal
    node_hour_max: Decimal
    has_energy_rates: bool
    nodes_are: str


def cost_model_summary(model: CostModel) -> CostModelSummary:
    """Node sets, their rates and the cost of a node-hour (Table 3.1's unit) of a model."""
    per_set = node_hour_costs(model)
    low, high = node_hour_cost_range(model)

    def summary(node_set: NodeSet) -> NodeSetSummary:
        return NodeSetSummary(
            name=node_set.name,
            node_count=node_set.node_count,
            hostlists=" ".join(node_set.hostlists),
            rates=node_set.rates,
            node_hour_cost=per_set[node_set.name],
        )

    return CostModelSummary(
        currency=model.currency,
        node_sets=tuple(summary(node_set) for node_set in model.node_sets),
        node_hour_min=low,
        node_hour_max=high,
        has_energy_rates=model.has_energy_rates,
        nodes_are=model.nodes_are,
    )


# --- Pricing jobs in bulk (the import and the recomputation) ------------------------------------

_SIGNATURE_LIMIT: Final = 100_000

# Per node list: for each node set holding some of the job's nodes, (its rates, nodes in it),
# and the job's node count. None: a node list that is not a Slurm hostlist.
_Signature = tuple[tuple[tuple[tuple[Rate, ...], int], ...], int] | None


class JobPricer:
    """Prices finished jobs of one cluster under the version in force at each job's end.

    Node lists repeat (every single-node job on the same node), so each is expanded and
    matched with the node sets once per version (:attr:`CostModel.membership`). The total is
    computed like :func:`accounting.costs.costmodels.job_cost`'s, rate by rate in file order, and
    stored to 6 places.
    """

    def __init__(self, versions: Sequence[tuple[int, datetime, CostModel]]) -> None:
        self.versions = sorted(versions, key=lambda item: item[1], reverse=True)
        self._signatures: dict[int, dict[str, _Signature]] = {pk: {} for pk, _, _ in versions}
        self._shares = NodeShares()

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> JobPricer | None:
        """The pricer of the cluster's versions as they are now; None without a cost model."""
        versions = list(
            CostModelVersion.objects.filter(cluster=cluster).only("pk", "effective_from")
        )
        if not versions:
            return None
        models = {pk: _parsed[pk] for pk in (v.pk for v in versions) if pk in _parsed}
        missing = [version.pk for version in versions if version.pk not in models]
        # Keep what is loaded here: the bounded cache may be emptied while loading.
        for version in CostModelVersion.objects.filter(pk__in=missing):
            models[version.pk] = cost_model_of(version)
        return cls([(v.pk, v.effective_from, models[v.pk]) for v in versions])

    @classmethod
    def refreshed(cls, pricer: JobPricer | None, *, cluster: Cluster) -> JobPricer | None:
        """``pricer`` if the cluster's versions are still the ones it prices with, else a new
        one (None without a model): one small query, models and node lists stay cached."""
        versions = list(
            CostModelVersion.objects.filter(cluster=cluster).values_list("pk", "effective_from")
        )
        if not versions:
            return None
        if pricer is not None and pricer.same_versions(versions):
            return pricer
        return cls.for_cluster(cluster)

    def same_versions(self, versions: Sequence[tuple[int, datetime]]) -> bool:
        return sorted(versions) == sorted((pk, start) for pk, start, _ in self.versions)

    def version_at(self, end: datetime) -> tuple[int, CostModel] | None:
        for pk, start, model in self.versions:
            if start <= end:
                return pk, model
        return None

    def _signature(self, pk: int, model: CostModel, nodelist: str) -> _Signature:
        signatures = self._signatures[pk]
        signature = signatures.get(nodelist, False)
        if signature is not False:
            return signature  # type: ignore[return-value]
        try:
            size, counts, _ = nodelist_node_set_counts(model, nodelist)
        except NodelistError:
            signature = None
        else:
            signature = (
                tuple(
                    (node_set.rates, count)
                    for node_set, count in zip(model.node_sets, counts, strict=True)
                    if count
                ),
                size,
            )
        if len(signatures) >= _SIGNATURE_LIMIT:
            signatures.clear()
        signatures[nodelist] = signature
        return signature

    def price(
        self,
        *,
        end: datetime,
        nodelist: str,
        elapsed_seconds: int,
        energy_joules: int | None,
        shape: JobShape | None = None,
    ) -> tuple[Decimal, int] | None:
        """(cost to 6 places, version id) of a finished job; None when no version was in force
        at its end or its node list cannot be read. Under a shared model the job's ``shape``
        gives its share of each node (:class:`NodeShares`; without one, whole nodes)."""
        found = self.version_at(end)
        if found is None or not nodelist:
            return None
        pk, model = found
        signature = self._signature(pk, model, nodelist)
        if signature is None:
            return None
        sets, node_count = signature
        share = model.charged_share(
            self._shares.of(shape) if shape is not None and model.nodes_are == "shared" else None
        )
        energy = energy_joules or None  # 0 J: Slurm had no energy plugin, not free energy
        total = Decimal(0)
        for rates, count in sets:
            set_total = Decimal(0)
            for rate in rates:
                cost = rate_cost(
                    rate,
                    nodes_in_set=count,
                    node_count=node_count,
                    runtime_seconds=elapsed_seconds,
                    energy_joules=energy,
                    node_share=share,
                )
                if cost is not None:
                    set_total += cost
            total += set_total
        if total >= COST_LIMIT:  # checked before rounding, which fails past 28 digits
            raise CostOutOfRange(
                f"a money cost of {total:.6E} is beyond what the ledger keeps (below 1E+18): "
                f"check the rates of cost model version id {pk}"
            )
        return total.quantize(COST_QUANTUM, rounding=ROUND_HALF_UP), pk


def stored_cost(cost: JobCost) -> Decimal:
    """A job cost as ``Job.cost`` keeps it."""
    return cost.total.quantize(COST_QUANTUM, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class RecomputeResult:
    jobs_read: int
    jobs_changed: int
    days_fixed: int


RECOMPUTE_BATCH: Final = 10_000


def job_costs_recompute(
    *, cluster: Cluster, since: datetime, batch_size: int = RECOMPUTE_BATCH
) -> RecomputeResult:
    """Price again the cluster's finished jobs that ended at or after ``since`` and set their
    days' ``UsageDaily.cost`` to the sum of their jobs' costs.

    Jobs are read in (end, id) order in batches. Each batch is one transaction holding the
    cluster's row lock (:func:`accounting.locks.cluster_row_lock`, exclusive; import batches
    hold it shared): it reads the cluster's versions and the batch's jobs, writes the jobs
    whose cost or version changed and sums the roll-ups of their days again from the jobs.
    So every commit leaves jobs and roll-ups agreeing, whatever imports run meanwhile, and a
    recomputation stopped half-way is simply run again. Idempotent: a second run changes
    nothing.
    """
    booked = (
        Job.objects.filter(cluster=cluster, end__isnull=False, end__gte=since)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .order_by("end", "id")
    )
    columns = (
        "id", "end", "nodelist", "elapsed_seconds", "consumed_energy_joules", "start", "cost",
        "cost_model_version_id", *JobShape._fields,
    )  # fmt: skip
    zone = cluster.zoneinfo
    pricer: JobPricer | None = None
    read = changed = days = 0
    last: tuple[datetime, int] | None = None
    while True:
        with transaction.atomic():
            cluster_row_lock(cluster, exclusive=True)
            pricer = JobPricer.refreshed(pricer, cluster=cluster)
            page = booked
            if last is not None:
                page = page.filter(Q(end__gt=last[0]) | Q(end=last[0], id__gt=last[1]))
            rows = list(page.values_list(*columns)[:batch_size])
            if not rows:
                break
            updates: list[tuple[int, Decimal | None, int | None]] = []
            for pk, end, nodelist, elapsed, energy, start, cost, version_id, *shape in rows:
                priced = None
                if pricer is not None and start is not None:
                    try:
                        priced = pricer.price(
                            end=end, nodelist=nodelist, elapsed_seconds=elapsed,
                            energy_joules=energy, shape=JobShape(*shape),
                        )  # fmt: skip
                    except CostOutOfRange as error:
                        logger.warning("job id %s left unpriced: %s", pk, error)
                new_cost, new_version = priced if priced is not None else (None, None)
                if new_cost != cost or new_version != version_id:
                    updates.append((pk, new_cost, new_version))
            if updates:
                _job_costs_write(updates)
                first_day = rows[0][1].astimezone(zone).date()
                stop_day = rows[-1][1].astimezone(zone).date() + timedelta(days=1)
                days += _usage_costs_fix(cluster=cluster, first_day=first_day, stop_day=stop_day)
        read += len(rows)
        changed += len(updates)
        last = (rows[-1][1], rows[-1][0])
    return RecomputeResult(jobs_read=read, jobs_changed=changed, days_fixed=days)


def _job_costs_write(updates: list[tuple[int, Decimal | None, int | None]]) -> None:
    if connection.vendor != "postgresql":
        for pk, cost, version_id in updates:
            Job.objects.filter(pk=pk).update(cost=cost, cost_model_version_id=version_id)
        return
    table = Job._meta.db_table
    sql = (
        f"UPDATE {table} AS j SET cost = v.cost, cost_model_version_id = v.version_id "  # noqa: S608
        "FROM unnest(%s::bigint[], %s::numeric[], %s::bigint[]) AS v(id, cost, version_id) "
        "WHERE j.id = v.id"
    )
    ids, costs, versions = zip(*updates, strict=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(ids), list(costs), list(versions)])


def _usage_costs_fix(*, cluster: Cluster, first_day: date, stop_day: date) -> int:
    """Set ``UsageDaily.cost`` of the cluster's roll-ups of [first_day, stop_day) to the sum of
    their booked jobs' costs (the same jobs and local days as the import's roll-ups)."""
    zone = cluster.zoneinfo
    start = datetime.combine(first_day, time.min, tzinfo=zone)
    stop = datetime.combine(stop_day, time.min, tzinfo=zone)
    usage, job = UsageDaily._meta.db_table, Job._meta.db_table
    end = connection.ops.quote_name("end")
    if connection.vendor == "postgresql":
        day = f"(j.{end} AT TIME ZONE %s)::date"
        sql = (
            f"UPDATE {usage} AS u SET cost = s.cost FROM ("  # noqa: S608
            f"  SELECT j.project_id, j.partition_id, j.username, {day} AS day, "
            "   COALESCE(SUM(j.cost), 0) AS cost "
            f"  FROM {job} j WHERE j.cluster_id = %s AND j.{end} >= %s AND j.{end} < %s "
            "   AND j.charge_state <> %s GROUP BY 1, 2, 3, 4) AS s "
            "WHERE u.project_id = s.project_id AND u.partition_id = s.partition_id "
            "AND u.username = s.username AND u.day = s.day AND u.cost <> s.cost"
        )
        params: list[Any] = [cluster.timezone, cluster.pk, start, stop, Job.ChargeState.PENDING]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            fixed = int(cursor.rowcount)
        _project_usage_costs_fix(cluster=cluster, first_day=first_day, stop_day=stop_day)
        return fixed
    # SQLite (the embedded demo): the same sums, per roll-up row.
    sums: dict[tuple[int, int, str, date], Decimal] = {}
    jobs = Job.objects.filter(cluster=cluster, end__gte=start, end__lt=stop).exclude(
        charge_state=Job.ChargeState.PENDING
    )
    for project_id, partition_id, username, ended, cost in jobs.values_list(
        "project_id", "partition_id", "username", "end", "cost"
    ):
        assert ended is not None  # filtered on end
        key = (project_id, partition_id, username, ended.astimezone(zone).date())
        sums[key] = sums.get(key, Decimal(0)) + (cost or Decimal(0))
    fixed = 0
    rows = UsageDaily.objects.filter(
        partition__cluster=cluster, day__gte=first_day, day__lt=stop_day
    ).values_list("pk", "project_id", "partition_id", "username", "day", "cost")
    for pk, project_id, partition_id, username, day_, cost in list(rows):
        wanted = sums.get((project_id, partition_id, username, day_))
        if wanted is not None and wanted != cost:
            UsageDaily.objects.filter(pk=pk).update(cost=wanted)
            fixed += 1
    _project_usage_costs_fix(cluster=cluster, first_day=first_day, stop_day=stop_day)
    return fixed


def _project_usage_costs_fix(*, cluster: Cluster, first_day: date, stop_day: date) -> None:
    """Set ``ProjectUsageDaily.cost`` of the cluster's days [first_day, stop_day) to the sum of
    their UsageDaily rows' (after a cost model re-costed those): the one other writer of the
    money the roll-ups hold (the import keeps the rest, accounting.ledger.rollups)."""
    table, usage = ProjectUsageDaily._meta.db_table, UsageDaily._meta.db_table
    partitions = list(cluster.partitions.values_list("pk", flat=True))
    if not partitions:
        return
    where = f"partition_id IN ({', '.join(['%s'] * len(partitions))}) AND day >= %s AND day < %s"
    if connection.vendor == "postgresql":
        sql = (
            f"UPDATE {table} AS t SET cost = s.cost FROM ("  # noqa: S608
            f"  SELECT project_id, day, partition_id, SUM(cost) AS cost FROM {usage} "
            f"  WHERE {where} GROUP BY 1, 2, 3) AS s "
            "WHERE t.project_id = s.project_id AND t.day = s.day "
            "AND t.partition_id = s.partition_id AND t.cost <> s.cost"
        )
    else:  # SQLite: the same sums, a correlated subquery per row
        sql = (
            f"UPDATE {table} SET cost = (SELECT COALESCE(SUM(u.cost), 0) FROM {usage} u "  # noqa: S608
            f"WHERE u.project_id = {table}.project_id AND u.day = {table}.day "
            f"AND u.partition_id = {table}.partition_id) WHERE {where}"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*partitions, first_day, stop_day])


# --- The cost distribution (ch. 6, Figures 6.1-6.5) ---------------------------------------------

QUANTILE_INCREMENT: Final = Decimal(1)
CONCENTRATION_PERCENTS: Final = (
    Decimal("0.1"), Decimal("0.2"), Decimal("0.5"),
    *(Decimal(percent) for percent in range(1, 101)),
)  # fmt: skip
DISTRIBUTION_CACHE_SECONDS: Final = 6 * 3600


@dataclass(frozen=True)
class DistributionColumn:
    key: str  # size, runtime, cost
    label: str
    unit: str
    statistics: ColumnStatistics


@dataclass(frozen=True)
class CostDistribution:
    """The distribution of job size, runtime and cost over a cluster's jobs of a period."""

    cluster: str
    start: date
    end: date  # exclusive
    version: CostModelVersion
    currency: str
    job_count: int
    source: str  # "stored" (Job.cost) or "recomputed" (priced with the version now)
    columns: tuple[DistributionColumn, ...]
    concentration: tuple[Concentration, ...]

    def column(self, key: str) -> DistributionColumn:
        return next(column for column in self.columns if column.key == key)

    def top_share(self, percent: Decimal) -> Decimal | None:
        for point in self.concentration:
            if point.top_percent == percent:
                return point.share_percent
        return None


def _period_bounds(cluster: Cluster, start: date, end: date) -> tuple[datetime, datetime]:
    zone = cluster.zoneinfo
    return (
        datetime.combine(start, time.min, tzinfo=zone),
        datetime.combine(end, time.min, tzinfo=zone),
    )


DISTRIBUTION_DEFAULT_DAYS: Final = 90


class DistributionUnavailable(ApplicationError):
    """No distribution for what was asked; ``field`` names the input at fault."""

    field: str

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def cost_distribution_request(
    *, cluster: Cluster, version_number: int | None, start: date | None, end: date | None
) -> tuple[CostModelVersion, date, date]:
    """What a request for a distribution means: the version (the newest unless a number is
    given) and the period, [start, end) in the cluster's days (by default the last 90 days up
    to today, or 90 days from or up to the one day given)."""
    versions = cost_model_versions(cluster=cluster)
    if not versions:
        raise DistributionUnavailable(f"{cluster.name} has no cost model", field="cluster")
    if version_number is None:
        version = versions[0]
    else:
        found = [v for v in versions if v.number == version_number]
        if not found:
            raise DistributionUnavailable(
                f"{cluster.name} has no cost model version {version_number}", field="model_version"
            )
        version = found[0]
    today = timezone.localtime(timezone.now(), cluster.zoneinfo).date()
    period = timedelta(days=DISTRIBUTION_DEFAULT_DAYS)
    end = end or (start + period if start else today + timedelta(days=1))
    start = start or end - period
    return version, start, end


def cost_distribution_get(
    *, cluster: Cluster, version: CostModelVersion, start: date, end: date
) -> CostDistribution:
    """Quantiles (every 1 %) of job size, runtime and cost, and the cumulative cost share of
    the most expensive jobs, over the cluster's finished jobs that ended in [start, end) (the
    cluster's local days), priced with ``version``.

    The stored costs are used when every such job was priced with ``version``; otherwise the
    jobs are priced again with it (seconds for a million jobs). Cached until the next import
    of the cluster.
    """
    latest_run = (
        ImportRun.objects.filter(cluster=cluster).order_by("-pk").values_list("pk", flat=True)
    ).first()
    key = f"cost-distribution:{cluster.pk}:{version.pk}:{start}:{end}:{latest_run or 0}"
    found = cache.get(key)
    if isinstance(found, CostDistribution):
        return found
    result = _cost_distribution_compute(cluster=cluster, version=version, start=start, end=end)
    cache.set(key, result, DISTRIBUTION_CACHE_SECONDS)
    return result


def _cost_distribution_compute(
    *, cluster: Cluster, version: CostModelVersion, start: date, end: date
) -> CostDistribution:
    since, until = _period_bounds(cluster, start, end)
    jobs = (
        Job.objects.filter(cluster=cluster, end__gte=since, end__lt=until)
        .exclude(charge_state=Job.ChargeState.PENDING)
        .exclude(nodelist="")
        .order_by()
    )
    other = jobs.exclude(cost_model_version=version).exists() or jobs.filter(cost=None).exists()
    increment = QUANTILE_INCREMENT
    if not other:
        sizes: list[int | Decimal | None] = []
        runtimes: list[int | Decimal | None] = []
        costs: list[Decimal] = []
        for nnodes, elapsed, cost in jobs.values_list("nnodes", "elapsed_seconds", "cost").iterator(
            chunk_size=CHUNK_SIZE
        ):
            sizes.append(nnodes)
            runtimes.append(elapsed)
            costs.append(cost if cost is not None else Decimal(0))
        size_stats = column_statistics(sizes, increment=increment)
        runtime_stats = column_statistics(runtimes, increment=increment, scale=Fraction(1, 3600))
        cost_stats = column_statistics(list(costs), increment=increment)
        concentration = cost_concentration(costs, top_percents=CONCENTRATION_PERCENTS)
        count, source = len(costs), "stored"
    else:
        model = cost_model_of(version)
        table = cost_table_get(model=model, cluster=cluster, start=since, end=until)
        stats = cost_statistics(table, increment=increment, top_percents=CONCENTRATION_PERCENTS)
        by_key = {
            column.key: column_stats
            for column, column_stats in zip(stats.columns, stats.statistics, strict=True)
        }
        size_stats, runtime_stats = by_key["size"], by_key["runtime"]
        cost_stats, concentration = by_key["total"], stats.concentration
        count, source = stats.job_count, "recomputed"
    return CostDistribution(
        cluster=cluster.name,
        start=start,
        end=end,
        version=version,
        currency=version.currency,
        job_count=count,
        source=source,
        columns=(
            DistributionColumn("size", "Job size", "nodes", size_stats),
            DistributionColumn("runtime", "Runtime", "h", runtime_stats),
            DistributionColumn("cost", "Cost", version.currency, cost_stats),
        ),
        concentration=concentration,
    )
