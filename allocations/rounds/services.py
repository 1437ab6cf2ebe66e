"""Write-side operations of rounds, requests and reviews: a round opens, a PI applies, the
committee reviews and the chair decides (which grants SU through ``allocations.grants``). Each
one checks who is acting first, and either does all of its work or none of it (one transaction)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounting.clusters.quotes import QuoteRequest
from accounting.clusters.selectors import quote_get
from accounting.models import Partition
from allocations.access import can_decide, has_conflict, is_committee
from allocations.grants.services import adjustment_top_up, allocation_grant, check_rule, su_amount
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    RequestAmount,
    RequestEstimate,
    RequestTransition,
    Review,
    RoundPool,
)
from allocations.rounds.notifications import (
    notify_decision,
    notify_request_submitted,
    notify_review_assigned,
)
from kit.access import is_staff, require
from projects.access import can_manage_project, project_writable_check
from projects.models import Project, ResourcePool

State = AllocationRequest.State
ZERO = Decimal(0)


# --- Rounds ---------------------------------------------------------------------------------


def _round_dates_check(
    *, opens_at: datetime, closes_at: datetime, period_start: date, period_end: date
) -> None:
    check_rule(opens_at < closes_at, "a round must open before it closes", field="closes_at")
    check_rule(
        period_start < period_end,
        "the period a round grants must not be empty: its end comes after its start",
        field="period_end",
    )


def _round_name_check(name: str, round_: AllocationRound | None = None) -> None:
    check_rule(bool(name.strip()), "a round needs a name", field="name")
    taken = AllocationRound.objects.filter(name=name)
    if round_ is not None:
        taken = taken.exclude(pk=round_.pk)
    check_rule(not taken.exists(), f"a round named {name!r} exists already", field="name")


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
    _round_name_check(name)
    _round_dates_check(
        opens_at=opens_at, closes_at=closes_at, period_start=period_start, period_end=period_end
    )
    round_ = AllocationRound.objects.create(
        name=name, opens_at=opens_at, closes_at=closes_at,
        period_start=period_start, period_end=period_end,
    )  # fmt: skip
    for pool, amount in available.items():
        round_pool_set(round_=round_, pool=pool, available=amount, actor=actor)
    CommitteeMember.objects.create(round=round_, user=chair, is_chair=True)
    for member in committee:
        if member.pk != chair.pk:
            CommitteeMember.objects.get_or_create(round=round_, user=member)
    return round_


@transaction.atomic
def round_update(
    *,
    round_: AllocationRound,
    actor: User,
    name: str,
    opens_at: datetime,
    closes_at: datetime,
    period_start: date,
    period_end: date,
    available: Mapping[ResourcePool, Decimal] | None = None,
) -> AllocationRound:
    """Staff change a round's name, window or period, and the SU it offers on the pools in
    ``available`` (``round_pool_set``), all or nothing. The period stays as it is once the
    round has granted SU: the grants cover it."""
    require(is_staff(actor), "only centre staff change allocation rounds")
    round_ = AllocationRound.objects.select_for_update().get(pk=round_.pk)
    _round_name_check(name, round_)
    _round_dates_check(
        opens_at=opens_at, closes_at=closes_at, period_start=period_start, period_end=period_end
    )
    if (period_start, period_end) != (round_.period_start, round_.period_end):
        check_rule(
            not RequestAmount.objects.filter(request__round=round_, granted_su__gt=0).exists(),
            f"the round {round_} has granted SU for its period; the period cannot change",
            field="period_start",
        )
    round_.name, round_.opens_at, round_.closes_at = name, opens_at, closes_at
    round_.period_start, round_.period_end = period_start, period_end
    round_.save(update_fields=["name", "opens_at", "closes_at", "period_start", "period_end"])
    for pool, amount in (available or {}).items():
        round_pool_set(round_=round_, pool=pool, available=amount, actor=actor)
    return round_


@transaction.atomic
def round_close(*, round_: AllocationRound, actor: User) -> AllocationRound:
    """Staff close an open round now: no more applications or submissions."""
    require(is_staff(actor), "only centre staff close allocation rounds")
    round_ = AllocationRound.objects.select_for_update().get(pk=round_.pk)
    now = timezone.now()
    check_rule(_round_is_open(round_, now), f"the round {round_} is not open")
    round_.closes_at = now
    round_.save(update_fields=["closes_at"])
    return round_


def _granted_in_round(round_: AllocationRound, pool: ResourcePool) -> Decimal:
    total = RequestAmount.objects.filter(
        request__round=round_, request__kind=AllocationRequest.Kind.NEW, pool=pool
    ).aggregate(total=Sum("granted_su"))["total"]
    return total or ZERO


@transaction.atomic
def round_pool_set(
    *, round_: AllocationRound, pool: ResourcePool, available: Decimal, actor: User
) -> RoundPool:
    """Staff set the SU a round offers on a pool (a pool not offered yet is added); never
    below zero nor below what the round has granted on it already."""
    require(is_staff(actor), "only centre staff set what a round offers")
    field = f"pool_{pool.pk}"
    try:
        value = su_amount(available, f"SU available on {pool}")
    except ArithmeticError:  # Decimal("ten"): not a number at all
        value = Decimal("NaN")
    check_rule(value.is_finite(), f"SU available on {pool} must be a number", field=field)
    check_rule(value >= 0, f"SU available on {pool} cannot be negative", field=field)
    granted = _granted_in_round(round_, pool)
    check_rule(
        value >= granted,
        f"the round has granted {granted.normalize():f} SU on {pool} already; it cannot offer less",
        field=field,
    )
    offer, _ = RoundPool.objects.update_or_create(
        round=round_, pool=pool, defaults={"available_su": value}
    )
    return offer


@transaction.atomic
def committee_add(
    *, round_: AllocationRound, user: User, actor: User, chair: bool = False
) -> CommitteeMember:
    """Staff seat someone on a round's committee; as chair, the chair before stays on the
    committee as a member (a round has one chair)."""
    require(is_staff(actor), "only centre staff seat a round's committee")
    check_rule(user.is_active, f"{user} cannot sign in and cannot review", field="user")
    if chair:
        for before in CommitteeMember.objects.filter(round=round_, is_chair=True).exclude(
            user=user
        ):  # one by one, so that the audit log records each
            before.is_chair = False
            before.save(update_fields=["is_chair"])
    seat, created = CommitteeMember.objects.get_or_create(
        round=round_, user=user, defaults={"is_chair": chair}
    )
    if not created and chair and not seat.is_chair:
        seat.is_chair = True
        seat.save(update_fields=["is_chair"])
    return seat


@transaction.atomic
def committee_remove(*, round_: AllocationRound, user: User, actor: User) -> None:
    """Staff take someone off a round's committee; the chair stays until another is named."""
    require(is_staff(actor), "only centre staff change a round's committee")
    seat = CommitteeMember.objects.filter(round=round_, user=user).first()
    check_rule(seat is not None, f"{user} is not on the committee of {round_}")
    assert seat is not None
    check_rule(not seat.is_chair, f"{user} chairs {round_}; name another chair first", field="user")
    seat.delete()


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
        check_rule(pool.pk in offered, f"the round {request.round} offers no SU on {pool}")
        value = su_amount(amount, f"SU requested on {pool}")
        check_rule(value >= 0, f"SU requested on {pool} cannot be negative")
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
    project_writable_check(project)
    now = timezone.now()
    if kind == AllocationRequest.Kind.NEW:
        check_rule(_round_is_open(round_, now), f"the round {round_} is not open for applications")
        check_rule(
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
    project_writable_check(request.project)
    check_rule(
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
    check_rule(jobs >= 1, "an estimate line covers at least one job")
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
        check_rule(
            _round_is_open(request.round, timezone.now()), f"the round {request.round} is closed"
        )
    check_rule(
        request.amounts.filter(requested_su__gt=0).exists(), "a request must ask for some SU"
    )
    _transition(request, State.SUBMITTED, actor)
    notify_request_submitted(request)
    return request


@transaction.atomic
def request_review_start(*, request: AllocationRequest, actor: User) -> AllocationRequest:
    """The chair (or staff) opens a submitted request for review."""
    require(
        can_decide(actor, request),
        "only the round's chair opens requests for review, never of a project of their own",
    )
    project_writable_check(request.project)
    check_rule(
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
    project_writable_check(request.project)
    check_rule(
        request.state == State.UNDER_REVIEW,
        f"a {request.get_state_display()} request is not under review",
    )
    check_rule(isinstance(score, int) and 1 <= score <= 5, "a score is a whole number from 1 to 5")
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
    require(
        can_decide(actor, request),
        "only the round's chair grants SU, never to a project of their own",
    )
    project_writable_check(request.project)
    check_rule(
        request.state == State.UNDER_REVIEW,
        f"a {request.get_state_display()} request cannot be decided",
    )
    amounts = {amount.pool_id: amount for amount in request.amounts.select_related("pool")}
    for pool in granted:
        check_rule(pool.pk in amounts, f"{request.project} did not ask for SU on {pool}")
    decided = {
        pool_id: su_amount(granted.get(amount.pool, ZERO), "SU granted")
        for pool_id, amount in amounts.items()
    }
    check_rule(all(value >= 0 for value in decided.values()), "a grant cannot be negative")
    differs = any(decided[pool_id] != amounts[pool_id].requested_su for pool_id in amounts)
    check_rule(bool(reason.strip()) or not differs, "say why the grant differs from the request")
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
        check_rule(
            total <= item.available_su,
            f"the round has {item.available_su} SU on {item.pool}; "
            f"this grant would bring its grants to {total}",
        )
