"""Write-side operations of grants and balances: SU granted on a pool for a period and split
into budget periods, and the adjustments (refund, top-up, transfer) of a budget period. Each
one checks who is acting first, and either does all of its work or none of it (one
transaction). ``AllocationError`` and the small checks here are shared by every domain of
allocations, which all stand on grants."""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal, InvalidOperation

from django.contrib.auth.models import User
from django.db import transaction

from accounting.models import Job
from allocations.access import approves_project_requests, can_decide, chairs_any_round
from allocations.grants import budget
from allocations.grants.expiry import project_status_follow
from allocations.grants.selectors import balance_for_period, budget_period_at, pool_today
from allocations.models import (
    Adjustment,
    Allocation,
    AllocationRequest,
    BudgetPeriod,
    ProjectRequest,
    SlurmSyncRequest,
)
from kit.access import is_staff, require
from kit.calendar import add_months
from kit.errors import ApplicationError
from kit.queue import task_enqueue
from projects.access import is_pi, project_writable_check
from projects.models import Project, ResourcePool

ZERO = Decimal(0)


class AllocationError(ApplicationError):
    """A rule of the allocation process forbids this; the message says which, and ``field``
    names the input it is about when one is (the API lists it under that field, a page shows
    it on that field of its form: ``kit.errors.ApplicationError``)."""


def check_rule(condition: bool, message: str, *, field: str | None = None) -> None:
    """Refuse with ``message`` (an ``AllocationError``, about input ``field`` when given)
    unless ``condition`` holds."""
    if not condition:
        raise AllocationError(message, field=field)


def su_amount(
    amount: Decimal | int | str, what: str = "amount", *, field: str | None = None
) -> Decimal:
    """``amount`` as SU: a finite Decimal of at most 6 places, or an ``AllocationError``."""
    try:
        value = Decimal(str(amount).strip())
    except InvalidOperation:
        message = f"{what} must be a number, not {str(amount)[:40]!r}"
        raise AllocationError(message, field=field) from None
    check_rule(value.is_finite(), f"{what} must be a number", field=field)
    check_rule(
        value == value.quantize(budget.SU_QUANTUM),
        f"{what} has more than 6 decimal places",
        field=field,
    )
    return value


# --- Allocations ----------------------------------------------------------------------------


@transaction.atomic
def allocation_grant(
    *,
    project: Project,
    pool: ResourcePool,
    amount: Decimal,
    period_start: date,
    period_end: date,
    actor: User,
    reason: str = "",
    request: AllocationRequest | None = None,
    custom_budgets: list[Decimal] | None = None,
    project_request: ProjectRequest | None = None,
) -> Allocation:
    """Grant SU on a pool for a period, split into budget periods by the pool's policy. A
    request decided by its chair, or a project request approved by an approver, grants too."""
    allowed = (
        is_staff(actor)
        or (request is not None and can_decide(actor, request))
        or (project_request is not None and approves_project_requests(actor))
    )
    require(
        allowed,
        "only centre staff and a round's chair grant SU (approvers, to a project they approve)",
    )
    project_writable_check(project)
    value = su_amount(amount, "the grant")
    check_rule(value >= 0, "a grant cannot be negative")
    spans = budget.periods(period_start, period_end, months=pool.budget_months)
    if custom_budgets is not None or pool.split == ResourcePool.Split.CUSTOM:
        check_rule(custom_budgets is not None, f"{pool} splits grants by hand: give the budgets")
        assert custom_budgets is not None
        budgets = [su_amount(item, "a budget") for item in custom_budgets]
        check_rule(len(budgets) == len(spans), f"the grant has {len(spans)} budget periods")
        check_rule(sum(budgets, ZERO) == value, "the budgets must add up to the grant")
        check_rule(all(item >= 0 for item in budgets), "a budget cannot be negative")
    else:
        budgets = budget.split_even(value, len(spans))
    allocation = Allocation.objects.create(
        project=project, pool=pool, request=request, period_start=period_start,
        period_end=period_end, granted_su=value, granted_by=actor, reason=reason,
    )  # fmt: skip
    BudgetPeriod.objects.bulk_create(
        BudgetPeriod(allocation=allocation, start=start, end=end, budget_su=amount_su)
        for (start, end), amount_su in zip(spans, budgets, strict=True)
    )
    if project.status == Project.Status.EXPIRED:  # a new grant revives an expired project
        project_status_follow(project=project)
        project.refresh_from_db(fields=["status", "status_since"])
    _slurm_limits_follow(pool)
    return allocation


def check_extension_end(allocation: Allocation, new_end: date) -> None:
    """An extension's end: after the grant's end, at most ``MAX_EXTENSION_MONTHS`` later, and
    before any later grant of the project on the pool starts."""
    check_rule(
        new_end > allocation.period_end,
        f"the new end must be after the grant's end ({allocation.period_end})",
        field="new_end",
    )
    months = budget.MAX_EXTENSION_MONTHS
    check_rule(
        new_end <= add_months(allocation.period_end, months),
        f"an extension adds at most {months} months (to {add_months(allocation.period_end, months)}"
        "): for longer, apply for a renewal",
        field="new_end",
    )
    overlapping = Allocation.objects.filter(
        project=allocation.project, pool=allocation.pool,
        period_start__lt=new_end, period_end__gt=allocation.period_end,
    ).exclude(pk=allocation.pk)  # fmt: skip
    check_rule(
        not overlapping.exists(),
        f"{allocation.project} holds another grant on {allocation.pool} before {new_end}",
        field="new_end",
    )


def _may_grant(actor: User, request: AllocationRequest | None) -> None:
    allowed = is_staff(actor) or (request is not None and can_decide(actor, request))
    require(allowed, "only centre staff and the chair who decides the request change a grant")


@transaction.atomic
def allocation_extend(
    *,
    allocation: Allocation,
    new_end: date,
    amount: Decimal,
    actor: User,
    request: AllocationRequest | None = None,
) -> Allocation:
    """Move a grant's end to ``new_end`` and add ``amount`` SU over the added span, in budget
    periods of the pool's length (split evenly: ``budget.extension_budgets``); the grant's
    own periods stay as they are."""
    _may_grant(actor, request)
    allocation = Allocation.objects.select_for_update().get(pk=allocation.pk)
    check_extension_end(allocation, new_end)
    value = su_amount(amount, "the extension's SU")
    check_rule(value >= 0, "an extension cannot remove SU")
    added = budget.extension_budgets(
        allocation.period_end, new_end, value, months=allocation.pool.budget_months
    )
    BudgetPeriod.objects.bulk_create(
        BudgetPeriod(allocation=allocation, start=start, end=end, budget_su=share)
        for start, end, share in added
    )
    allocation.period_end = new_end
    allocation.granted_su += value
    allocation.save(update_fields=["period_end", "granted_su"])
    _slurm_limits_follow(allocation.pool)
    return allocation


@transaction.atomic
def allocation_raise(
    *,
    allocation: Allocation,
    amount: Decimal,
    actor: User,
    request: AllocationRequest | None = None,
    on: date | None = None,
) -> Allocation:
    """Add ``amount`` SU to a grant (an appeal granted): split evenly over its budget periods
    not yet over (``budget.raise_budgets``), so the SU come now and later, never in the past."""
    _may_grant(actor, request)
    value = su_amount(amount, "the raise")
    check_rule(value > 0, "a raise must be positive")
    allocation = Allocation.objects.select_for_update().get(pk=allocation.pk)
    periods = list(allocation.budget_periods.order_by("start"))
    day = on or pool_today(allocation.pool)
    shares = budget.raise_budgets([(p.start, p.end) for p in periods], value, on=day)
    for period, share in zip(periods, shares, strict=True):
        if share:
            period.budget_su += share
            period.save(update_fields=["budget_su"])
    allocation.granted_su += value
    allocation.save(update_fields=["granted_su"])
    _slurm_limits_follow(allocation.pool)
    return allocation


def _slurm_limits_follow(pool: ResourcePool) -> None:
    """A balance on ``pool`` moved: when the pool says so, Slurm's GrpTRESMins limits of its
    cluster are set again after the commit, without review (docs/slurm.md)."""
    if pool.slurm_limits_auto:
        _slurm_limits_refresh_enqueue(pool.cluster_id)


def _slurm_limits_refresh_enqueue(cluster_id: int) -> None:
    """Slurm's limits of the cluster set again by a worker; when the task queue does not take
    the work, the Slurm page says so (a failed "limits update"), the balance having moved."""

    def unsent(error: Exception) -> None:
        SlurmSyncRequest.record_unsent(
            cluster_id=cluster_id,
            kind=SlurmSyncRequest.Kind.LIMITS,
            error=f"Slurm's limits were not set again after a balance moved: {error}",
        )

    task_enqueue(
        name="allocations.tasks.slurm_limits_refresh",
        kwargs={"cluster_id": cluster_id},
        on_unsent=unsent,
    )


def charges_booked_received(*, cluster_id: int, **kwargs: object) -> None:
    """An import charged jobs on the cluster (``accounting.signals.charges_booked``): its
    balances moved, so its limits follow where a pool of the cluster says so."""
    if ResourcePool.objects.filter(cluster_id=cluster_id, slurm_limits_auto=True).exists():
        _slurm_limits_refresh_enqueue(cluster_id)


# --- Adjustments ----------------------------------------------------------------------------


def _period_for(project: Project, pool: ResourcePool, on: date | None) -> BudgetPeriod:
    day = on or pool_today(pool)
    period = budget_period_at(project=project, pool=pool, on=day)
    check_rule(period is not None, f"{project} has no budget period on {pool} on {day}")
    assert period is not None
    return period


@transaction.atomic
def adjustment_refund(
    *,
    project: Project,
    pool: ResourcePool,
    actor: User,
    reason: str,
    amount: Decimal | None = None,
    job: Job | None = None,
    on: date | None = None,
) -> Adjustment:
    """Staff give SU back: a job's whole charge (once per job) or an amount."""
    require(is_staff(actor), "only centre staff refund SU")
    project_writable_check(project)
    check_rule(bool(reason.strip()), "a refund needs a reason")
    if job is not None:
        check_rule(job.project_id == project.pk, f"job {job.job_id} is not a job of {project}")
        check_rule(
            pool.partitions.filter(pk=job.partition_id).exists(),
            f"job {job.job_id} did not run on {pool}",
        )
        check_rule(job.service_units > 0, f"job {job.job_id} was not charged")
        check_rule(
            not Adjustment.objects.filter(job=job, kind=Adjustment.Kind.REFUND).exists(),
            f"job {job.job_id} was refunded already",
        )
        amount = job.service_units
    check_rule(amount is not None, "give an amount or a job")
    assert amount is not None
    value = su_amount(amount, "the refund")
    check_rule(value > 0, "a refund must be positive")
    _slurm_limits_follow(pool)
    return Adjustment.objects.create(
        project=project, budget_period=_period_for(project, pool, on), kind=Adjustment.Kind.REFUND,
        amount_su=value, job=job, actor=actor, reason=reason,
    )  # fmt: skip


@transaction.atomic
def adjustment_top_up(
    *, project: Project, pool: ResourcePool, amount: Decimal, actor: User, reason: str,
    on: date | None = None,
) -> Adjustment:  # fmt: skip
    """Add SU to the current budget period (staff, or a granted top-up request)."""
    require(is_staff(actor) or chairs_any_round(actor), "only centre staff top up balances")
    project_writable_check(project)
    check_rule(bool(reason.strip()), "a top-up needs a reason")
    value = su_amount(amount, "the top-up")
    check_rule(value > 0, "a top-up must be positive")
    _slurm_limits_follow(pool)
    return Adjustment.objects.create(
        project=project, budget_period=_period_for(project, pool, on), kind=Adjustment.Kind.TOP_UP,
        amount_su=value, actor=actor, reason=reason,
    )  # fmt: skip


@transaction.atomic
def adjustment_transfer(
    *,
    source: Project,
    target: Project,
    pool: ResourcePool,
    amount: Decimal,
    actor: User,
    reason: str,
    on: date | None = None,
) -> tuple[Adjustment, Adjustment]:
    """Move SU between projects on one pool: staff, or the source project's PI. The two sides
    cancel out exactly, so a transfer never creates SU."""
    require(
        is_staff(actor) or is_pi(actor, source),
        f"only centre staff or the PI of {source} transfer its SU",
    )
    project_writable_check(source)
    project_writable_check(target)
    check_rule(source.pk != target.pk, "a transfer needs two different projects")
    check_rule(bool(reason.strip()), "a transfer needs a reason")
    value = su_amount(amount, "the transfer")
    check_rule(value > 0, "a transfer must be positive")
    source_period = _period_for(source, pool, on)
    target_period = _period_for(target, pool, on)
    # Lock the source's period so two transfers cannot both spend the same remaining SU.
    BudgetPeriod.objects.select_for_update().filter(pk=source_period.pk).first()
    remaining = balance_for_period(period=source_period, on=on or pool_today(pool)).remaining_su
    check_rule(value <= remaining, f"{source} has {remaining} SU left on {pool}, less than {value}")
    link = uuid.uuid4()
    out = Adjustment.objects.create(
        project=source, budget_period=source_period, kind=Adjustment.Kind.TRANSFER_OUT,
        amount_su=-value, transfer_id=link, actor=actor, reason=f"to {target}: {reason}",
    )  # fmt: skip
    into = Adjustment.objects.create(
        project=target, budget_period=target_period, kind=Adjustment.Kind.TRANSFER_IN,
        amount_su=value, transfer_id=link, actor=actor, reason=f"from {source}: {reason}",
    )  # fmt: skip
    _slurm_limits_follow(pool)
    return out, into
