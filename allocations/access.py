"""Who may see or do what in merit allocation: the committee roles (member, chair), conflicts
of interest, and which rounds, requests and reviews a person sees.

Built on the staff role of ``kit/access.py`` and the project roles of ``projects/access.py``
(one definition of each); pages, the API, serializers and services ask these and never restate
them. What a user may not see is answered "not found" (404), so that its existence does not
leak; what they may see but not do is refused (403) with the rule in words. docs/access.md has
the matrix, and tests/test_permission_matrix.py checks every URL against it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from allocations.models import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    ProjectRequest,
    Review,
)
from kit.access import Actor, is_staff
from projects.access import is_member, projects_of_member
from projects.models import Project

# --- Roles --------------------------------------------------------------------------------


def is_committee(user: Actor, round_: AllocationRound) -> bool:
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(round=round_, user=user).exists()


def is_chair(user: Actor, round_: AllocationRound) -> bool:
    if not isinstance(user, User):
        return False
    return CommitteeMember.objects.filter(round=round_, user=user, is_chair=True).exists()


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


def has_conflict(user: Actor, project: Project) -> bool:
    """A conflict of interest: the user leads or belongs to the project. On a committee, they
    never review its requests, read their reviews (nor who wrote them) or decide them."""
    return isinstance(user, User) and (project.pi_id == user.pk or is_member(user, project))


def can_review(user: Actor, request: AllocationRequest) -> bool:
    """Score a request: the round's committee, except members of the request's project."""
    return is_committee(user, request.round) and not has_conflict(user, request.project)


def can_decide_round(user: Actor, round_: AllocationRound) -> bool:
    """Run a round (its overview, opening requests for review, grants): its chair, or staff."""
    return is_chair(user, round_) or is_staff(user)


def can_decide(user: Actor, request: AllocationRequest) -> bool:
    """Open a request for review, grant or decline it: the round's chair, except for a request
    of their own project (``has_conflict``), or staff."""
    if is_staff(user):
        return True
    return is_chair(user, request.round) and not has_conflict(user, request.project)


def can_read_reviews(user: Actor, request: AllocationRequest) -> bool:
    """Read a request's reviews and who wrote them: the round's committee (its chair too),
    except members of the request's project (``has_conflict``), and staff. Applicants never
    do. The same rule as ``reviews_visible``, for one request."""
    if is_staff(user):
        return True
    return is_committee(user, request.round) and not has_conflict(user, request.project)


# --- What a user may see ------------------------------------------------------------------


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
    """Reviews of the rounds whose committee the user sits on, except those of requests of
    their own projects (``has_conflict``); every review for staff. Applicants do not see
    reviews (nor who wrote them). ``can_read_reviews`` is the same rule for one request."""
    reviews = Review.objects.all()
    if is_staff(user):
        return reviews
    if not isinstance(user, User):
        return reviews.none()
    rounds = CommitteeMember.objects.filter(user_id=user.pk).values("round_id")
    return reviews.filter(request__round_id__in=rounds).exclude(
        request__project__in=projects_of_member(user=user)
    )


def projects_in_conflict(*, user: Actor) -> QuerySet[Project]:
    """The projects ``has_conflict`` names for the user, in one query (a round's overview):
    whose requests' scores they may not read. None for staff, as ``can_read_reviews``."""
    if is_staff(user):
        return Project.objects.none()
    return projects_of_member(user=user)


def rounds_sat_on(*, user: Actor) -> QuerySet[AllocationRound]:
    """Rounds whose committee the user sits on; every round for staff."""
    if is_staff(user):
        return AllocationRound.objects.all()
    if not isinstance(user, User):
        return AllocationRound.objects.none()
    return AllocationRound.objects.filter(committee__user_id=user.pk).distinct()


# --- Project requests ---------------------------------------------------------------------


def approves_project_requests(user: Actor) -> bool:
    """Decide requests for new projects (approve, ask for changes, reject): staff, and the
    members of the Django group ``PORTAL_PROJECT_APPROVERS_GROUP`` names (when it names one)."""
    if is_staff(user):
        return True
    group = settings.PORTAL_PROJECT_APPROVERS_GROUP
    if not group or not isinstance(user, User) or not user.is_active:
        return False
    return user.groups.filter(name=group).exists()


def approvers_of_project_requests() -> QuerySet[User]:
    """Everyone ``approves_project_requests`` holds: whom to tell that a request waits."""
    approvers = Q(is_staff=True)
    group = settings.PORTAL_PROJECT_APPROVERS_GROUP
    if group:
        approvers |= Q(groups__name=group)
    return User.objects.filter(approvers, is_active=True).distinct()


def project_requests_visible(*, user: Actor) -> QuerySet[ProjectRequest]:
    """The project requests a user may read: those they asked for and those naming them as
    PI; for the approvers' group also every one its PI confirmed (one the named PI has not
    confirmed, or declined, is not theirs to see); every one for staff."""
    requests = ProjectRequest.objects.all()
    if is_staff(user):
        return requests
    if not isinstance(user, User):
        return requests.none()
    own = Q(requester_id=user.pk) | Q(pi_id=user.pk)
    if approves_project_requests(user):
        unconfirmed = [ProjectRequest.State.AWAITING_PI, ProjectRequest.State.PI_DECLINED]
        return requests.filter(own | ~Q(state__in=unconfirmed))
    return requests.filter(own)


def can_edit_project_request(user: Actor, request: ProjectRequest) -> bool:
    """Edit and resubmit a project request: the person who asked for it."""
    return isinstance(user, User) and request.requester_id == user.pk


def can_confirm_project_request(user: Actor, request: ProjectRequest) -> bool:
    """Confirm (or decline) being the PI of a requested project: the person it names."""
    return isinstance(user, User) and request.pi_id == user.pk


# --- Pages --------------------------------------------------------------------------------
