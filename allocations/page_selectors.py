"""Read queries of the allocation pages: who sees which project, round and request.

Who sees what is decided in ``projects/access.py`` (projects) and ``allocations/access.py``
(requests, rounds); these
functions only shape what the pages show. Everything a user may not see is answered with
"not found" by the pages, so that its existence does not leak.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from django.utils import timezone

from allocations import access
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    Review,
    RoundPool,
)
from kit.access import Actor, is_staff
from projects import access as projects_access
from projects.models import Project


def projects_of_member(*, user: Actor) -> QuerySet[Project]:
    """The projects a user belongs to or leads, by code (staff too: their own only)."""
    return projects_access.projects_of_member(user=user).order_by("code")


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
    return [
        {
            "request": request,
            "my_review": mine.get(request.pk),
            "conflict": request.project_id in own,  # access.has_conflict, in one query
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
        .select_related("round")
        .order_by("-created_at")
    )


def round_pools(*, round_: AllocationRound) -> list[RoundPool]:
    return list(
        RoundPool.objects.filter(round=round_).select_related("pool").order_by("pool__name")
    )


def request_next_step(*, request: AllocationRequest) -> str:
    """What happens next to a request, and who does it, in one sentence."""
    state, round_ = request.state, request.round
    chair = (
        CommitteeMember.objects.filter(round=round_, is_chair=True).select_related("user").first()
    )
    chair_name = f"the round's chair ({chair.user.get_username()})" if chair else "the chair"
    State = AllocationRequest.State
    if state == State.DRAFT:
        closes = f", before the round closes on {round_.closes_at:%Y-%m-%d}" if round_ else ""
        return f"Next: the PI (or a manager) completes and submits the draft{closes}."
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
