"""Who may see or do what in merit allocation: the committee roles (member, chair), conflicts
of interest, and which rounds, requests and reviews a person sees.

Built on the staff role of ``kit/access.py`` and the project roles of ``projects/access.py``
(one definition of each); pages, the API, serializers and services ask these and never restate
them. What a user may not see is answered "not found" (404), so that its existence does not
leak; what they may see but not do is refused (403) with the rule in words. docs/access.md has
the matrix, and tests/test_permission_matrix.py checks every URL against it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from allocations import request_states
from allocations.models import (
    AllocationRequest,
    AllocationRound,
    CommitteeMember,
    ProjectRequest,
    Review,
    ReviewAssignment,
)
from kit.access import Actor, is_staff
from projects.access import can_manage_project, is_member, projects_managed, projects_of_member
from projects.models import Project

# --- Roles --------------------------------------------------------------------------------


def is_committee(user: Actor, round_: AllocationRound | None) -> bool:
    if not isinstance(user, User) or round_ is None:
        return False
    return CommitteeMember.objects.filter(round=round_, user=user).exists()


def is_chair(user: Actor, round_: AllocationRound | None) -> bool:
    if not isinstance(user, User) or round_ is None:
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


def deciding_round(request: AllocationRequest) -> AllocationRound | None:
    """The round whose chair decides a request: its own round (an application, a renewal);
    for a top-up or an extension, the round that granted the grant in force; for an appeal,
    the round of the decision appealed. ``None`` when there is none (a grant staff made
    outside a round): then staff decide."""
    if request.round_id is not None:
        return request.round
    if request.kind == AllocationRequest.Kind.APPEAL and request.appeal_of is not None:
        return deciding_round(request.appeal_of)
    if request.grant is not None and request.grant.request is not None:
        return deciding_round(request.grant.request)
    return None


# --- What a role may do -------------------------------------------------------------------


def has_conflict(user: Actor, project: Project) -> bool:
    """A conflict of interest: the user leads or belongs to the project. On a committee, they
    never review its requests, read their reviews (nor who wrote them) or decide them."""
    return isinstance(user, User) and (project.pi_id == user.pk or is_member(user, project))


def is_assigned_reviewer(user: Actor, request: AllocationRequest) -> bool:
    """Among those who review the request: when the chair assigned reviewers to it
    (``ReviewAssignment``), the members assigned; when not, every member of its round's
    committee (as before assignments existed). Conflicts are ``has_conflict``'s, not this."""
    if not isinstance(user, User) or not is_committee(user, request.round):
        return False
    assigned = ReviewAssignment.objects.filter(request=request)
    return not assigned.exists() or assigned.filter(reviewer_id=user.pk).exists()


def can_review(user: Actor, request: AllocationRequest) -> bool:
    """Score a request: its reviewers (``is_assigned_reviewer``: the members assigned, or the
    whole committee when none are), except members of the request's project. Only requests in
    a round (applications, renewals) are reviewed."""
    return (
        request.in_round
        and is_assigned_reviewer(user, request)
        and not has_conflict(user, request.project)
    )


def can_assign_reviewers(user: Actor, request: AllocationRequest) -> bool:
    """Assign committee members to review a request, or take them off it: whoever decides it
    (``can_decide``: its chair, never for their own project's request, or staff), for a
    request the committee reviews (an application, a renewal)."""
    return request.in_round and can_decide(user, request)


def can_read_record(user: Actor, request: AllocationRequest) -> bool:
    """Read the applicant's record (``allocations/rounds/record.py``: the project's grants,
    use, efficiency, re-priced jobs and outputs): staff; the chair of the request's
    ``deciding_round``; the request's reviewers (``is_assigned_reviewer``). Never anyone with
    a conflict of interest (``has_conflict``), and not the applicants: they have their
    project's own pages."""
    if is_staff(user):
        return True
    if has_conflict(user, request.project):
        return False
    return is_chair(user, deciding_round(request)) or (
        request.in_round and is_assigned_reviewer(user, request)
    )


def can_decide_round(user: Actor, round_: AllocationRound) -> bool:
    """Run a round (its overview, opening requests for review, grants): its chair, or staff."""
    return is_chair(user, round_) or is_staff(user)


def can_decide(user: Actor, request: AllocationRequest) -> bool:
    """Open a request for review, grant or decline it: the chair of its ``deciding_round``,
    except for a request of their own project (``has_conflict``), or staff (who alone decide
    a request with no such round)."""
    if is_staff(user):
        return True
    return is_chair(user, deciding_round(request)) and not has_conflict(user, request.project)


def can_ask_for_change(user: Actor, project: Project) -> bool:
    """Ask for any kind of change to a project's allocation (apply, top up, extend, renew,
    appeal): whoever manages the project (its PI, a manager, staff)."""
    return can_manage_project(user, project)


def asks_for_changes(user: Actor) -> bool:
    """May use the request operations at all: staff, or whoever manages some project (its PI
    or a manager). Asked before any input is read; ``can_ask_for_change`` then names the
    project."""
    return is_staff(user) or projects_managed(user=user).exists()


def can_appeal(user: Actor, request: AllocationRequest) -> bool:
    """Offer an appeal of a decision: to whoever manages the project, for a decision that gave
    less than asked (``request_states.is_appealable``), once."""
    return (
        can_ask_for_change(user, request.project)
        and request_states.is_appealable(request.kind, request.state)
        and not request.appeals.exists()
    )


def can_read_letter(user: Actor, request: AllocationRequest) -> bool:
    """Read a decision's letter: whoever manages the project (its PI, a manager), the chair
    who decides it (``can_decide``: never one of the project's own) and staff. A member reads
    the decision on the request's page; the rest of the committee has no letter to read."""
    return can_manage_project(user, request.project) or can_decide(user, request)


def can_read_reviews(user: Actor, request: AllocationRequest) -> bool:
    """Read a request's reviews and who wrote them: the round's committee (its chair too),
    except members of the request's project (``has_conflict``), and staff. Applicants never
    do. The same rule as ``reviews_visible``, for one request."""
    if is_staff(user):
        return True
    return is_committee(user, request.round) and not has_conflict(user, request.project)


def can_edit_outputs(user: Actor, project: Project) -> bool:
    """Add, change, delete and upload a project's research outputs: whoever manages the project
    (its PI, a manager, staff). Every member reads them (``projects_visible``)."""
    return can_manage_project(user, project)


# --- What a user may see ------------------------------------------------------------------


def decided_in_rounds(rounds: Any) -> Q:
    """Requests outside rounds whose ``deciding_round`` is one of ``rounds`` (ids, or a query
    of ids): ``deciding_round`` as a filter. A grant is made by an application or a renewal
    (or by staff, outside rounds), so the chain is never longer than this."""
    return Q(round__isnull=True) & (
        Q(grant__request__round_id__in=rounds)
        | Q(appeal_of__round_id__in=rounds)
        | Q(appeal_of__grant__request__round_id__in=rounds)
    )


def requests_visible(*, user: Actor) -> QuerySet[AllocationRequest]:
    """Requests of the user's projects, and the submitted requests of rounds whose committee
    they sit on: a draft stays with its project. Every request for staff."""
    requests = AllocationRequest.objects.all()
    if is_staff(user):
        return requests
    if not isinstance(user, User):
        return requests.none()
    rounds = CommitteeMember.objects.filter(user_id=user.pk).values("round_id")
    # A request outside rounds (top-up, extension, appeal) goes to the chair of the round
    # behind it (``deciding_round``) alone, not to the committee.
    chaired = CommitteeMember.objects.filter(user_id=user.pk, is_chair=True).values("round_id")
    outside = decided_in_rounds(chaired)
    return requests.filter(
        Q(project__in=projects_of_member(user=user))
        | ((Q(round_id__in=rounds) | outside) & ~Q(state=AllocationRequest.State.DRAFT))
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
