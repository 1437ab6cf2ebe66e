"""Write-side operations of the allocations app."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction

from allocations.models import Membership, Project
from allocations.slurm_accounts import associations_parse


def _retry_quarantine_everywhere() -> None:
    # A new project may be the missing account of quarantined jobs on any cluster.
    from accounting.models import Cluster
    from accounting.services import quarantine_retry_enqueue

    for cluster in Cluster.objects.all():
        quarantine_retry_enqueue(cluster=cluster)


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
    _retry_quarantine_everywhere()
    return project


@dataclass
class AccountsSyncResult:
    projects_created: list[str] = field(default_factory=list)
    users_created: list[str] = field(default_factory=list)
    memberships_created: list[tuple[str, str]] = field(default_factory=list)
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)


@transaction.atomic
def slurm_accounts_sync(*, lines: Iterable[str], cluster: str | None = None) -> AccountsSyncResult:
    """Create projects and memberships from sacctmgr associations; idempotent, additive.

    Slurm users without a portal login get one with no usable password (they sign in through
    the centre's identity provider or after a password reset). Nothing is removed.
    """
    associations = associations_parse(lines, cluster=cluster)
    result = AccountsSyncResult(skipped_lines=associations.skipped_lines)
    user_model = get_user_model()
    for account, usernames in sorted(associations.accounts.items()):
        project, created = Project.objects.get_or_create(
            code=account, defaults={"title": f"{account} (from Slurm)"}
        )
        if created:
            result.projects_created.append(account)
        for username in sorted(usernames):
            user = user_model.objects.filter(username=username).first()
            if user is None:
                user = user_model(username=username)
                user.set_unusable_password()
                user.save()
                result.users_created.append(username)
            _, joined = Membership.objects.get_or_create(project=project, user=user)
            if joined:
                result.memberships_created.append((account, username))
    if result.projects_created:
        _retry_quarantine_everywhere()
    return result
