"""The applicant's record: what a committee reads beside a request. One selector,
``applicant_record``, builds it from the roll-ups (``UsageDaily``, the efficiency roll-ups), the
grants' budget periods, the re-pricing of the last year's jobs (``accounting.ledger.repricing``),
the request's own amounts and estimate, and the project's research outputs.

Who may read it is ``allocations.access.can_read_record``'s rule; this module only reads.

The request's day is the day it was started (``created_at``, the portal's local day). The
quarters are the four calendar quarters before the quarter of that day, less the leading ones
in which the project had neither a grant nor any use (it had not begun). The last year is the
twelve months before that day.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from accounting.ledger.efficiency_selectors import (
    EfficiencyFilters,
    EfficiencyTotals,
    efficiency_by_month,
    totals_added,
)
from accounting.ledger.repricing import Repricing, reprice_project
from accounting.models import UsageDaily
from allocations.access import deciding_round
from allocations.models import (
    Adjustment,
    Allocation,
    AllocationRequest,
    BudgetPeriod,
    ProgressReport,
    RequestEstimate,
    ResearchOutput,
)
from allocations.outputs.selectors import outputs_since
from kit.calendar import add_months
from projects.models import Project, ResourcePool

ZERO = Decimal(0)
QUARTERS = 4
SU_QUANTUM = Decimal("0.000001")
RATIO_QUANTUM = Decimal("0.01")


@dataclass(frozen=True)
class Quarter:
    start: date
    end: date  # exclusive

    @property
    def label(self) -> str:
        return f"{self.start.year} Q{(self.start.month - 1) // 3 + 1}"


@dataclass(frozen=True)
class PoolQuarter:
    """SU granted and used on one pool in one quarter."""

    granted_su: Decimal
    used_su: Decimal

    @property
    def share_used(self) -> Decimal | None:
        """The share of the quarter's grant used (1 = all of it); None without a grant."""
        if self.granted_su <= 0:
            return None
        return (self.used_su / self.granted_su).quantize(RATIO_QUANTUM)


@dataclass(frozen=True)
class PoolHistory:
    pool_id: int
    pool_name: str
    quarters: tuple[PoolQuarter, ...]  # in the order of ``ApplicantRecord.quarters``


@dataclass(frozen=True)
class EfficiencyQuarter:
    quarter: Quarter
    totals: EfficiencyTotals


@dataclass(frozen=True)
class Ask:
    """What the request asks for on a pool (or in total: ``pool_name`` "total") against the
    SU the project was charged there in the last year."""

    pool_name: str
    requested_su: Decimal
    used_last_year_su: Decimal

    @property
    def times_last_year(self) -> Decimal | None:
        """requested / last year's use (tenths; hundredths below 1); None when the project used
        nothing."""
        if self.used_last_year_su <= 0:
            return None
        ratio = self.requested_su / self.used_last_year_su
        # Tenths, and hundredths below 1 (a small ask of a big user is not "0.0 x").
        return ratio.quantize(Decimal("0.1") if ratio >= 1 else Decimal("0.01"))

    @property
    def in_words(self) -> str:
        ratio = self.times_last_year
        if ratio is None:
            return "no use in the last year"
        return f"asks for {ratio} \N{MULTIPLICATION SIGN} last year's use"


@dataclass(frozen=True)
class ProjectSummary:
    """What the committee may know of the project: no members, jobs or Slurm details."""

    code: str
    title: str
    pi: str
    field_of_science: str


@dataclass(frozen=True)
class ApplicantRecord:
    request: AllocationRequest
    project: ProjectSummary
    day: date  # the request's day: the quarters and the last year end before it
    quarters: tuple[Quarter, ...]
    pools: tuple[PoolHistory, ...]
    efficiency: tuple[EfficiencyQuarter, ...]
    last_year_start: date
    repricing: Repricing
    asks: tuple[Ask, ...]  # per pool asked on
    ask_total: Ask
    estimates: tuple[RequestEstimate, ...]
    estimate_total_su: Decimal | None  # None without an estimate
    outputs_since: date | None  # the start of the latest grant before the request
    outputs: tuple[ResearchOutput, ...]
    progress_report: ProgressReport | None

    @property
    def repriced_change(self) -> Decimal | None:
        """repriced / charged of the last year (1.1: a tenth dearer at the round's rates)."""
        charged = self.repricing.charged_su
        if charged <= 0:
            return None
        return (self.repricing.repriced_su / charged).quantize(RATIO_QUANTUM)


def _quarter_of(day: date) -> date:
    return date(day.year, (day.month - 1) // 3 * 3 + 1, 1)


def _quarters_before(day: date) -> list[Quarter]:
    """The ``QUARTERS`` whole calendar quarters before the quarter of ``day``, oldest first."""
    first = add_months(_quarter_of(day), -3 * QUARTERS)
    return [
        Quarter(add_months(first, 3 * index), add_months(first, 3 * (index + 1)))
        for index in range(QUARTERS)
    ]


def _rates_day(request: AllocationRequest, day: date) -> date:
    """The day whose rates the round's grants will use: the period start of the request's
    deciding round (its own round for an application or a renewal); today without one."""
    round_ = deciding_round(request)
    return round_.period_start if round_ is not None else day


def _overlap_days(start: date, end: date, quarter: Quarter) -> int:
    return max((min(end, quarter.end) - max(start, quarter.start)).days, 0)


def _granted(project: Project, quarters: list[Quarter]) -> dict[tuple[int, int], Decimal]:
    """SU granted per (pool, quarter index): each budget period's budget and top-ups, spread
    over its days, the share of its days in the quarter (a quarterly budget period of a grant
    that starts on a quarter's first day falls in that quarter whole)."""
    start, end = quarters[0].start, quarters[-1].end
    periods = BudgetPeriod.objects.filter(
        allocation__project=project, start__lt=end, end__gt=start
    ).values("pk", "start", "end", "budget_su", "allocation__pool_id")
    top_ups = dict(
        Adjustment.objects.filter(
            budget_period__in=[period["pk"] for period in periods], kind=Adjustment.Kind.TOP_UP
        )
        .values("budget_period_id")
        .annotate(total=Sum("amount_su"))
        .values_list("budget_period_id", "total")
        .order_by()
    )
    granted: dict[tuple[int, int], Decimal] = defaultdict(lambda: ZERO)
    for period in periods:
        total = period["budget_su"] + top_ups.get(period["pk"], ZERO)
        days = (period["end"] - period["start"]).days
        for index, quarter in enumerate(quarters):
            inside = _overlap_days(period["start"], period["end"], quarter)
            if inside:
                share = (total * inside / days).quantize(SU_QUANTUM)
                granted[period["allocation__pool_id"], index] += share
    return granted


def _pool_of_partitions(pools: list[ResourcePool]) -> dict[int, list[int]]:
    partitions: dict[int, list[int]] = defaultdict(list)
    for pool in pools:
        for partition in pool.partitions.all():
            partitions[partition.pk].append(pool.pk)
    return partitions


def _used(
    project: Project, start: date, end: date, partitions: dict[int, list[int]]
) -> dict[int, Decimal]:
    """SU charged per pool in [start, end) (``UsageDaily``'s local days)."""
    used: dict[int, Decimal] = defaultdict(lambda: ZERO)
    rows = (
        UsageDaily.objects.filter(project=project, day__gte=start, day__lt=end)
        .values("partition_id")
        .annotate(total=Sum("service_units"))
        .order_by()
    )
    for row in rows:
        for pool_id in partitions.get(row["partition_id"], []):
            used[pool_id] += row["total"]
    return used


def _pools(project: Project, request: AllocationRequest) -> list[ResourcePool]:
    """The pools the record shows: those the project has grants on or the request asks on,
    and those whose partitions its jobs ran in."""
    granted = Allocation.objects.filter(project=project).values("pool_id")
    asked = request.amounts.values("pool_id")
    ran = UsageDaily.objects.filter(project=project).values("partition_id")
    return list(
        ResourcePool.objects.filter(Q(pk__in=granted) | Q(pk__in=asked) | Q(partitions__in=ran))
        .distinct()
        .order_by("name")
        .prefetch_related("partitions")
    )


def _since_begun(
    quarters: list[Quarter], granted: dict[tuple[int, int], Decimal], used: list[dict[int, Decimal]]
) -> int:
    """The index of the first quarter with a grant or any use (the project had begun)."""
    for index in range(len(quarters)):
        if any(value for (_, at), value in granted.items() if at == index) or any(
            used[index].values()
        ):
            return index
    return len(quarters)


def _latest_grant_start(request: AllocationRequest, day: date) -> date | None:
    """The start of the project's latest grant that began by the request's day (not one the
    request itself made)."""
    found = (
        Allocation.objects.filter(project=request.project, period_start__lte=day)
        .exclude(request=request)
        .order_by("-period_start")
        .values_list("period_start", flat=True)
        .first()
    )
    return found


def _progress_report(request: AllocationRequest) -> ProgressReport | None:
    try:
        return request.progress_report
    except ProgressReport.DoesNotExist:
        return None


def _outputs(project: Project, since: date | None) -> QuerySet[ResearchOutput]:
    moment = (
        datetime.combine(since, time.min, tzinfo=timezone.get_current_timezone())
        if since is not None
        else None
    )
    return outputs_since(project, moment)


def applicant_record(request: AllocationRequest) -> ApplicantRecord:
    """The record of the project behind ``request``, as a committee reads it."""
    project = request.project
    day = timezone.localdate(request.created_at)
    quarters = _quarters_before(day)
    pools = _pools(project, request)
    partitions = _pool_of_partitions(pools)
    granted = _granted(project, quarters)
    used = [_used(project, quarter.start, quarter.end, partitions) for quarter in quarters]
    begun = _since_begun(quarters, granted, used)
    shown = list(range(begun, len(quarters)))
    histories = tuple(
        PoolHistory(
            pool_id=pool.pk,
            pool_name=pool.name,
            quarters=tuple(
                PoolQuarter(
                    granted_su=granted.get((pool.pk, index), ZERO),
                    used_su=used[index].get(pool.pk, ZERO),
                )
                for index in shown
            ),
        )
        for pool in pools
    )
    kept = [quarters[index] for index in shown]
    last_year_start = add_months(day, -12)
    months = efficiency_by_month(
        projects=Project.objects.filter(pk=project.pk),
        filters=EfficiencyFilters(
            project=project.code, start=kept[0].start if kept else day, end=quarters[-1].end
        ),
    )
    efficiency = tuple(
        EfficiencyQuarter(
            quarter=quarter,
            totals=totals_added(
                row for row in months if quarter.start <= _as_date(row.key) < quarter.end
            ),
        )
        for quarter in kept
    )
    last_year = _used(project, last_year_start, day, partitions)
    amounts = list(request.amounts.select_related("pool").order_by("pool__name"))
    asks = tuple(
        Ask(
            pool_name=amount.pool.name,
            requested_su=amount.requested_su,
            used_last_year_su=last_year.get(amount.pool_id, ZERO),
        )
        for amount in amounts
    )
    # The total: every SU charged in the last year, on whichever pool.
    used_total = (
        UsageDaily.objects.filter(project=project, day__gte=last_year_start, day__lt=day).aggregate(
            total=Sum("service_units")
        )["total"]
        or ZERO
    )
    ask_total = Ask(
        pool_name="total",
        requested_su=sum((amount.requested_su for amount in amounts), ZERO),
        used_last_year_su=used_total,
    )
    estimates = tuple(request.estimates.select_related("partition__cluster").order_by("pk"))
    since = _latest_grant_start(request, day)
    return ApplicantRecord(
        request=request,
        project=ProjectSummary(
            code=project.code,
            title=project.title,
            pi=_name(project.pi),
            field_of_science=project.field_of_science,
        ),
        day=day,
        quarters=tuple(kept),
        pools=histories,
        efficiency=efficiency,
        last_year_start=last_year_start,
        repricing=reprice_project(project.pk, last_year_start, day, at=_rates_day(request, day)),
        asks=asks,
        ask_total=ask_total,
        estimates=estimates,
        estimate_total_su=(
            sum((line.service_units for line in estimates), ZERO) if estimates else None
        ),
        outputs_since=since,
        outputs=tuple(_outputs(project, since)),
        progress_report=_progress_report(request),
    )


def _name(user: User | None) -> str:
    if user is None:
        return ""
    return user.get_full_name() or user.username


def _as_date(key: str | date) -> date:
    assert isinstance(key, date)
    return key
