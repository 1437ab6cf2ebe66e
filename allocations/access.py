"""Who may see or do what: the one home of every access rule of the portal.

Roles have one definition each (staff, PI, member, committee member, chair). Pages, the API,
serializers and services ask these predicates and visibility querysets and never restate
them; ``accounting/access.py`` builds the ledger's rules on them. What a user may not see is
answered "not found" (404), so that its existence does not leak; what they may see but not do
is refused (403) with the rule in words. docs/access.md has the matrix, and
tests/test_permission_matrix.py checks every URL against it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse

from allocations.models import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    Membership,
    Project,
    Review,
)

Actor = User | AnonymousUser


# --- Roles --------------------------------------------------------------------------------


def is_staff(user: Actor) -> bool:
    """Centre staff: an active account with Django's staff flag."""
    return isinstance(user, User) and user.is_active and user.is_staff


def is_member(user: Actor, project: Project) -> bool:
    if not isinstance(user, User):
        return False
    return Membership.objects.filter(project=project, user=user).exists()


def is_pi(user: Actor, project: Project) -> bool:
    if not isinstance(user, User):
        return False
    return (
        project.pi_id == user.pk
        or Membership.objects.filter(project=project, user=user, role=Membership.Role.PI).exists()
    )


def is_manager(user: Actor, project: Project) -> bool:
    """A PI's proxy (Membership.Role.MANAGER): runs the project for its PI."""
    if not isinstance(user, User):
        return False
    return Membership.objects.filter(
        project=project, user=user, role=Membership.Role.MANAGER
    ).exists()


def is_committee(user: Actor, round_: AllocationRound) -> bool:
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(round=round_, user=user).exists()


def is_chair(user: Actor, round_: AllocationRound) -> bool:
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(round=round_, user=user, is_chair=True).exists()


def leads_a_project(user: Actor) -> bool:
    """Staff, or the PI of some project: who may apply or transfer SU at all."""
    if is_staff(user):
        return True
    if not isinstance(user, User):
        return False
    return Project.objects.filter(
        Q(pi_id=user.pk) | Q(memberships__user_id=user.pk, memberships__role=Membership.Role.PI)
    ).exists()


def sits_on_a_committee(user: Actor) -> bool:
    """Sits on some round's committee: who may send a review at all."""
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(user=user).exists()


def chairs_any_round(user: Actor) -> bool:
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(user=user, is_chair=True).exists()


# --- What a role may do -------------------------------------------------------------------


def can_manage_project(user: Actor, project: Project) -> bool:
    """Apply for the project, invite, add and remove its members: its PI, a manager the PI
    appointed, or staff."""
    return is_pi(user, project) or is_manager(user, project) or is_staff(user)


def can_delegate(user: Actor, project: Project) -> bool:
    """Give or take the manager and PI roles of a project: its PI, or staff (never a manager:
    a proxy cannot make proxies)."""
    return is_pi(user, project) or is_staff(user)


def has_conflict(user: Actor, project: Project) -> bool:
    """A reviewer who belongs to a project never reviews its requests."""
    return isinstance(user, User) and (project.pi_id == user.pk or is_member(user, project))


def can_review(user: Actor, request: AllocationRequest) -> bool:
    """Score a request: the round's committee, except members of the request's project."""
    return is_committee(user, request.round) and not has_conflict(user, request.project)


def can_decide_round(user: Actor, round_: AllocationRound) -> bool:
    """Run a round (its overview, opening requests for review, grants): its chair, or staff."""
    return is_chair(user, round_) or is_staff(user)


def can_decide(user: Actor, request: AllocationRequest) -> bool:
    """Open a request for review, grant or decline it: the round's chair, or staff."""
    return can_decide_round(user, request.round)


def require(allowed: bool, message: str) -> None:
    """Refuse with a clear message (HTTP 403 in views) when ``allowed`` is false."""
    if not allowed:
        raise PermissionDenied(message)


# --- What a user may see ------------------------------------------------------------------


def projects_visible(*, user: Actor) -> QuerySet[Project]:
    """The projects a user may see: those they lead or belong to; every project for staff."""
    if is_staff(user):
        return Project.objects.all()
    return projects_of_member(user=user)


def projects_audited(*, user: Actor) -> QuerySet[Project] | None:
    """Whose audit log a user may read: every entry for staff (None: no project limit), the
    entries of the projects they lead for a PI, none for anyone else."""
    if is_staff(user):
        return None
    if not isinstance(user, User):
        return Project.objects.none()
    return Project.objects.filter(
        Q(pi_id=user.pk) | Q(memberships__user_id=user.pk, memberships__role=Membership.Role.PI)
    ).distinct()


def projects_managed(*, user: Actor) -> QuerySet[Project]:
    """The projects a user may apply for: those they lead (PI) or manage (the PI's proxy)."""
    if not isinstance(user, User):
        return Project.objects.none()
    return (
        Project.objects.filter(
            Q(pi_id=user.pk)
            | Q(
                memberships__user_id=user.pk,
                memberships__role__in=[Membership.Role.PI, Membership.Role.MANAGER],
            )
        )
        .distinct()
        .order_by("code")
    )


def projects_of_member(*, user: Actor) -> QuerySet[Project]:
    """The projects a user leads or belongs to (for staff too: their own, not every one)."""
    if not isinstance(user, User):
        return Project.objects.none()
    return Project.objects.filter(Q(memberships__user_id=user.pk) | Q(pi_id=user.pk)).distinct()


def requests_visible(*, user: Actor) -> QuerySet[AllocationRequest]:
    """Requests of the user's projects, and the submitted requests of rounds whose committee
    they sit on: a draft stays with its project. Every request for staff."""
    requests = AllocationRequest.objects.all()
    if is_staff(user):
        return requests
    if not isinstance(user, User):
        return requests.none()
    rounds = CommitteeMember.objects.filter(user_id=user.pk).values("round_id")
    return requests.filter(
        Q(project__in=projects_of_member(user=user))
        | (Q(round_id__in=rounds) & ~Q(state=AllocationRequest.State.DRAFT))
    )


def reviews_visible(*, user: Actor) -> QuerySet[Review]:
    """Reviews of the rounds whose committee the user sits on; every review for staff.
    Applicants do not see reviews (nor who wrote them)."""
    reviews = Review.objects.all()
    if is_staff(user):
        return reviews
    if not isinstance(user, User):
        return reviews.none()
    rounds = CommitteeMember.objects.filter(user_id=user.pk).values("round_id")
    return reviews.filter(request__round_id__in=rounds)


def rounds_sat_on(*, user: Actor) -> QuerySet[AllocationRound]:
    """Rounds whose committee the user sits on; every round for staff."""
    if is_staff(user):
        return AllocationRound.objects.all()
    if not isinstance(user, User):
        return AllocationRound.objects.none()
    return AllocationRound.objects.filter(committee__user_id=user.pk).distinct()


# --- Pages --------------------------------------------------------------------------------


def staff_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Staff pages answer 404 to everyone else: their existence is not advertised."""

    @wraps(view)
    @login_required
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_staff(request.user):
            raise Http404
        return view(request, *args, **kwargs)

    return wrapped
