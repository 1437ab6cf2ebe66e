"""Read queries of rounds, requests and reviews: the chair's round overview, and what the
request and round pages show.

Who sees what is decided in ``projects/access.py`` (projects) and ``allocations/access.py``
(requests, rounds); these functions only shape what the pages show. Everything a user may not
see is answered with "not found" by the pages, so that its existence does not leak."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Avg, Count, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from accounting.models import Partition
from allocations import access, request_states
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    ProgressReport,
    RequestAmount,
    Review,
    ReviewAssignment,
    RoundPool,
)
from allocations.rounds.letters import DecisionLetter, LetterPool
from kit.access import Actor, is_staff, require
from kit.calendar import last_day
from people.mail import portal_link
from projects import access as projects_access
from projects.models import Project, ResourcePool

ZERO = Decimal(0)


@dataclass(frozen=True)
class RoundPoolSummary:
    pool: ResourcePool
    available_su: Decimal
    requested_su: Decimal
    granted_su: Decimal

    @property
    def left_su(self) -> Decimal:
        """What the round can still grant on the pool."""
        return self.available_su - self.granted_su


@dataclass(frozen=True)
class RoundRequestSummary:
    request: AllocationRequest
    requested: dict[int, Decimal]
    average_score: Decimal | None  # None without a review, or for a request in conflict
    reviews: int | None  # None for a request in conflict
    conflict: bool = False  # the actor's own project's: no scores shown, no decision


def round_overview(*, round_: AllocationRound, actor: Actor) -> dict[str, Any]:
    """The chair's view: requested vs available SU per pool, and each request's scores, except
    the scores of the actor's own projects' requests (``access.projects_in_conflict``)."""
    require(
        access.is_chair(actor, round_) or is_staff(actor),
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
    conflicted = set(access.projects_in_conflict(user=actor).values_list("pk", flat=True))
    summaries = []
    for request in requests:
        conflict = request.project_id in conflicted
        average = request.average_score
        summaries.append(
            RoundRequestSummary(
                request=request,
                requested={amount.pool_id: amount.requested_su for amount in request.amounts.all()},
                average_score=(
                    Decimal(average).quantize(Decimal("0.01"))
                    if average is not None and not conflict
                    else None
                ),
                reviews=None if conflict else request.review_count,
                conflict=conflict,
            )
        )
    # Requests in conflict last: a place in the ranking would tell their score.
    summaries.sort(key=lambda summary: summary.conflict)
    return {"round": round_, "pools": pools, "requests": summaries}


@dataclass(frozen=True)
class RoundSeat:
    """A round as a user sees it: their committee seat, if any, and whether it is open."""

    round: AllocationRound
    committee: bool
    chair: bool
    is_open: bool


def rounds_for_user(*, user: Actor) -> list[RoundSeat]:
    """Rounds open for applications, and every round the user sits on (staff: all rounds)."""
    if not isinstance(user, User):
        return []
    now = timezone.now()
    seats = {
        seat.round_id: seat.is_chair for seat in CommitteeMember.objects.filter(user_id=user.pk)
    }
    rounds = AllocationRound.objects.order_by("-opens_at")
    if not is_staff(user):
        rounds = rounds.filter(Q(pk__in=list(seats)) | Q(opens_at__lte=now, closes_at__gt=now))
    return [
        RoundSeat(
            round=round_,
            committee=round_.pk in seats,
            chair=seats.get(round_.pk, False),
            is_open=round_.opens_at <= now < round_.closes_at,
        )
        for round_ in rounds
    ]


def round_for_committee(*, user: Actor, pk: int) -> RoundSeat | None:
    """A round whose committee the user sits on (staff: any round), else ``None``."""
    round_ = access.rounds_sat_on(user=user).filter(pk=pk).first()
    if round_ is None or not isinstance(user, User):
        return None
    seat = CommitteeMember.objects.filter(round=round_, user_id=user.pk).first()
    now = timezone.now()
    return RoundSeat(
        round=round_,
        committee=seat is not None,
        chair=bool(seat and seat.is_chair),
        is_open=round_.opens_at <= now < round_.closes_at,
    )


def open_rounds() -> QuerySet[AllocationRound]:
    now = timezone.now()
    return AllocationRound.objects.filter(opens_at__lte=now, closes_at__gt=now).order_by(
        "closes_at"
    )


def changes_to_decide(*, round_: AllocationRound, user: Actor) -> list[dict[str, object]]:
    """Top-ups, extensions and appeals submitted to the round's chair (``deciding_round``),
    oldest first, each marked when it is of the user's own project (staff decide it)."""
    requests = (
        AllocationRequest.objects.filter(access.decided_in_rounds([round_.pk]))
        .filter(state=AllocationRequest.State.SUBMITTED)
        .select_related("project")
        .order_by("created_at", "pk")
    )
    own = set(access.projects_in_conflict(user=user).values_list("pk", flat=True))
    return [{"request": request, "conflict": request.project_id in own} for request in requests]


def changes_for_staff() -> list[AllocationRequest]:
    """Top-ups, extensions and appeals submitted that no round's chair decides (``deciding_round``
    is None: the grant was made outside a round, by staff or as a project request's start-up
    allocation): staff decide them, oldest first."""
    requests = (
        AllocationRequest.objects.filter(
            round__isnull=True, state=AllocationRequest.State.SUBMITTED
        )
        .select_related("project", "grant__request", "appeal_of__grant__request")
        .order_by("created_at", "pk")
    )
    return [request for request in requests if access.deciding_round(request) is None]


def round_requests_for_committee(
    *, round_: AllocationRound, user: Actor
) -> list[dict[str, object]]:
    """The round's submitted requests with the user's own review, for a committee member."""
    requests = (
        AllocationRequest.objects.filter(round=round_)
        .exclude(state=AllocationRequest.State.DRAFT)
        .select_related("project")
        .prefetch_related("amounts__pool")
        .order_by("project__code", "pk")
    )
    mine = {
        review.request_id: review
        for review in Review.objects.filter(request__round=round_, reviewer_id=user.pk)
    }
    own = set(projects_access.projects_of_member(user=user).values_list("pk", flat=True))
    # access.is_assigned_reviewer, in one query: requests with assignments, and the user's.
    assigned: dict[int, bool] = {}
    for request_id, reviewer_id in ReviewAssignment.objects.filter(
        request__round=round_
    ).values_list("request_id", "reviewer_id"):
        assigned[request_id] = assigned.get(request_id, False) or reviewer_id == user.pk
    return [
        {
            "request": request,
            "my_review": mine.get(request.pk),
            "conflict": request.project_id in own,  # access.has_conflict, in one query
            "not_assigned": not assigned.get(request.pk, True),
        }
        for request in requests
    ]


def request_for_user(*, user: Actor, pk: int) -> AllocationRequest | None:
    """A request the user may see (``access.requests_visible``: never another project's
    draft), else ``None``."""
    return (
        access.requests_visible(user=user)
        .filter(pk=pk)
        .select_related("project", "round", "created_by")
        .first()
    )


def requests_of_project(*, project: Project) -> QuerySet[AllocationRequest]:
    return (
        AllocationRequest.objects.filter(project=project)
        .select_related("round", "project")
        .order_by("-created_at")
    )


def round_pools(*, round_: AllocationRound) -> list[RoundPool]:
    return list(
        RoundPool.objects.filter(round=round_).select_related("pool").order_by("pool__name")
    )


def request_next_step(*, request: AllocationRequest) -> str:
    """What happens next to a request, and who does it, in one sentence."""
    state, round_ = request.state, request.round
    deciding = access.deciding_round(request)
    chair = (
        CommitteeMember.objects.filter(round=deciding, is_chair=True).select_related("user").first()
        if deciding
        else None
    )
    chair_name = f"the round's chair ({chair.user.get_username()})" if chair else "the chair"
    State = AllocationRequest.State
    if state == State.DRAFT:
        closes = f", before the round closes on {round_.closes_at:%Y-%m-%d}" if round_ else ""
        return f"Next: the PI (or a manager) completes and submits the draft{closes}."
    if state == State.SUBMITTED and not request.in_round:
        who = chair_name if chair else "centre staff"
        kind = request.get_kind_display()
        article = "an" if kind[:1] in "aeiou" else "a"
        return f"Next: {who} decides it ({article} {kind} has no committee review)."
    if state == State.SUBMITTED:
        return f"Next: {chair_name} opens it for review; the committee cannot score it before."
    if state == State.UNDER_REVIEW:
        seats = CommitteeMember.objects.filter(round=round_).count()
        done = request.reviews.count()
        return (
            f"Next: the committee scores it ({done} of {seats} reviews in), then {chair_name} "
            "decides and grants."
        )
    decided = request.decided_at
    return f"Decided{f' on {decided:%Y-%m-%d}' if decided else ''}: nothing more to do."


def request_partitions(*, request: AllocationRequest) -> list[Partition]:
    """The partitions of the pools of the request's round (outside rounds: of the pools it
    asks on): what its estimate may name."""
    pools: Any = (
        RoundPool.objects.filter(round=request.round).values("pool_id")
        if request.in_round
        else RequestAmount.objects.filter(request=request).values("pool_id")
    )
    return list(
        Partition.objects.filter(pool_membership__pool_id__in=pools)
        .select_related("cluster")
        .order_by("cluster__name", "name")
    )


def request_estimate_totals(*, request: AllocationRequest) -> dict[int, Decimal]:
    """The SU of the request's estimate per pool (by pool id)."""
    rows = (
        request.estimates.values("partition__pool_membership__pool")
        .annotate(total=Sum("service_units"))
        .order_by()
    )
    return {row["partition__pool_membership__pool"]: row["total"] for row in rows}


def request_amounts(*, request: AllocationRequest) -> QuerySet[RequestAmount]:
    """What the request asks for, per pool, by pool name."""
    return (
        RequestAmount.objects.filter(request=request).select_related("pool").order_by("pool__name")
    )


def request_reviews(*, request: AllocationRequest) -> QuerySet[Review]:
    """The request's reviews, oldest first, with their reviewers. Who may read them is the
    caller's check (``access.reviews_visible``, ``access.can_decide``)."""
    return request.reviews.select_related("reviewer").order_by("created_at")


def review_average(*, request: AllocationRequest) -> Decimal | None:
    """The mean score of the request's reviews; None without a review."""
    found = request.reviews.aggregate(total=Sum("score"), count=Count("pk"))
    if not found["count"]:
        return None
    return Decimal(found["total"]) / found["count"]


def progress_report_of(request: AllocationRequest) -> ProgressReport | None:
    """The request's progress report with its outputs (newest first), or ``None`` without
    one. Who may read it is the caller's check: whoever may read the request."""
    return (
        ProgressReport.objects.filter(request_id=request.pk)
        .select_related("updated_by")
        .prefetch_related("outputs")
        .first()
    )


def _period_of(request: AllocationRequest) -> tuple[date | None, date | None]:
    """The first and last day of what a decision grants: the round's period (an application,
    a renewal), the grant's to its new end (an extension), the grant's (a top-up), the
    appealed decision's (an appeal)."""
    if request.kind == AllocationRequest.Kind.APPEAL and request.appeal_of is not None:
        return _period_of(request.appeal_of)
    if request.in_round and request.round is not None:
        return request.round.period_start, request.round.period_last_day
    if request.grant is not None:
        end = request.new_end if request.kind == AllocationRequest.Kind.EXTENSION else None
        return request.grant.period_start, last_day(end or request.grant.period_end)
    return None, None


def _why_final(request: AllocationRequest) -> str:
    if request.kind == AllocationRequest.Kind.APPEAL:
        return "the decision on an appeal is final"
    if request.state == AllocationRequest.State.GRANTED:
        return "it grants all that was asked for"
    return ""


def decision_letter_of(request: AllocationRequest) -> DecisionLetter | None:
    """What the decision letter of a decided request says (``letters.letter_pdf`` lays it
    out); ``None`` while the request is undecided: there is no letter yet. Who may read it
    is ``access.can_read_letter``."""
    if request.state not in request_states.DECIDED:
        return None
    project = request.project
    pi = project.pi
    first, last = _period_of(request)
    decided = timezone.localdate(request.decided_at) if request.decided_at else None
    return DecisionLetter(
        centre_name=settings.PORTAL_CENTRE_NAME,
        centre_address="\n".join(
            line.strip() for line in settings.PORTAL_CENTRE_ADDRESS.split("|") if line.strip()
        ),
        decided_on=decided or timezone.localdate(),
        request_id=request.pk,
        kind=str(request.get_kind_display()),
        outcome=str(request.get_state_display()),
        project_code=project.code,
        project_title=project.title,
        pi_name=(pi.get_full_name() or pi.get_username()) if pi is not None else "-",
        round_name=request.round.name if request.round is not None else "",
        pools=tuple(
            LetterPool(
                pool=amount.pool.name,
                requested_su=amount.requested_su,
                granted_su=amount.granted_su or Decimal(0),
            )
            for amount in request_amounts(request=request)
        ),
        period_first_day=first,
        period_last_day=last,
        reason=request.decision_reason,
        appealable=request_states.is_appealable(request.kind, request.state),
        request_url=portal_link(reverse("allocations:request-detail", args=[request.pk])),
        final_because=_why_final(request),
    )


def committee_users(*, round_: AllocationRound | None) -> QuerySet[User]:
    """The members of a round's committee (the chair too), by username."""
    if round_ is None:
        return User.objects.none()
    return User.objects.filter(
        pk__in=CommitteeMember.objects.filter(round=round_).values("user_id")
    ).order_by("username")


def request_assignments(*, request: AllocationRequest) -> list[ReviewAssignment]:
    """The committee members assigned to review a request, by username."""
    return list(
        request.assignments.select_related("reviewer", "assigned_by").order_by("reviewer__username")
    )
