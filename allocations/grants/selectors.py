"""Read-side queries of grants and balances (the one balance). Balances read the import's daily
roll-ups, never jobs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo

from django.db import connection
from django.db.models import DecimalField, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounting.ledger.selectors import (
    LedgerWanted,
    PoolLedger,
    jobs_by_id,
    pools_ledger_get,
)
from accounting.models import Cluster, CostModelVersion
from allocations.grants.budget import Balance, GrantBalance
from allocations.models import Adjustment, Allocation, BudgetPeriod
from kit.access import Actor
from kit.sql import placeholders, sql_day, sql_decimal, table_names
from projects import access as projects_access
from projects.accounts import pool_account, submit_commands
from projects.models import Project, ResourcePool

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


def allocation_in_force(*, project: Project, pool: ResourcePool, on: date) -> Allocation | None:
    """The project's grant on ``pool`` whose period covers ``on``, if any."""
    return (
        Allocation.objects.filter(
            project=project, pool=pool, period_start__lte=on, period_end__gt=on
        )
        .select_related("pool", "request")
        .order_by("period_start")
        .first()
    )


def allocations_in_force(*, project: Project, on: date | None = None) -> list[Allocation]:
    """The project's grants in force on ``on`` (each pool's own today), by pool name."""
    found = []
    for allocation in (
        Allocation.objects.filter(project=project)
        .select_related("pool__cluster", "request")
        .order_by("pool__name", "period_start")
    ):
        day = on or pool_today(allocation.pool)
        if allocation.period_start <= day < allocation.period_end:
            found.append(allocation)
    return found


# --- Balances: one implementation ----------------------------------------------------------
#
# Every balance the portal shows or acts on (pages, dashboard, API and su-balance, enforcement,
# budget e-mails, transfers) is computed by ``_balances`` below from two SQL queries, for one
# project or for many at once (a page of the staff dashboard): the projects' budget periods
# with their adjustments, then what the ledger holds for their pools
# (``accounting.ledger.selectors.pools_ledger_get``: partitions, usage per day, pending charges,
# what queued and running jobs reserve). The functions after it only choose which balances to
# return; with ``grants`` it also sums each grant of a pool as a whole (``GrantBalance``).


@dataclass(frozen=True)
class PoolBalances:
    pool: str
    cluster: str
    partitions: list[str]
    current: Balance | None
    periods: list[Balance]
    currency: str | None = None  # of the cluster's cost model; None without one
    pool_id: int = 0
    account: str = ""
    """The Slurm account the project's jobs in this pool run under (``sbatch --account``), by
    the one naming rule (``projects.accounts.pool_account``)."""
    grants: list[GrantBalance] = field(default_factory=list)
    """Every grant on the pool, oldest first (when asked for: ``grants=True``)."""

    @property
    def submit_with(self) -> list[str]:
        """``sbatch --account=... --partition=...``, one line per partition of the pool."""
        return submit_commands(self.account, self.partitions)


@dataclass(frozen=True)
class ProjectBalances:
    project: Project
    pools: list[PoolBalances]


def _between(daily: list[tuple[date, Decimal]], since: date, until: date) -> Decimal:
    """The amounts of the days in [since, until)."""
    return sum((amount for day, amount in daily if since <= day < until), ZERO)


@cache
def _periods_sql(projects: int) -> str:
    period, allocation, pool, cluster, cost_model, adjustment = table_names(
        BudgetPeriod, Allocation, ResourcePool, Cluster, CostModelVersion, Adjustment
    )
    end = connection.ops.quote_name("end")
    return (  # the budget periods of a project, with their pool, cluster, its currency and
        # the period's adjustments
        f"SELECT bp.id, bp.start, bp.{end}, bp.budget_su, a.pool_id, a.period_start, "  # noqa: S608
        "a.period_end, p.name, p.carry_over, c.name, c.timezone, "
        f"(SELECT cm.currency FROM {cost_model} cm WHERE cm.cluster_id = c.id "
        " ORDER BY cm.effective_from DESC LIMIT 1), a.id, "
        f"(SELECT SUM(ad.amount_su) FROM {adjustment} ad WHERE ad.budget_period_id = bp.id), "
        "p.slurm_account_suffix, a.project_id "
        f"FROM {period} bp JOIN {allocation} a ON a.id = bp.allocation_id "
        f"JOIN {pool} p ON p.id = a.pool_id JOIN {cluster} c ON c.id = p.cluster_id "
        f"WHERE a.project_id IN {placeholders(projects)} "
        "ORDER BY a.project_id, p.name, bp.start, bp.id"
    )


@dataclass(frozen=True)
class _Period:
    pk: int
    allocation: int
    start: date
    end: date
    budget: Decimal
    grant_start: date
    grant_end: date


def _balance_of(
    period: _Period,
    *,
    earlier: list[_Period],
    used: list[tuple[date, Decimal]],
    spent: list[tuple[date, Decimal]],
    pending: Decimal,
    reserved: Decimal,
    adjusted: dict[int, Decimal],
    day: date,
    per_day: bool,
) -> Balance:
    """One budget period's balance on ``day`` from its pool's usage (per day, or per range
    between the cuts of :func:`_cuts`); ``earlier`` are the periods whose unused SU carry over
    into it (empty when the pool does not carry over). ``per_day``: with the SU of each day of
    the period up to ``day`` (the usage is per day then)."""
    carried = ZERO
    for previous in earlier:
        if previous.allocation == period.allocation and previous.start < period.start:
            left = previous.budget + adjusted[previous.pk]
            left -= _between(used, previous.start, previous.end)
            carried = max(carried + left, ZERO)
    now = period.start <= day < period.end  # jobs running now count in this period only
    return Balance(
        start=period.start,
        end=period.end,
        budget_su=period.budget,
        carried_in_su=carried,
        adjustments_su=adjusted[period.pk],
        used_su=_between(used, period.start, period.end),
        pending_su=pending if now else ZERO,
        used_last_7_days_su=_between(used, day - timedelta(days=7), day),
        used_last_30_days_su=_between(used, day - timedelta(days=30), day),
        on=day,
        used_cost=_between(spent, period.start, period.end),
        reserved_su=reserved if now else ZERO,
        used_per_day=(
            _days_between(used, period.start, min(period.end, day + timedelta(days=1)))
            if per_day
            else ()
        ),
    )


def _days_between(
    daily: list[tuple[date, Decimal]], since: date, until: date
) -> tuple[tuple[date, Decimal], ...]:
    """The days in [since, until) with their amounts."""
    return tuple((day, amount) for day, amount in daily if since <= day < until)


def _grants_of(
    periods: list[_Period],
    *,
    used: list[tuple[date, Decimal]],
    adjusted: dict[int, Decimal],
    day: date,
) -> list[GrantBalance]:
    """Each grant among ``periods`` (one pool's) as a whole, oldest first. What was granted is
    the sum of its budget periods' budgets, the figure every balance counts (the grant's amount,
    unless staff changed a period's budget since)."""
    grants: dict[int, list[_Period]] = defaultdict(list)
    for period in periods:
        grants[period.allocation].append(period)
    result = [
        GrantBalance(
            allocation_id=allocation,
            start=own[0].grant_start,
            end=own[0].grant_end,
            granted_su=sum((p.budget for p in own), ZERO),
            adjustments_su=sum((adjusted[p.pk] for p in own), ZERO),
            used_su=_between(used, own[0].grant_start, own[0].grant_end),
            on=day,
        )
        for allocation, own in grants.items()
    ]
    return sorted(result, key=lambda grant: (grant.start, grant.allocation_id))


def _wanted(
    periods: list[_Period], *, day: date, all_periods: bool, period_id: int | None
) -> list[_Period]:
    """The periods whose balances are asked for: the one containing ``day``, every period of
    the grant covering ``day`` (``all_periods``), or the period ``period_id``."""
    if period_id is not None:
        return [p for p in periods if p.pk == period_id]
    if all_periods:
        return [p for p in periods if p.grant_start <= day < p.grant_end]
    return [p for p in periods if p.start <= day < p.end][:1]


def _balances(
    *,
    project: Project,
    on: date | None,
    pool_id: int | None = None,
    all_periods: bool = False,
    period_id: int | None = None,
    grants: bool = False,
) -> ProjectBalances:
    """One project's balances (:func:`_balances_of`), without their days."""
    found = _balances_of(
        projects=[project], on=on, pool_id=pool_id, all_periods=all_periods,
        period_id=period_id, grants=grants, per_day=False,
    )  # fmt: skip
    return found[project.pk]


@dataclass
class _Held:
    """What one project holds, read from the budget periods: per pool its name, cluster,
    carry-over and currency, its Slurm account suffix, its today and its periods."""

    pools: dict[int, tuple[str, str, bool, str | None]] = field(default_factory=dict)
    suffixes: dict[int, str] = field(default_factory=dict)
    days: dict[int, date] = field(default_factory=dict)
    periods: dict[int, list[_Period]] = field(default_factory=lambda: defaultdict(list))


def _balances_of(
    *,
    projects: Sequence[Project],
    on: date | None,
    pool_id: int | None = None,
    all_periods: bool = False,
    period_id: int | None = None,
    grants: bool = False,
    per_day: bool = False,
) -> dict[int, ProjectBalances]:
    """Each project's balances on each pool it holds a grant on (or on ``pool_id``), keyed by
    project id: the budget period containing ``on`` (today on the pool's cluster) and, with
    ``all_periods``, every budget period of the grant covering that day (with ``period_id``:
    that period only); with ``grants``, every grant of each pool as a whole (past, current and
    future); with ``per_day``, each balance's SU per day (``Balance.used_per_day``, the
    burn-down's points; without, the roll-ups are read as one sum per range of days the
    figures need, :func:`_cuts`). Two queries whatever the number of projects, none over the
    jobs' history: a project's figures are the same read alone or among many, with its days or
    without."""
    if not projects:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_periods_sql(len(projects)), [project.pk for project in projects])
        rows = [row for row in cursor.fetchall() if pool_id is None or row[4] == pool_id]
    held: dict[int, _Held] = {project.pk: _Held() for project in projects}
    adjusted: dict[int, Decimal] = defaultdict(Decimal)
    now = timezone.now()
    for row in rows:
        pool, own = row[4], held[row[15]]
        if pool not in own.pools:
            own.pools[pool] = (row[7], row[9], bool(row[8]), row[11])
            own.suffixes[pool] = row[14] or ""
            own.days[pool] = on or timezone.localtime(now, ZoneInfo(row[10])).date()
        start, stop, grant_start, grant_end = map(sql_day, (row[1], row[2], row[5], row[6]))
        own.periods[pool].append(
            _Period(row[0], row[12], start, stop, sql_decimal(row[3]), grant_start, grant_end)
        )
        adjusted[row[0]] = sql_decimal(row[13])

    wanted_of: dict[int, dict[int, list[_Period]]] = {}
    asked: dict[int, LedgerWanted] = {}
    for project in projects:
        own = held[project.pk]
        if not own.pools:
            continue
        wanted_of[project.pk], asked[project.pk] = _ledger_wanted(
            own, all_periods=all_periods, period_id=period_id, grants=grants, per_day=per_day
        )
    ledgers = pools_ledger_get(wanted=asked)
    return {
        project.pk: _project_balances(
            project, held[project.pk], wanted=wanted_of.get(project.pk, {}),
            ledger=ledgers.get(project.pk), adjusted=adjusted, all_periods=all_periods,
            period_id=period_id, grants=grants, per_day=per_day,
        )
        for project in projects
    }  # fmt: skip


def _ledger_wanted(
    own: _Held, *, all_periods: bool, period_id: int | None, grants: bool, per_day: bool
) -> tuple[dict[int, list[_Period]], LedgerWanted]:
    """The periods wanted on each pool, and the ledger's days their balances need: their
    periods, the 30 days before ``on`` for the burn rates and, where SU carry over, the
    grant's earlier periods; per day with ``per_day``, else per range between :func:`_cuts`."""
    pools, periods, days = own.pools, own.periods, own.days
    wanted: dict[int, list[_Period]] = {
        k: _wanted(periods[k], day=days[k], all_periods=all_periods, period_id=period_id)
        for k in pools
    }
    read = {  # the wanted periods and the current one, whose balance is always returned
        k: wanted[k] + _wanted(periods[k], day=days[k], all_periods=False, period_id=None)
        for k in pools
    }
    spans = [
        (p.start, p.end)
        for k in pools
        for p in (periods[k] if pools[k][2] or grants else read[k])
        if grants or not pools[k][2] or any(w.allocation == p.allocation for w in read[k])
    ]
    first = min([start for start, _ in spans] + [days[k] - timedelta(days=30) for k in pools])
    last = max([end for _, end in spans] + [days[k] for k in pools])
    cuts = None if per_day else {k: _cuts(periods[k], day=own.days[k]) for k in pools}
    return wanted, LedgerWanted(pool_ids=list(pools), since=first, until=last, cuts=cuts)


def _cuts(periods: list[_Period], *, day: date) -> set[date]:
    """Every day a balance's sum over one pool's usage starts or ends at (:func:`_balance_of`
    and :func:`_grants_of` sum nothing else): each period's and grant's start and end, and
    the last 7 and 30 days before ``day``. The usage read as one sum per range between them
    gives each of those sums exactly."""
    found = {day, day - timedelta(days=7), day - timedelta(days=30)}
    for period in periods:
        found.update((period.start, period.end, period.grant_start, period.grant_end))
    return found


def _project_balances(
    project: Project,
    own: _Held,
    *,
    wanted: dict[int, list[_Period]],
    ledger: PoolLedger | None,
    adjusted: dict[int, Decimal],
    all_periods: bool,
    period_id: int | None,
    grants: bool,
    per_day: bool,
) -> ProjectBalances:
    """One project's balances from its periods and its ledger."""
    if ledger is None:
        return ProjectBalances(project=project, pools=[])
    pools, periods, days = own.pools, own.periods, own.days
    used, spent, pending, reserved = ledger.used, ledger.spent, ledger.pending, ledger.reserved
    result = []
    for pool, (pool_name, cluster_name, _carry_over, currency) in pools.items():
        day = days[pool]

        def balance(period: _Period, pool: int = pool, day: date = day) -> Balance:
            return _balance_of(
                period, earlier=periods[pool] if pools[pool][2] else [], used=used[pool],
                spent=spent[pool], pending=pending[pool], reserved=reserved[pool],
                adjusted=adjusted, day=day, per_day=per_day,
            )  # fmt: skip

        current = next((p for p in periods[pool] if p.start <= day < p.end), None)
        current_balance = balance(current) if current is not None else None
        if period_id is None and not all_periods:
            history = [current_balance] if current_balance is not None else []
        else:
            history = [balance(p) for p in wanted[pool]]
        result.append(
            PoolBalances(
                pool=pool_name, cluster=cluster_name, partitions=ledger.partitions[pool],
                current=current_balance, periods=history, currency=currency, pool_id=pool,
                account=pool_account(project.code, own.suffixes[pool]),
                grants=(
                    _grants_of(periods[pool], used=used[pool], adjusted=adjusted, day=day)
                    if grants else []
                ),
            )
        )  # fmt: skip
    return ProjectBalances(project=project, pools=result)


def project_balances_get(
    *, project: Project, on: date | None = None, all_periods: bool = False, grants: bool = False
) -> ProjectBalances:
    """Every pool the project holds a grant on, with its current balance (and, with
    ``all_periods``, every budget period of the grant; with ``grants``, every grant as a
    whole): what the API and su-balance show."""
    return _balances(project=project, on=on, all_periods=all_periods, grants=grants)


def balance_get(*, project: Project, pool: ResourcePool, on: date | None = None) -> Balance | None:
    """The project's balance on ``pool`` in the budget period containing ``on`` (today), or
    ``None`` without a grant then."""
    found = _balances(project=project, on=on, pool_id=pool.pk).pools
    return found[0].current if found else None


def balance_for_period(*, period: BudgetPeriod, on: date) -> Balance:
    """The balance of one budget period as it stands on ``on`` (enforcement, transfers)."""
    allocation = period.allocation
    found = _balances(
        project=allocation.project, on=on, pool_id=allocation.pool_id, period_id=period.pk
    )
    return found.pools[0].periods[0]


def grant_balances_of(*, allocations: list[Allocation]) -> dict[int, GrantBalance]:
    """Each allocation's figures as a whole (``GrantBalance``: status, used, remaining), from
    the one balance: one balance read for all the projects among ``allocations`` (a page of the
    API), not one per project or per grant."""
    found: dict[int, GrantBalance] = {}
    projects = {allocation.project_id: allocation.project for allocation in allocations}
    for balances in _balances_of(projects=list(projects.values()), on=None, grants=True).values():
        for pool in balances.pools:
            found.update((grant.allocation_id, grant) for grant in pool.grants)
    return found


@dataclass(frozen=True)
class PoolBalance:
    pool: ResourcePool
    balance: Balance | None
    currency: str | None = None
    """The currency of the pool's cluster's cost model; None without one (no money shown)."""
    account: str = ""
    """The Slurm account of the project's jobs in this pool (``sbatch --account``)."""
    partitions: list[str] = field(default_factory=list)
    grants: list[GrantBalance] = field(default_factory=list)
    """Every grant on the pool, oldest first (with ``grants=True``)."""

    @property
    def submit_with(self) -> list[str]:
        return submit_commands(self.account, self.partitions)


def balances_for_project(
    *, project: Project, on: date | None = None, grants: bool = False, per_day: bool = False
) -> list[PoolBalance]:
    """Every pool the project holds a grant on, with the current balance (the pages' form);
    with ``grants``, every grant on each pool as a whole, and with ``per_day`` the balance's SU
    per day (the project page's burn-down)."""
    return balances_for_projects(projects=[project], on=on, grants=grants, per_day=per_day)[
        project.pk
    ]


def balances_for_projects(
    *,
    projects: Sequence[Project],
    on: date | None = None,
    grants: bool = False,
    per_day: bool = False,
) -> dict[int, list[PoolBalance]]:
    """:func:`balances_for_project` of many projects at once, keyed by project id (the
    dashboards, a page of projects at a time): three queries whatever the number of projects
    and pools, and each project's figures exactly those it has alone."""
    found = _balances_of(projects=projects, on=on, grants=grants, per_day=per_day)
    pool_ids = {item.pool_id for balances in found.values() for item in balances.pools}
    pools = ResourcePool.objects.filter(pk__in=pool_ids).select_related("cluster").order_by("name")
    pools_in_order = list(pools) if pool_ids else []
    result: dict[int, list[PoolBalance]] = {}
    for project in projects:
        held = {item.pool_id: item for item in found[project.pk].pools}
        result[project.pk] = [
            PoolBalance(
                pool=pool,
                balance=held[pool.pk].current,
                currency=held[pool.pk].currency,
                account=held[pool.pk].account,
                partitions=held[pool.pk].partitions,
                grants=held[pool.pk].grants,
            )
            for pool in pools_in_order
            if pool.pk in held
        ]
    return result


def cost_currency_of(cluster: Any) -> Subquery:
    """The currency of a cluster's newest cost model version, as a subquery (none: NULL)."""
    return Subquery(
        CostModelVersion.objects.filter(cluster_id=cluster)
        .order_by("-effective_from")
        .values("currency")[:1]
    )


def adjustments_recent(*, project: Project, limit: int = 50) -> list[Adjustment]:
    """The project's newest adjustments with their jobs (a refund's), the jobs read by id from
    their own monthly partitions (a join on the ledger would plan every partition of its
    history: 5 ms with six years of months)."""
    adjustments = list(
        Adjustment.objects.filter(project=project)
        .select_related("budget_period__allocation__pool", "actor")
        .order_by("-created_at", "-pk")[:limit]
    )
    jobs = jobs_by_id(pks=[item.job_id for item in adjustments if item.job_id is not None])
    for item in adjustments:
        if item.job_id is not None and item.job_id in jobs:
            item.job = jobs[item.job_id]
    return adjustments


def projects_of_member(*, user: Actor) -> QuerySet[Project]:
    """The projects a user belongs to or leads, by code (staff too: their own only)."""
    return projects_access.projects_of_member(user=user).order_by("code")
