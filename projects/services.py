"""Projects and their members: created, joined and left. Invitations are in
``projects/invitations.py``."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from kit.access import require
from kit.errors import ApplicationError
from projects.access import can_delegate, can_manage_project, project_writable_check
from projects.models import Membership, Project
from projects.signals import projects_created


class ProjectError(ApplicationError):
    """A rule of projects and memberships refused the change; the message says which."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ProjectError(message)


def projects_created_announce(*, codes: list[str]) -> None:
    """Tell the apps above that projects were created (the ledger then retries its quarantined
    lines, after the commit)."""
    if codes:
        projects_created.send(sender=Project, codes=list(codes))


@transaction.atomic
def project_create(
    *, code: str, title: str = "", pi: User | None = None, field_of_science: str = ""
) -> Project:
    """Create a project for Slurm account ``code``; jobs quarantined for it are then charged."""
    project = Project.objects.create(
        code=code, title=title, pi=pi, field_of_science=field_of_science
    )
    if pi is not None:
        Membership.objects.create(project=project, user=pi, role=Membership.Role.PI)
    projects_created_announce(codes=[project.code])
    return project


@transaction.atomic
def membership_add(
    *, project: Project, user: User, actor: User, role: str = Membership.Role.MEMBER
) -> Membership:
    """The PI (or staff) adds a member; adding someone already in the project changes nothing."""
    require(
        can_manage_project(actor, project), f"only the PI or a manager of {project} adds members"
    )
    project_writable_check(project)
    _check(role in Membership.Role.values, f"unknown role {role!r}")
    if role != Membership.Role.MEMBER:
        require(can_delegate(actor, project), f"only the PI of {project} appoints a {role}")
    membership, _ = Membership.objects.get_or_create(
        project=project, user=user, defaults={"role": role}
    )
    return membership


@transaction.atomic
def membership_remove(*, project: Project, user: User, actor: User) -> None:
    """The PI (or staff) removes a member; a member may leave. The project's PI stays."""
    leaving = actor.is_authenticated and actor.pk == user.pk
    require(
        leaving or can_manage_project(actor, project),
        f"only the PI of {project} removes members (a member may leave)",
    )
    project_writable_check(project)
    _check(project.pi_id != user.pk, f"{user} is the PI of {project}; appoint another PI first")
    deleted, _ = Membership.objects.filter(project=project, user=user).delete()
    _check(deleted > 0, f"{user} is not a member of {project}")
