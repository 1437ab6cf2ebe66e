"""Onboarding from Slurm: projects and memberships created from sacctmgr associations."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction

from accounting.models import Cluster
from allocations.slurm.accounts import associations_parse
from projects.accounts import project_code_of
from projects.models import Membership, Project
from projects.selectors import account_suffixes, project_for_account
from projects.services import projects_created_announce

# --- Onboarding from Slurm ------------------------------------------------------------------


@dataclass
class AccountsSyncResult:
    projects_created: list[str] = field(default_factory=list)
    users_created: list[str] = field(default_factory=list)
    memberships_created: list[tuple[str, str]] = field(default_factory=list)
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    other_clusters: dict[str, int] = field(default_factory=dict)


@transaction.atomic
def slurm_accounts_sync(*, lines: Iterable[str], cluster: Cluster | str) -> AccountsSyncResult:
    """Create projects and memberships from sacctmgr associations; idempotent, additive.

    ``cluster`` is the portal cluster (its Slurm name selects the rows), or the Slurm name of a
    cluster the portal does not know. An account books to the project the import would book its
    jobs to on that cluster (one rule, ``projects.selectors.project_for_account``, over the
    cluster's pools): a pool's own account (``code-gpu``) joins its project. Slurm users without
    a portal login get one with no usable password (they sign in through the centre's identity
    provider or after a password reset). Nothing is removed.
    """
    slurm_name = cluster.slurm_name if isinstance(cluster, Cluster) else cluster
    associations = associations_parse(lines, cluster=slurm_name)
    result = AccountsSyncResult(
        skipped_lines=associations.skipped_lines, other_clusters=dict(associations.other_clusters)
    )
    user_model = get_user_model()
    suffixes = account_suffixes(cluster_ids=[cluster.pk] if isinstance(cluster, Cluster) else [])
    for account, usernames in sorted(associations.accounts.items()):
        project = project_for_account(account, suffixes=suffixes)
        if project is None:
            code = project_code_of(account, suffixes)
            project = Project.objects.create(code=code, title=f"{code} (from Slurm)")
            result.projects_created.append(code)
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
    projects_created_announce(codes=result.projects_created)
    return result
