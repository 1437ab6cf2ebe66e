"""Read queries of projects: a project a person may open, their role in it, its members, and
which project a Slurm account books to."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Case, QuerySet, When

from kit.access import Actor, is_staff
from projects.access import can_see_project, project_role
from projects.accounts import account_candidates
from projects.models import Membership, Project, ResourcePool

# The words of the page header for each role in a project.
ROLE_LABELS = {
    Membership.Role.PI: "PI",
    Membership.Role.MANAGER: "manager",
    Membership.Role.MEMBER: "member",
}


def project_for_user(*, user: Actor, code: str) -> Project | None:
    """The project with ``code`` when the user may see it, else ``None``: read by its code,
    then ``can_see_project`` asked of it (no query for staff or its named PI; the viewer's
    membership otherwise, which a page inside ``roles_read_once`` then reads once for all its
    rules). Before, it joined every project the user may see, DISTINCT, to find this one."""
    project = Project.objects.filter(code=code).select_related("pi").first()
    if project is None or not can_see_project(user, project):
        return None
    return project


def role_in_project(*, user: Actor, project: Project) -> str:
    """ "PI", "manager", "member", "staff" or "" for the page header."""
    role = project_role(user, project)
    if role is not None:
        return ROLE_LABELS[Membership.Role(role)]
    return "staff" if is_staff(user) else ""


def memberships_of(*, project: Project) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(project=project).select_related("user").order_by("user__username")
    )


def account_suffixes(*, cluster_ids: Iterable[int]) -> set[str]:
    """The account suffixes of the pools on these clusters: what an account of theirs may end
    with when it is a pool's account of a project (``projects.accounts``)."""
    return set(
        ResourcePool.objects.filter(cluster_id__in=list(cluster_ids))
        .exclude(slurm_account_suffix="")
        .values_list("slurm_account_suffix", flat=True)
    )


def project_for_account(account: str, *, suffixes: Iterable[str]) -> Project | None:
    """The project a Slurm account books to: the project of that code, else the project whose
    pool account it is (``pawsey0001-gpu``), over the ``suffixes`` of the cluster's pools."""
    candidates = account_candidates(account, suffixes)
    return (
        Project.objects.filter(code__in=candidates)
        .order_by(Case(*(When(code=code, then=rank) for rank, code in enumerate(candidates))))
        .first()
    )
