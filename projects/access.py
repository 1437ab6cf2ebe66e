"""Who may see or do what in a project: the project roles (PI, manager, member) and which
projects a person sees, manages or audits.

Built on the staff role of ``kit/access.py``; the committee's rules (``allocations``) and the
ledger's (``accounting/access.py``) are built on these. Pages, the API, serializers and services
ask these predicates and visibility querysets and never restate them. What a user may not see
is answered "not found" (404), so that its existence does not leak; what they may see but not
do is refused (403) with the rule in words. docs/access.md has the matrix, and
tests/test_permission_matrix.py checks every URL against it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from kit.access import Actor, is_staff
from kit.errors import ApplicationError
from projects.models import Membership, Project

# --- Roles --------------------------------------------------------------------------------


def is_member(user: Actor, project: Project) -> bool:
    if not isinstance(user, User):
        return False
    return Membership.objects.filter(project=project, user=user).exists()


def is_pi(user: Actor, project: Project) -> bool:
    """Named the project's PI, or holding its PI membership (a user has one membership at
    most in a project)."""
    return project_role(user, project) == Membership.Role.PI


def is_manager(user: Actor, project: Project) -> bool:
    """A PI's proxy (Membership.Role.MANAGER): runs the project for its PI."""
    if not isinstance(user, User):
        return False
    return Membership.objects.filter(
        project=project, user=user, role=Membership.Role.MANAGER
    ).exists()


def leads_a_project(user: Actor) -> bool:
    """Staff, or the PI of some project: who may apply or transfer SU at all."""
    if is_staff(user):
        return True
    if not isinstance(user, User):
        return False
    return Project.objects.filter(
        Q(pi_id=user.pk) | Q(memberships__user_id=user.pk, memberships__role=Membership.Role.PI)
    ).exists()


# Roles already read in this read-only view, by (user, project): see roles_read_once.
_roles_read: ContextVar[dict[tuple[int, int], str | None] | None] = ContextVar(
    "roles_read", default=None
)


@contextmanager
def roles_read_once() -> Iterator[None]:
    """Within it, each user's role in each project is read from the database once: for a
    read-only page that asks several rules of the same person and project (the project page
    asks the role for its header, whether they manage it, edit its outputs, delegate). Never
    around a write, which may change a role and ask again."""
    token = _roles_read.set({})
    try:
        yield
    finally:
        _roles_read.reset(token)


def project_role(user: Actor, project: Project) -> str | None:
    """The user's role in the project (a ``Membership.Role`` value), None when they have none.
    The project's PI field makes its holder the PI whatever their membership says."""
    if not isinstance(user, User):
        return None
    if project.pi_id == user.pk:
        return Membership.Role.PI
    kept = _roles_read.get()
    key = (user.pk, project.pk)
    if kept is not None and key in kept:
        return kept[key]
    role = (
        Membership.objects.filter(project=project, user_id=user.pk)
        .values_list("role", flat=True)
        .first()
    )
    if kept is not None:
        kept[key] = role
    return role


# --- What a role may do -------------------------------------------------------------------


def can_manage_project(user: Actor, project: Project) -> bool:
    """Apply for the project, invite, add and remove its members: its PI, a manager the PI
    appointed, or staff. One read of the user's membership (``project_role``; a user has at
    most one in a project), none for staff or the PI named on the project."""
    if is_staff(user):
        return True
    return project_role(user, project) in (Membership.Role.PI, Membership.Role.MANAGER)


def can_delegate(user: Actor, project: Project) -> bool:
    """Give or take the manager and PI roles of a project: its PI, or staff (never a manager:
    a proxy cannot make proxies)."""
    return is_pi(user, project) or is_staff(user)


# --- Archived projects are read-only -----------------------------------------------------


class ProjectReadOnly(ApplicationError):
    """A write to an archived project: the API answers 400 with the sentence, pages show it."""

    def __init__(self, project: Project) -> None:
        super().__init__(f"{project.code} is archived: it is read-only")
        self.code = project.code


def project_is_writable(project: Project) -> bool:
    """Whether anything of ``project`` may change: not once it is archived (its last grant
    ended PORTAL_ARCHIVE_AFTER_DAYS ago). Its jobs, usage and audit log stay readable; staff
    un-archiving it is the one write allowed (``allocations.grants.expiry``)."""
    return project.status != Project.Status.ARCHIVED


def project_writable_check(project: Project) -> None:
    """Refuse (``ProjectReadOnly``) every write service of an archived project: the one rule
    every service that changes a project's data asks. The status is read again from the
    database, so an object loaded before the project was archived cannot slip through."""
    if project.pk is not None:
        project.refresh_from_db(fields=["status", "status_since"])
    if not project_is_writable(project):
        raise ProjectReadOnly(project)


# --- What a user may see ------------------------------------------------------------------


def projects_visible(*, user: Actor) -> QuerySet[Project]:
    """The projects a user may see: those they lead or belong to; every project for staff."""
    if is_staff(user):
        return Project.objects.all()
    return projects_of_member(user=user)


def can_see_project(user: Actor, project: Project) -> bool:
    """``projects_visible`` for one project already loaded: staff, or whoever has a role in it
    (its PI field included), without a query for staff."""
    return is_staff(user) or project_role(user, project) is not None


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
