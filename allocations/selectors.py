"""Read-side queries of allocations. Balances read the import's daily roll-ups, never jobs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Avg, Count, DecimalField, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounting.models import CostModelVersion, Job, UsageDaily
from allocations.access import Actor, is_chair, is_staff, require
from allocations.budget import Balance
from allocations.models import (
    Adjustment,
    AllocationRequest,
    AllocationRound,
    BudgetPeriod,
    Membership,
    Project,
    RequestAmount,
    ResourcePool,
    RoundPool,
)

ZERO = Decimal(0)
_SU_FIELD = DecimalField(max_digits=24, decimal_places=6)


def _sum(field: str, **filters: Any) -> Coalesce:
    return Coalesce(Sum(field, filter=Q(**filters)), Value(ZERO), output_field=_SU_FIELD)


def pool_today(pool: ResourcePool, at: datetime | None = None) -> date:
    """Today on the pool's cluster: budget periods and daily usage follow its local days."""
    return timezone.localtime(at or timezone.now(), pool.cluster.zoneinfo).date()


def budget_period_at(*, project: Project, pool: ResourcePool, on: date) -> BudgetPeriod | None:
    return (
        BudgetPeriod.objects.select_related("allocation")
        .filter(allocation__project=project, allocation__pool=pool, start__lte=on, end__gt=on)
        .order_by("start")
        .first()
    )


def _used(project: Project, partition_ids: list[int], start: date, end: date) -> Decimal:
    used = UsageDaily.objects.filter(
        project=project, partition_id__in=partition_ids, day__gte=start, day__lt=end
    ).aggregate(total=_sum("service_units"))["total"]
    return Decimal(used)


def _carried_in(period: BudgetPeriod, partition_ids: list[int]) -> Decimal:
    """Unused SU of the allocation's earlier periods, when the pool lets them carry over."""
    pool = period.allocation.pool
    if not pool.carry_over:
        return ZERO
    carried = ZERO
    earlier = BudgetPeriod.objects.filter(allocation=period.allocation, start__lt=period.start)
    for previous in earlier.order_by("start"):
        adjustments = previous.adjustments.aggregate(total=_sum("amount_su"))["total"]
        used = _used(period.allocation.project, partition_ids, previous.start, previous.end)
        carried = max(carried + previous.budget_su + Decimal(adjustments) - used, ZERO)
    return carried


def balance_for_period(*, period: BudgetPeriod, on: date) -> Balance:
    """The balance of one budget period: roll-ups, adjustments and pending charges."""
    allocation = period.allocation
    project, pool = allocation.project, allocation.pool
    partition_ids = list(pool.partitions.values_list("pk", flat=True))
    week_ago, month_ago = on - timedelta(days=7), on - timedelta(days=30)
    usage = UsageDaily.objects.filter(
        project=project, partition_id__in=partition_ids, day__gte=min(period.start, month_ago),
        day__lt=max(period.end, on),
    ).aggregate(
        used=_sum("service_units", day__gte=period.start, day__lt=period.end),
        last_7=_sum("service_units", day__gte=week_ago, day__lt=on),
        last_30=_sum("service_units", day__gte=month_ago, day__lt=on),
        used_cost=_sum("cost", day__gte=period.start, day__lt=period.end),
    )  # fmt: skip
    adjustments = period.adjustments.aggregate(total=_sum("amount_su"))["total"]
    pending = ZERO
    if period.start <= on < period.end:
        pending = Job.objects.filter(
            project=project, partition_id__in=partition_ids, charge_state=Job.ChargeState.PENDING
        ).aggregate(total=_sum("pending_service_units"))["total"]
    return Balance(
        start=period.start,
        end=period.end,
        budget_su=period.budget_su,
        carried_in_su=_carried_in(period, partition_ids),
        adjustments_su=Decimal(adjustments),
        used_su=Decimal(usage["used"]),
        pending_su=Decimal(pending),
        used_last_7_days_su=Decimal(usage["last_7"]),
        used_last_30_days_su=Decimal(usage["last_30"]),
        on=on,
        used_cost=Decimal(usage["used_cost"]),
    )


def balance_get(*, project: Project, pool: ResourcePool, on: date | None = None) -> Balance | None:
    """The project's balance on ``pool`` in the budget period containing ``on`` (today), or
    ``None`` without a grant then. A bounded number of queries, none over the jobs' history."""
    day = on or pool_today(pool)
    period = budget_period_at(project=project, pool=pool, on=day)
    if period is None:
        return None
    return balance_for_period(period=period, on=day)


@dataclass(frozen=True)
class PoolBalance:
    pool: ResourcePool
    balance: Balance | None
    currency: str | None = None
    """The currency of the pool's cluster's cost model; None without one (no money shown)."""


def balances_for_project(*, project: Project, on: date | None = None) -> list[PoolBalance]:
    """Every pool the project holds a grant on, with the current balance."""
    pools = (
        ResourcePool.objects.filter(allocations__project=project)
        .select_related("cluster")
        .annotate(cost_currency=cost_currency_of(OuterRef("cluster_id")))
    )
    return [
        PoolBalance(
            pool=pool,
            balance=balance_get(project=project, pool=pool, on=on),
            currency=pool.cost_currency,
        )
        for pool in pools.distinct().order_by("name")
    ]


def cost_currency_of(cluster: Any) -> Subquery:
    """The currency of a cluster's newest cost model version, as a subquery (none: NULL)."""
    return Subquery(
        CostModelVersion.objects.filter(cluster_id=cluster)
        .order_by("-effective_from")
        .values("currency")[:1]
    )


def adjustments_for_project(*, project: Project) -> QuerySet[Adjustment]:
    return Adjustment.objects.filter(project=project).select_related(
        "budget_period__allocation__pool", "actor", "job"
    )


@dataclass(frozen=True)
class RoundPoolSummary:
    pool: ResourcePool
    available_su: Decimal
    requested_su: Decimal
    granted_su: Decimal


@dataclass(frozen=True)
class RoundRequestSummary:
    request: AllocationRequest
    requested: dict[int, Decimal]
    average_score: Decimal | None
    reviews: int


def round_overview(*, round_: AllocationRound, actor: Actor) -> dict[str, Any]:
    """The chair's view: requested vs available SU per pool, and each request's scores."""
    require(
        is_chair(actor, round_) or is_staff(actor),
        "only the round's chair and centre staff see the whole round",
    )
    amounts = RequestAmount.objects.filter(request__round=round_).exclude(
        request__state=AllocationRequest.State.DRAFT
    )
    totals: dict[int, Any] = {
        row["pool"]: row
        for row in amounts.values("pool").annotate(
            requested=Sum("requested_su"), granted=Coalesce(Sum("granted_su"), Value(ZERO))
        )
    }
    pools = [
        RoundPoolSummary(
            pool=item.pool,
            available_su=item.available_su,
            requested_su=totals.get(item.pool_id, {}).get("requested") or ZERO,
            granted_su=totals.get(item.pool_id, {}).get("granted") or ZERO,
        )
        for item in RoundPool.objects.filter(round=round_).select_related("pool")
    ]
    requests = (
        AllocationRequest.objects.filter(round=round_)
        .exclude(state=AllocationRequest.State.DRAFT)
        .select_related("project")
        .annotate(average_score=Avg("reviews__score"), review_count=Count("reviews", distinct=True))
        .prefetch_related("amounts")
        .order_by("-average_score", "project__code")
    )
    return {
        "round": round_,
        "pools": pools,
        "requests": [
            RoundRequestSummary(
                request=request,
                requested={amount.pool_id: amount.requested_su for amount in request.amounts.all()},
                average_score=(
                    Decimal(request.average_score).quantize(Decimal("0.01"))
                    if request.average_score is not None
                    else None
                ),
                reviews=request.review_count,
            )
            for request in requests
        ],
    }


def memberships_of(*, project: Project) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(project=project).select_related("user").order_by("user__username")
    )
