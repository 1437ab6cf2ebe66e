"""Projects and their members: created, joined and left. Invitations are in
``projects/invitations.py``."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.db import transaction

from kit.access import is_staff, require
from kit.errors import ApplicationError
from projects.access import can_delegate, can_manage_project, project_writable_check
from projects.models import Membership, Project
from projects.signals import projects_created


class ProjectError(ApplicationError):
    """A rule of projects and memberships refused the change; the message says which."""


# A project's code is its Slurm account: what sacctmgr and the API's paths accept.
PROJECT_CODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# A finance code names the statement files of its projects (``statements --finance-code``).
FINANCE_CODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,63}")


def _finance_code_check(finance_code: str) -> None:
    _check(
        finance_code == "" or FINANCE_CODE.fullmatch(finance_code) is not None,
        "a finance code is up to 64 letters, digits, '_', '.', '/' or '-', starting with a "
        "letter or digit",
        field="finance_code",
    )


def _check(condition: bool, message: str, *, field: str | None = None) -> None:
    if not condition:
        raise ProjectError(message, field=field)


def _pi_check(pi: User | None) -> None:
    _check(pi is None or pi.is_active, f"{pi} cannot sign in and cannot lead a project", field="pi")


def projects_created_announce(*, codes: list[str]) -> None:
    """Tell the apps above that projects were created (the ledger then retries its quarantined
    lines, after the commit)."""
    if codes:
        projects_created.send(sender=Project, codes=list(codes))


@transaction.atomic
def project_create(
    *,
    code: str,
    title: str = "",
    pi: User | None = None,
    field_of_science: str = "",
    finance_code: str = "",
    actor: User | None = None,
) -> Project:
    """Create a project for Slurm account ``code``; jobs quarantined for it are then charged.
    Staff create projects; ``actor`` is None only for the portal itself (commands, the demo)."""
    if actor is not None:
        require(is_staff(actor), "only centre staff create projects")
    _check(
        PROJECT_CODE.fullmatch(code) is not None,
        "a project code is its Slurm account: up to 64 letters, digits, '_', '.' or '-', "
        "starting with a letter or digit",
        field="code",
    )
    _check(
        not Project.objects.filter(code__iexact=code).exists(),
        f"a project {code} exists already",
        field="code",
    )
    _pi_check(pi)
    finance_code = finance_code.strip()
    _finance_code_check(finance_code)
    project = Project.objects.create(
        code=code,
        title=title,
        pi=pi,
        field_of_science=field_of_science,
        finance_code=finance_code,
    )
    if pi is not None:
        Membership.objects.create(project=project, user=pi, role=Membership.Role.PI)
    projects_created_announce(codes=[project.code])
    return project


@transaction.atomic
def project_update(
    *,
    project: Project,
    actor: User,
    title: str | None = None,
    field_of_science: str | None = None,
    finance_code: str | None = None,
    pi: User | None = None,
) -> Project:
    """Staff change a project's title, field of science, finance code or PI. A new PI becomes
    the project's PI member; the PI before stays in the project as a member. The code is the
    Slurm account and never changes. An archived project takes none (un-archive it first)."""
    require(is_staff(actor), "only centre staff edit projects")
    project = Project.objects.select_for_update().get(pk=project.pk)
    project_writable_check(project)  # an archived project is read-only, for staff too
    changed: list[str] = []
    if title is not None and title != project.title:
        project.title = title
        changed.append("title")
    if field_of_science is not None and field_of_science != project.field_of_science:
        project.field_of_science = field_of_science
        changed.append("field_of_science")
    if finance_code is not None and finance_code.strip() != project.finance_code:
        _finance_code_check(finance_code.strip())
        project.finance_code = finance_code.strip()
        changed.append("finance_code")
    if pi is not None and pi.pk != project.pi_id:
        _pi_check(pi)
        pi_before = Membership.objects.filter(project=project, role=Membership.Role.PI).exclude(
            user=pi
        )
        for before in pi_before:  # one by one, so that the audit log records each
            before.role = Membership.Role.MEMBER
            before.save(update_fields=["role"])
        Membership.objects.update_or_create(
            project=project, user=pi, defaults={"role": Membership.Role.PI}
        )
        project.pi = pi
        changed.append("pi")
    if changed:
        project.save(update_fields=changed)
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
