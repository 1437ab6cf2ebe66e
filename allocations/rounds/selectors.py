"""Read queries of rounds, requests and reviews: the chair's round overview, and what the
request and round pages show.

Who sees what is decided in ``projects/access.py`` (projects) and ``allocations/access.py``
(requests, rounds); these functions only shape what the pages show. Everything a user may not
see is answered with "not found" by the pages, so that its existence does not leak."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Avg, Count, F, Q, QuerySet, Sum, Value
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
    WhatIfDraft,
    WhatIfProposal,
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


def applications_in_rounds(
    *, projects: Iterable[Project], rounds: Iterable[AllocationRound]
) -> dict[tuple[int, int], AllocationRequest]:
    """The application (a new request or a renewal: one per project and round, whatever its
    state) each of ``projects`` has in each of ``rounds``, keyed by (round id, project id).
    A project with one may not apply in that round again (``request_create``)."""
    project_ids = [project.pk for project in projects]
    round_ids = [round_.pk for round_ in rounds]
    if not project_ids or not round_ids:
        return {}
    found = AllocationRequest.objects.filter(
        round_id__in=round_ids, project_id__in=project_ids, kind__in=request_states.IN_ROUND
    ).select_related("project")
    return {
        (request.round_id, request.project_id): request
        for request in found
        if request.round_id is not None
    }


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
    # The grants and appeals deciding_round walks are prefetched, not joined: a join of those
    # five tables costs 3 ms to compile on every view of the staff dashboard, where there is
    # usually nothing to decide; a prefetch runs only for requests there are.
    requests = (
        AllocationRequest.objects.filter(
            round__isnull=True, state=AllocationRequest.State.SUBMITTED
        )
        .select_related("project")
        .prefetch_related("grant__request", "appeal_of__grant__request")
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


# --- The round against its capacity, and the chair's what-if ---------------------------------

# Requests that still wait for a decision: a round's capacity is fitted to them.
OPEN_STATES = (AllocationRequest.State.SUBMITTED, AllocationRequest.State.UNDER_REVIEW)
IN_ROUND_KINDS = (AllocationRequest.Kind.NEW, AllocationRequest.Kind.RENEWAL)


@dataclass(frozen=True)
class PoolCapacity:
    """One pool of a round: what it offers, what its decisions granted (appeals' raises
    included), what it has left, and what its open requests ask for."""

    pool: ResourcePool
    available_su: Decimal
    granted_su: Decimal
    open_su: Decimal  # submitted and under review
    under_review_su: Decimal  # what the decide service may grant now

    @property
    def remaining_su(self) -> Decimal:
        return max(self.available_su - self.granted_su, ZERO)

    @property
    def oversubscription_percent(self) -> Decimal | None:
        """(open requests / remaining - 1) in percent, to one place; None when the open
        requests fit, or when nothing is left (``oversubscription`` says which)."""
        if self.open_su <= self.remaining_su or self.remaining_su == 0:
            return None
        return ((self.open_su / self.remaining_su - 1) * 100).quantize(Decimal("0.1"))

    @property
    def oversubscription(self) -> str:
        if self.open_su <= self.remaining_su:
            return "not oversubscribed"
        if self.remaining_su == 0:
            return "nothing left to grant"
        return f"{self.oversubscription_percent} % oversubscribed"  # as every page writes a percent


def round_capacity(*, round_: AllocationRound) -> list[PoolCapacity]:
    """Each pool of the round against its capacity, in two queries. Granted: every decided
    amount of the round (as ``request_decide`` counts it); open: applications and renewals
    submitted or under review. Whoever sits on the round may read these totals."""
    amounts = RequestAmount.objects.filter(request__round=round_)
    open_ = Q(request__state__in=OPEN_STATES, request__kind__in=IN_ROUND_KINDS)
    review = Q(
        request__state=AllocationRequest.State.UNDER_REVIEW, request__kind__in=IN_ROUND_KINDS
    )
    totals: dict[int, Any] = {
        row["pool_id"]: row
        for row in amounts.values("pool_id").annotate(
            granted=Coalesce(Sum("granted_su"), Value(ZERO)),
            open=Coalesce(Sum("requested_su", filter=open_), Value(ZERO)),
            review=Coalesce(Sum("requested_su", filter=review), Value(ZERO)),
        )
    }
    return [
        PoolCapacity(
            pool=item.pool,
            available_su=item.available_su,
            granted_su=totals.get(item.pool_id, {}).get("granted", ZERO),
            open_su=totals.get(item.pool_id, {}).get("open", ZERO),
            under_review_su=totals.get(item.pool_id, {}).get("review", ZERO),
        )
        for item in RoundPool.objects.filter(round=round_)
        .select_related("pool")
        .order_by("pool__name")
    ]


@dataclass(frozen=True)
class WhatIfAmount:
    """One amount a what-if fits: a request's ask on one pool, as the draft records it."""

    amount_id: int
    request_id: int
    pool_id: int
    pool_name: str
    requested_su: Decimal
    request_state: str


@dataclass(frozen=True)
class WhatIfInputs:
    """What a what-if fits: the capacity left per pool (by pool id), every amount of the
    requests under review (with their mean score), and what it leaves out and why."""

    capacity: dict[int, Decimal]
    amounts: list[WhatIfAmount]
    scores: dict[int, Decimal | None]  # by request id
    conflicted: list[AllocationRequest]  # the actor's own projects': staff decide them
    submitted: int  # not yet opened for review: the decide service cannot grant them


def what_if_inputs(*, round_: AllocationRound, actor: Actor) -> WhatIfInputs:
    """The requests a what-if fits for ``actor``: applications and renewals under review (the
    state ``request_decide`` grants from), except those of the actor's own projects
    (``access.has_conflict``: they are listed, and staff decide them)."""
    capacity = {item.pool.pk: item.remaining_su for item in round_capacity(round_=round_)}
    requests = AllocationRequest.objects.filter(round=round_, kind__in=IN_ROUND_KINDS)
    conflicted_projects = access.projects_in_conflict(user=actor)
    under_review = requests.filter(state=AllocationRequest.State.UNDER_REVIEW)
    conflicted = list(
        under_review.filter(project__in=conflicted_projects).select_related("project")
    )
    fitted = under_review.exclude(project__in=conflicted_projects)
    scores = {
        row["pk"]: (
            Decimal(row["score"]).quantize(Decimal("0.01")) if row["score"] is not None else None
        )
        for row in fitted.annotate(score=Avg("reviews__score")).values("pk", "score")
    }
    # Plain rows, not model objects: a round of 500 requests has 1,500 of these.
    amounts = [
        WhatIfAmount(*row)
        for row in RequestAmount.objects.filter(request__in=fitted)
        .order_by("request__project__code", "pool__name")
        .values_list("pk", "request_id", "pool_id", "pool__name", "requested_su", "request__state")
    ]
    submitted = requests.filter(state=AllocationRequest.State.SUBMITTED).count()
    return WhatIfInputs(
        capacity=capacity, amounts=amounts, scores=scores, conflicted=conflicted,
        submitted=submitted,
    )  # fmt: skip


def what_if_drafts(*, round_: AllocationRound) -> QuerySet[WhatIfDraft]:
    """The round's what-if drafts, the newest first. Who may read them is the caller's check
    (``access.can_decide_round``)."""
    return round_.what_ifs.select_related("created_by", "applied_by").order_by("-created_at", "-pk")


def what_if_proposals(*, draft: WhatIfDraft, actor: Actor) -> QuerySet[WhatIfProposal]:
    """A draft's proposals, by project and pool, except those of the actor's own projects
    (``access.has_conflict``: their scores are not theirs to read)."""
    return (
        draft.proposals.exclude(
            request_amount__request__project__in=access.projects_in_conflict(user=actor)
        )
        .select_related("request_amount__request__project", "request_amount__pool")
        .order_by("request_amount__request__project__code", "request_amount__pool__name")
    )


def what_if_proposal_rows(
    *, draft: WhatIfDraft, actor: Actor, pk: int | None = None
) -> list[dict[str, Any]]:
    """``what_if_proposals`` (or the one of id ``pk``) as plain rows, what the page and the API
    show of each: id, request, project, pool, requested_su, score, proposed_su, reason,
    edited."""
    proposals = what_if_proposals(draft=draft, actor=actor)
    if pk is not None:
        proposals = proposals.filter(pk=pk)
    return _proposal_rows(proposals)


def _proposal_rows(proposals: QuerySet[WhatIfProposal], **extra: F) -> list[dict[str, Any]]:
    columns = ("id", "requested_su", "score", "proposed_su", "reason", "edited")
    related = {
        "request": F("request_amount__request_id"),
        "project": F("request_amount__request__project__code"),
        "pool": F("request_amount__pool__name"),
        **extra,
    }
    return [dict(row) for row in proposals.values(*columns, **related)]


@dataclass(frozen=True)
class DraftPoolTotal:
    """One pool of a draft: its proposals' total against what the round has left now."""

    pool: ResourcePool
    remaining_su: Decimal
    requested_su: Decimal
    proposed_su: Decimal
    factor: str  # the method's, as the draft recorded it
    notes: list[str]

    @property
    def fits(self) -> bool:
        return self.proposed_su <= self.remaining_su


def what_if_totals(
    *, draft: WhatIfDraft, rows: list[dict[str, Any]] | None = None
) -> list[DraftPoolTotal]:
    """A draft's totals per pool (every proposal, a conflicted actor's own too: totals tell no
    score) against what the round has left now; summed from ``rows`` (every proposal's, with
    ``pool_id``) when the caller has read them already."""
    sums: dict[int, Any]
    if rows is None:
        sums = {
            row["request_amount__pool_id"]: row
            for row in draft.proposals.values("request_amount__pool_id").annotate(
                requested=Sum("requested_su"), proposed=Sum("proposed_su")
            )
        }
    else:
        sums = defaultdict(lambda: {"requested": ZERO, "proposed": ZERO})
        for row in rows:
            sums[row["pool_id"]]["requested"] += row["requested_su"]
            sums[row["pool_id"]]["proposed"] += row["proposed_su"]
    fits: dict[str, dict[str, Any]] = draft.fits or {}
    return [
        DraftPoolTotal(
            pool=item.pool,
            remaining_su=item.remaining_su,
            requested_su=sums.get(item.pool.pk, {}).get("requested") or ZERO,
            proposed_su=sums.get(item.pool.pk, {}).get("proposed") or ZERO,
            factor=fits.get(str(item.pool.pk), {}).get("factor", ""),
            notes=list(fits.get(str(item.pool.pk), {}).get("notes", [])),
        )
        for item in round_capacity(round_=draft.round)
    ]


def what_if_draft_for(*, user: Actor, round_pk: int, pk: int) -> WhatIfDraft | None:
    """One draft of a round, for whoever may run the round (``access.can_decide_round``);
    None for anyone else, as for a draft that does not exist."""
    draft = (
        WhatIfDraft.objects.select_related("round", "created_by", "applied_by")
        .filter(round_id=round_pk, pk=pk)
        .first()
    )
    if draft is None or not access.can_decide_round(user, draft.round):
        return None
    return draft


@dataclass(frozen=True)
class WhatIfView:
    """A draft as ``actor`` may read it: its proposals (their own projects' left out), its
    totals against what the round has left now, and what the what-if did not fit."""

    draft: WhatIfDraft
    proposals: list[dict[str, Any]]  # what_if_proposal_rows
    totals: list[DraftPoolTotal]
    hidden: int  # proposals of the actor's own projects, not shown
    conflicted: list[AllocationRequest]  # under review, the actor's own: staff decide them
    submitted: int  # not yet opened for review: no what-if fits them


def what_if_view(*, draft: WhatIfDraft, actor: Actor) -> WhatIfView:
    # Every proposal in one read: the totals count them all, the actor sees all but their
    # own projects' (``what_if_proposals``'s rule, applied to the rows).
    own = set(access.projects_in_conflict(user=actor).values_list("pk", flat=True))
    rows = _proposal_rows(
        draft.proposals.order_by(
            "request_amount__request__project__code", "request_amount__pool__name"
        ),
        project_id=F("request_amount__request__project_id"),
        pool_id=F("request_amount__pool_id"),
    )
    proposals = [row for row in rows if row["project_id"] not in own]
    inputs_left_out = AllocationRequest.objects.filter(round=draft.round, kind__in=IN_ROUND_KINDS)
    return WhatIfView(
        draft=draft,
        proposals=proposals,
        totals=what_if_totals(draft=draft, rows=rows),
        hidden=len(rows) - len(proposals),
        conflicted=list(
            inputs_left_out.filter(
                state=AllocationRequest.State.UNDER_REVIEW,
                project__in=access.projects_in_conflict(user=actor),
            ).select_related("project")
        ),
        submitted=inputs_left_out.filter(state=AllocationRequest.State.SUBMITTED).count(),
    )
