"""Write-side operations of the allocations app. Each one checks who is acting first, and
either does all of its work or none of it (one transaction)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounting.clusters.quotes import QuoteRequest
from accounting.clusters.selectors import quote_get
from accounting.models import Cluster, Job, Partition
from allocations import budget
from allocations.access import can_decide, chairs_any_round, has_conflict, is_committee
from allocations.models import (
    Adjustment,
    Allocation,
    AllocationRequest,
    AllocationRound,
    BudgetPeriod,
    CommitteeMember,
    RequestAmount,
    RequestEstimate,
    RequestTransition,
    Review,
    RoundPool,
)
from allocations.notifications import (
    notify_decision,
    notify_request_submitted,
    notify_review_assigned,
)
from allocations.selectors import balance_for_period, budget_period_at, pool_today
from allocations.slurm_accounts import associations_parse
from kit.access import is_staff, require
from kit.errors import ApplicationError
from kit.queue import task_enqueue
from projects.access import can_manage_project, is_pi
from projects.accounts import project_code_of
from projects.models import Membership, Project, ResourcePool
from projects.selectors import account_suffixes, project_for_account
from projects.services import projects_created_announce

State = AllocationRequest.State
ZERO = Decimal(0)


class AllocationError(ApplicationError):
    """A rule of the allocation process forbids this; the message says which."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AllocationError(message)


def _su(amount: Decimal | int | str, what: str = "amount") -> Decimal:
    value = Decimal(str(amount))
    _check(value.is_finite(), f"{what} must be a number")
    _check(value == value.quantize(budget.SU_QUANTUM), f"{what} has more than 6 decimal places")
    return value


# --- Rounds ---------------------------------------------------------------------------------


@transaction.atomic
def round_create(
    *,
    name: str,
    opens_at: datetime,
    closes_at: datetime,
    period_start: date,
    period_end: date,
    available: Mapping[ResourcePool, Decimal],
    chair: User,
    committee: Iterable[User] = (),
    actor: User,
) -> AllocationRound:
    """Staff open a call: dates, the period grants cover, SU per pool, the committee."""
    require(is_staff(actor), "only centre staff create allocation rounds")
    _check(opens_at < closes_at, "a round must open before it closes")
    _check(period_start < period_end, "the period a round grants must not be empty")
    round_ = AllocationRound.objects.create(
        name=name, opens_at=opens_at, closes_at=closes_at,
        period_start=period_start, period_end=period_end,
    )  # fmt: skip
    for pool, amount in available.items():
        value = _su(amount, f"SU available on {pool}")
        _check(value >= 0, f"SU available on {pool} cannot be negative")
        RoundPool.objects.create(round=round_, pool=pool, available_su=value)
    CommitteeMember.objects.create(round=round_, user=chair, is_chair=True)
    for member in committee:
        if member.pk != chair.pk:
            CommitteeMember.objects.get_or_create(round=round_, user=member)
    return round_


# --- Requests -------------------------------------------------------------------------------


def _transition(request: AllocationRequest, to_state: str, actor: User, note: str = "") -> None:
    RequestTransition.objects.create(
        request=request, from_state=request.state, to_state=to_state, actor=actor, note=note
    )
    request.state = to_state
    request.save(update_fields=["state", "decided_at", "decision_reason"])


def _round_is_open(round_: AllocationRound, at: datetime) -> bool:
    return round_.opens_at <= at < round_.closes_at


def _set_amounts(request: AllocationRequest, amounts: Mapping[ResourcePool, Decimal]) -> None:
    offered = set(RoundPool.objects.filter(round=request.round).values_list("pool_id", flat=True))
    for pool, amount in amounts.items():
        _check(pool.pk in offered, f"the round {request.round} offers no SU on {pool}")
        value = _su(amount, f"SU requested on {pool}")
        _check(value >= 0, f"SU requested on {pool} cannot be negative")
        RequestAmount.objects.update_or_create(
            request=request, pool=pool, defaults={"requested_su": value}
        )


@transaction.atomic
def request_create(
    *,
    round_: AllocationRound,
    project: Project,
    actor: User,
    kind: str = AllocationRequest.Kind.NEW,
    justification: str = "",
    amounts: Mapping[ResourcePool, Decimal] | None = None,
) -> AllocationRequest:
    """A PI starts a request (a draft) in a round; a top-up may come at any time of the period."""
    require(can_manage_project(actor, project), f"only the PI of {project} applies for it")
    now = timezone.now()
    if kind == AllocationRequest.Kind.NEW:
        _check(_round_is_open(round_, now), f"the round {round_} is not open for applications")
        _check(
            not AllocationRequest.objects.filter(round=round_, project=project, kind=kind).exists(),
            f"{project} already has an application in {round_}",
        )
    request = AllocationRequest.objects.create(
        round=round_, project=project, kind=kind, justification=justification, created_by=actor
    )
    RequestTransition.objects.create(request=request, to_state=State.DRAFT, actor=actor)
    _set_amounts(request, amounts or {})
    return request


def _editable_by(request: AllocationRequest, actor: User) -> None:
    require(
        can_manage_project(actor, request.project),
        f"only the PI of {request.project} edits its request",
    )
    _check(
        request.state == State.DRAFT, f"a {request.get_state_display()} request cannot be edited"
    )


@transaction.atomic
def request_update(
    *,
    request: AllocationRequest,
    actor: User,
    justification: str | None = None,
    amounts: Mapping[ResourcePool, Decimal] | None = None,
) -> AllocationRequest:
    _editable_by(request, actor)
    if justification is not None:
        request.justification = justification
        request.save(update_fields=["justification"])
    if amounts is not None:
        _set_amounts(request, amounts)
    return request


@transaction.atomic
def request_estimate_add(
    *,
    request: AllocationRequest,
    actor: User,
    partition: Partition,
    jobs: int,
    quote: QuoteRequest,
    description: str = "",
) -> RequestEstimate:
    """Add an estimate line priced by the quote engine: ``jobs`` times one job's SU."""
    _editable_by(request, actor)
    _check(jobs >= 1, "an estimate line covers at least one job")
    _, charge = quote_get(partition=partition, request=quote)
    return RequestEstimate.objects.create(
        request=request, partition=partition, description=description, jobs=jobs,
        nodes=quote.nodes, hours=quote.hours, cores_per_node=quote.cores_per_node,
        gpus_per_node=quote.gpus_per_node, memory_per_node_mb=quote.memory_per_node_mb,
        service_units=charge.service_units * jobs,
    )  # fmt: skip


@transaction.atomic
def request_submit(*, request: AllocationRequest, actor: User) -> AllocationRequest:
    """The PI submits a draft while the round is open (a top-up any time)."""
    _editable_by(request, actor)
    if request.kind == AllocationRequest.Kind.NEW:
        _check(
            _round_is_open(request.round, timezone.now()), f"the round {request.round} is closed"
        )
    _check(request.amounts.filter(requested_su__gt=0).exists(), "a request must ask for some SU")
    _transition(request, State.SUBMITTED, actor)
    notify_request_submitted(request)
    return request


@transaction.atomic
def request_review_start(*, request: AllocationRequest, actor: User) -> AllocationRequest:
    """The chair (or staff) opens a submitted request for review."""
    require(
        can_decide(actor, request),
        "only the round's chair opens requests for review",
    )
    _check(
        request.state == State.SUBMITTED,
        f"a {request.get_state_display()} request cannot go to review",
    )
    _transition(request, State.UNDER_REVIEW, actor)
    notify_review_assigned(request)
    return request


@transaction.atomic
def review_submit(
    *, request: AllocationRequest, reviewer: User, score: int, comment: str = ""
) -> Review:
    """A committee member scores (1-5) and comments, never on a project they belong to."""
    require(is_committee(reviewer, request.round), "only the round's committee reviews requests")
    require(
        not has_conflict(reviewer, request.project),
        f"conflict of interest: {reviewer} belongs to {request.project}",
    )
    _check(
        request.state == State.UNDER_REVIEW,
        f"a {request.get_state_display()} request is not under review",
    )
    _check(isinstance(score, int) and 1 <= score <= 5, "a score is a whole number from 1 to 5")
    review, _ = Review.objects.update_or_create(
        request=request, reviewer=reviewer, defaults={"score": score, "comment": comment}
    )
    return review


@transaction.atomic
def request_decide(
    *,
    request: AllocationRequest,
    actor: User,
    granted: Mapping[ResourcePool, Decimal],
    reason: str = "",
) -> AllocationRequest:
    """The chair grants SU per pool (possibly other than requested) with a reason.

    An application becomes allocations over the round's period, split into budget periods;
    a top-up adds SU to the project's current budget period on each pool.
    """
    require(can_decide(actor, request), "only the round's chair grants SU")
    _check(
        request.state == State.UNDER_REVIEW,
        f"a {request.get_state_display()} request cannot be decided",
    )
    amounts = {amount.pool_id: amount for amount in request.amounts.select_related("pool")}
    for pool in granted:
        _check(pool.pk in amounts, f"{request.project} did not ask for SU on {pool}")
    decided = {
        pool_id: _su(granted.get(amount.pool, ZERO), "SU granted")
        for pool_id, amount in amounts.items()
    }
    _check(all(value >= 0 for value in decided.values()), "a grant cannot be negative")
    differs = any(decided[pool_id] != amounts[pool_id].requested_su for pool_id in amounts)
    _check(bool(reason.strip()) or not differs, "say why the grant differs from the request")
    if request.kind == AllocationRequest.Kind.NEW:
        _check_round_capacity(request, decided)

    now = timezone.now()
    for pool_id, amount in amounts.items():
        amount.granted_su = decided[pool_id]
        amount.save(update_fields=["granted_su"])
        if decided[pool_id] == 0:
            continue
        if request.kind == AllocationRequest.Kind.NEW:
            allocation_grant(
                project=request.project, pool=amount.pool, amount=decided[pool_id],
                period_start=request.round.period_start, period_end=request.round.period_end,
                actor=actor, reason=reason, request=request,
            )  # fmt: skip
        else:
            adjustment_top_up(
                project=request.project, pool=amount.pool, amount=decided[pool_id], actor=actor,
                reason=f"top-up request {request.pk}: {reason or 'granted as requested'}",
            )  # fmt: skip
    if not any(decided.values()):
        outcome = State.REJECTED
    elif differs:
        outcome = State.PARTIALLY_GRANTED
    else:
        outcome = State.GRANTED
    request.decided_at = now
    request.decision_reason = reason
    _transition(request, outcome, actor, note=reason)
    notify_decision(request)
    return request


def _check_round_capacity(request: AllocationRequest, decided: Mapping[int, Decimal]) -> None:
    for item in RoundPool.objects.filter(round=request.round).select_related("pool"):
        if item.pool_id not in decided:
            continue
        already = (
            RequestAmount.objects.filter(request__round=request.round, pool=item.pool)
            .exclude(request=request)
            .exclude(granted_su__isnull=True)
            .aggregate(total=Sum("granted_su"))["total"]
        )
        total = (already or ZERO) + decided[item.pool_id]
        _check(
            total <= item.available_su,
            f"the round has {item.available_su} SU on {item.pool}; "
            f"this grant would bring its grants to {total}",
        )


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
) -> Allocation:
    """Grant SU on a pool for a period, split into budget periods by the pool's policy."""
    allowed = is_staff(actor) or (request is not None and can_decide(actor, request))
    require(allowed, "only centre staff and a round's chair grant SU")
    value = _su(amount, "the grant")
    _check(value >= 0, "a grant cannot be negative")
    spans = budget.periods(period_start, period_end, months=pool.budget_months)
    if custom_budgets is not None or pool.split == ResourcePool.Split.CUSTOM:
        _check(custom_budgets is not None, f"{pool} splits grants by hand: give the budgets")
        assert custom_budgets is not None
        budgets = [_su(item, "a budget") for item in custom_budgets]
        _check(len(budgets) == len(spans), f"the grant has {len(spans)} budget periods")
        _check(sum(budgets, ZERO) == value, "the budgets must add up to the grant")
        _check(all(item >= 0 for item in budgets), "a budget cannot be negative")
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
    _slurm_limits_follow(pool)
    return allocation


def _slurm_limits_follow(pool: ResourcePool) -> None:
    """A balance on ``pool`` moved: when the pool says so, Slurm's GrpTRESMins limits of its
    cluster are set again after the commit, without review (docs/slurm.md)."""
    if pool.slurm_limits_auto:
        task_enqueue(
            name="allocations.tasks.slurm_limits_refresh", kwargs={"cluster_id": pool.cluster_id}
        )


def charges_booked_received(*, cluster_id: int, **kwargs: object) -> None:
    """An import charged jobs on the cluster (``accounting.signals.charges_booked``): its
    balances moved, so its limits follow where a pool of the cluster says so."""
    if ResourcePool.objects.filter(cluster_id=cluster_id, slurm_limits_auto=True).exists():
        task_enqueue(
            name="allocations.tasks.slurm_limits_refresh", kwargs={"cluster_id": cluster_id}
        )


# --- Adjustments ----------------------------------------------------------------------------


def _period_for(project: Project, pool: ResourcePool, on: date | None) -> BudgetPeriod:
    day = on or pool_today(pool)
    period = budget_period_at(project=project, pool=pool, on=day)
    _check(period is not None, f"{project} has no budget period on {pool} on {day}")
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
    _check(bool(reason.strip()), "a refund needs a reason")
    if job is not None:
        _check(job.project_id == project.pk, f"job {job.job_id} is not a job of {project}")
        _check(
            pool.partitions.filter(pk=job.partition_id).exists(),
            f"job {job.job_id} did not run on {pool}",
        )
        _check(job.service_units > 0, f"job {job.job_id} was not charged")
        _check(
            not Adjustment.objects.filter(job=job, kind=Adjustment.Kind.REFUND).exists(),
            f"job {job.job_id} was refunded already",
        )
        amount = job.service_units
    _check(amount is not None, "give an amount or a job")
    assert amount is not None
    value = _su(amount, "the refund")
    _check(value > 0, "a refund must be positive")
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
    _check(bool(reason.strip()), "a top-up needs a reason")
    value = _su(amount, "the top-up")
    _check(value > 0, "a top-up must be positive")
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
    _check(source.pk != target.pk, "a transfer needs two different projects")
    _check(bool(reason.strip()), "a transfer needs a reason")
    value = _su(amount, "the transfer")
    _check(value > 0, "a transfer must be positive")
    source_period = _period_for(source, pool, on)
    target_period = _period_for(target, pool, on)
    # Lock the source's period so two transfers cannot both spend the same remaining SU.
    BudgetPeriod.objects.select_for_update().filter(pk=source_period.pk).first()
    remaining = balance_for_period(period=source_period, on=on or pool_today(pool)).remaining_su
    _check(value <= remaining, f"{source} has {remaining} SU left on {pool}, less than {value}")
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


# --- Onboarding from Slurm ------------------------------------------------------------------


@dataclass
class AccountsSyncResult:
    projects_created: list[str] = field(default_factory=list)
    users_created: list[str] = field(default_factory=list)
    memberships_created: list[tuple[str, str]] = field(default_factory=list)
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    other_clusters: dict[str, int] = field(default_factory=dict)


@transaction.atomic
def slurm_accounts_sync(*, lines: Iterable[str], cluster: Cluster | str) -> AccountsSyncResult:
    """Create projects and memberships from sacctmgr associations; idempotent, additive.

    ``cluster`` is the portal cluster (its Slurm name selects the rows), or the Slurm name of a
    cluster the portal does not know. An account books to the project the import would book its
    jobs to on that cluster (one rule, ``projects.selectors.project_for_account``, over the
    cluster's pools): a pool's own account (``code-gpu``) joins its project. Slurm users without
    a portal login get one with no usable password (they sign in through the centre's identity
    provider or after a password reset). Nothing is removed.
    """
    slurm_name = cluster.slurm_name if isinstance(cluster, Cluster) else cluster
    associations = associations_parse(lines, cluster=slurm_name)
    result = AccountsSyncResult(
        skipped_lines=associations.skipped_lines, other_clusters=dict(associations.other_clusters)
    )
    user_model = get_user_model()
    suffixes = account_suffixes(cluster_ids=[cluster.pk] if isinstance(cluster, Cluster) else [])
    for account, usernames in sorted(associations.accounts.items()):
        project = project_for_account(account, suffixes=suffixes)
        if project is None:
            code = project_code_of(account, suffixes)
            project = Project.objects.create(code=code, title=f"{code} (from Slurm)")
            result.projects_created.append(code)
        for username in sorted(usernames):
            user = user_model.objects.filter(username=username).first()
            if user is None:
                user = user_model(username=username)
                user.set_unusable_password()
                user.save()
                result.users_created.append(username)
            _, joined = Membership.objects.get_or_create(project=project, user=user)
            if joined:
                result.memberships_created.append((account, username))
    projects_created_announce(codes=result.projects_created)
    return result
