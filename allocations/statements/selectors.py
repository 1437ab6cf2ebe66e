"""The figures of monthly statements, gathered from the database (docs/costs.md, "Statements").

The balances are the one balance's (``allocations.grants.selectors.balance_for_period``); what
the month moved is cut from it: the daily roll-ups the balance reads
(``accounting.ledger.selectors.pool_ledger_get``) and the adjustments recorded before and
after the month's edges. The SU per partition and the jobs with their stored money cost are
the ledger's (``accounting.ledger.selectors.project_month_get``). The assembly into lines and
totals is ``allocations.statements.assembly``, pure.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import date, datetime, tzinfo
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import DecimalField, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounting.ledger.selectors import MonthLedger, pool_ledger_get, project_month_get
from allocations.grants.selectors import balance_for_period
from allocations.models import Adjustment, BudgetPeriod
from allocations.statements.assembly import (
    ZERO,
    Line,
    LineKind,
    PartitionCharge,
    PeriodSpan,
    PoolFigures,
    ProjectFigures,
    Statement,
    StatementError,
    StatementFigures,
    statement_assemble,
)
from kit.calendar import add_months, last_day
from projects.models import Project

_SU = DecimalField(max_digits=24, decimal_places=6)
NO_POOL = "(no pool)"


def _midnight(day: date, zone: tzinfo) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=zone)


def _between(daily: list[tuple[date, Decimal]], since: date, until: date) -> Decimal:
    return sum((amount for day, amount in daily if since <= day < until), ZERO)


def _adjusted_since(period: BudgetPeriod, at: datetime) -> Decimal:
    """What the adjustments of ``period`` recorded at or after ``at`` add up to."""
    found = Adjustment.objects.filter(budget_period=period, created_at__gte=at).aggregate(
        total=Coalesce(Sum("amount_su"), Value(ZERO), output_field=_SU)
    )
    return Decimal(found["total"])


def _adjustment_line(adjustment: Adjustment, zone: ZoneInfo) -> Line:
    what = [adjustment.get_kind_display(), adjustment.reason.strip()]
    if adjustment.job_id is not None:
        what.append(f"job {adjustment.job.job_id}" if adjustment.job else "")
    return Line(
        day=timezone.localtime(adjustment.created_at, zone).date(),
        kind=LineKind(adjustment.kind),
        description=": ".join(part for part in what if part),
        amount_su=adjustment.amount_su,
    )


@dataclass(frozen=True)
class _LateCarry:
    """Adjustments made to budget periods that had ended before the month (a late refund or
    correction): on a pool that carries over they reach the month's balances through the SU
    carried over."""

    lines: list[Line]  # those made in the month
    in_month_su: Decimal
    after_su: Decimal  # made after the month: not yet in its figures


def _carried_in_late(
    project: Project, first: BudgetPeriod, *, opens: datetime, closes: datetime
) -> _LateCarry:
    zone = first.allocation.pool.cluster.zoneinfo
    late = (
        Adjustment.objects.filter(
            budget_period__allocation__project=project,
            budget_period__allocation__pool=first.allocation.pool,
            budget_period__end__lte=first.start,
            created_at__gte=opens,
        )
        .select_related("job", "budget_period")
        .order_by("created_at", "pk")
    )
    lines, in_month, after = [], ZERO, ZERO
    for item in late:
        if item.created_at >= closes:
            after += item.amount_su
            continue
        in_month += item.amount_su
        line = _adjustment_line(item, zone)
        ended = last_day(item.budget_period.end)
        lines.append(
            replace(
                line,
                description=f"{line.description} (to the budget period ended {ended:%Y-%m-%d},"
                " carried over)",
            )
        )
    return _LateCarry(lines, in_month, after)


def _without_late(spans: list[PeriodSpan], carried: _LateCarry) -> list[PeriodSpan]:
    """The spans' figures as the month saw them: the late adjustments made in it are lines of
    their own (not in the opening), those made after it in none of its figures."""
    return [
        replace(
            span,
            at_start_su=span.at_start_su
            - carried.after_su
            - (carried.in_month_su if index == 0 else ZERO),
            at_end_su=span.at_end_su - carried.after_su,
        )
        for index, span in enumerate(spans)
    ]


def _pools_of(
    project: Project, month: date, ledger: MonthLedger
) -> tuple[list[PoolFigures], list[tzinfo]]:
    """The project's pools in the month, by name, and the time zones of their clusters."""
    next_month = add_months(month, 1)
    periods = list(
        BudgetPeriod.objects.filter(
            allocation__project=project, start__lt=next_month, end__gt=month
        )
        .select_related("allocation__pool__cluster", "allocation__project")
        .order_by("allocation__pool__name", "start", "pk")
    )
    by_pool: dict[int, list[BudgetPeriod]] = defaultdict(list)
    for period in periods:
        by_pool[period.allocation.pool_id].append(period)
    daily: dict[int, list[tuple[date, Decimal]]] = {}
    if periods:
        daily = pool_ledger_get(
            project_id=project.pk,
            pool_ids=list(by_pool),
            since=min(period.start for period in periods),
            until=max(period.end for period in periods),
        ).used
    charges: dict[int | None, list[PartitionCharge]] = defaultdict(list)
    names: dict[int | None, tuple[str, str]] = {}
    for charge in ledger.charges:
        charges[charge.pool_id].append(
            PartitionCharge(charge.partition, charge.cluster, charge.jobs, charge.service_units)
        )
        names.setdefault(charge.pool_id, (charge.pool or NO_POOL, charge.cluster))
    pools: dict[int | None, PoolFigures] = {}
    for pool_periods in by_pool.values():
        pool = pool_periods[0].allocation.pool
        zone = pool.cluster.zoneinfo
        opens, closes = _midnight(month, zone), _midnight(next_month, zone)
        used = daily.get(pool.pk, [])
        spans = []
        for period in pool_periods:
            remaining = balance_for_period(period=period, on=period.start).remaining_su
            since, until = max(month, period.start), min(next_month, period.end)
            spans.append(
                PeriodSpan(
                    start=period.start,
                    end=period.end,
                    at_start_su=remaining
                    + _between(used, since, period.end)
                    - _adjusted_since(period, opens),
                    at_end_su=remaining
                    + _between(used, until, period.end)
                    - _adjusted_since(period, closes),
                    used_in_month_su=_between(used, since, until),
                    carries_over=pool.carry_over,
                )
            )
        adjustments = [
            _adjustment_line(item, zone)
            for item in Adjustment.objects.filter(budget_period__in=pool_periods)
            .filter(created_at__gte=opens, created_at__lt=closes)
            .select_related("job")
            .order_by("created_at", "pk")
        ]
        if pool.carry_over:
            carried = _carried_in_late(project, pool_periods[0], opens=opens, closes=closes)
            spans = _without_late(spans, carried)
            adjustments = sorted([*adjustments, *carried.lines], key=lambda line: line.day)
        pools[pool.pk] = PoolFigures(
            pool=pool.name,
            cluster=pool.cluster.name,
            periods=tuple(spans),
            adjustments=tuple(adjustments),
            charges=tuple(charges.get(pool.pk, [])),
        )
    for key, partition_charges in charges.items():  # charged without a budget period
        if key not in pools:
            pools[key] = PoolFigures(*names[key], (), (), tuple(partition_charges))
    zones: list[tzinfo] = [
        periods[0].allocation.pool.cluster.zoneinfo for periods in by_pool.values()
    ]
    return sorted(pools.values(), key=lambda pool: pool.pool), zones


def _provisional(month: date, ledgers: list[MonthLedger], zones: list[tzinfo]) -> bool:
    """A month is provisional until it has ended on every cluster concerned and each of their
    imports has run since (a job that ended in the month may not be in the ledger yet)."""
    next_month = add_months(month, 1)
    now = timezone.now()
    if any(now < _midnight(next_month, zone) for zone in zones):
        return True
    return any(
        finished is None or finished < _midnight(next_month, zone)
        for ledger in ledgers
        for zone, finished in ledger.last_import.values()
    )


def _statement_of(projects: list[Project], *, month: date, finance_code: str) -> Statement:
    next_month = add_months(month, 1)
    ledgers = {
        project.pk: project_month_get(
            project_id=project.pk, first_day=month, next_first_day=next_month
        )
        for project in projects
    }
    figures = []
    zones: list[tzinfo] = [timezone.get_current_timezone()]
    for project in projects:
        ledger = ledgers[project.pk]
        pools, pool_zones = _pools_of(project, month, ledger)
        zones += pool_zones
        figures.append(
            ProjectFigures(
                code=project.code,
                title=project.title,
                pi_name=(project.pi.get_full_name() or project.pi.get_username())
                if project.pi
                else "",
                finance_code=project.finance_code,
                pools=tuple(pools),
                jobs=tuple(ledger.jobs),
            )
        )
    address = [line.strip() for line in settings.PORTAL_CENTRE_ADDRESS.split("|")]
    return statement_assemble(
        StatementFigures(
            centre_name=settings.PORTAL_CENTRE_NAME,
            centre_address="\n".join(line for line in address if line),
            month=month,
            issued_on=timezone.localdate(),
            provisional=_provisional(month, list(ledgers.values()), zones),
            projects=tuple(figures),
            finance_code=finance_code,
        )
    )


def statement_get(*, project: Project, month: date) -> Statement:
    """The statement of ``project`` for the month beginning ``month``."""
    return _statement_of([project], month=month, finance_code="")


def finance_code_projects(*, finance_code: str) -> list[Project]:
    """The projects billed to ``finance_code``, by code; an unknown code is refused."""
    projects = list(
        Project.objects.filter(finance_code=finance_code).select_related("pi").order_by("code")
    )
    if not finance_code.strip() or not projects:
        raise StatementError(f"no project has the finance code {finance_code!r}")
    return projects


def finance_statement_get(*, finance_code: str, month: date) -> Statement:
    """One statement of every project billed to ``finance_code`` for the month."""
    projects = finance_code_projects(finance_code=finance_code)
    return _statement_of(projects, month=month, finance_code=finance_code)


def projects_for_statements(*, project_code: str | None, finance_code: str | None) -> list[Project]:
    """The projects a run of ``statements`` covers: one, a finance code's, or all (by code)."""
    projects = Project.objects.select_related("pi").order_by("code")
    if project_code:
        found = list(projects.filter(code=project_code))
        if not found:
            raise StatementError(f"there is no project {project_code!r}")
        if finance_code and found[0].finance_code != finance_code:
            raise StatementError(
                f"{project_code} is not billed to the finance code {finance_code!r}"
            )
        return found
    if finance_code:
        return finance_code_projects(finance_code=finance_code)
    return list(projects.filter(~Q(status=Project.Status.ARCHIVED)))
