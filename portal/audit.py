"""The audit log: who changed what, when, with the values before and after (django-auditlog).

One registry, here: grants and their budget periods, adjustments (a transfer is its two
sides, sharing ``transfer_id``), memberships and PIs, committee seats, rounds and what they
offer, resource pools and their partitions, staff and group changes
of people, rate versions of partitions, API tokens (never their digest), enforcement actions,
Slurm provisioning plans and each of their actions. An entry of a project's thing names the
project (``get_additional_data``: ``AuditedInProject`` in projects/models.py, and models of
allocations/models/), so the project's PI can read it; staff read everything
(allocations/access.py, ``projects_audited``). The actor is the signed-in person for pages, the
API and the admin (AuditlogMiddleware), and "the portal" for tasks and commands.
"""

from __future__ import annotations

from typing import Any

from auditlog.middleware import AuditlogMiddleware
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest

from kit.access import Actor
from people.lockout import client_address
from projects.access import projects_audited

AUDITED_NAMES = {
    "allocations.allocation": "grant",
    "allocations.budgetperiod": "budget period",
    "allocations.adjustment": "adjustment",
    "allocations.membership": "membership",
    "allocations.project": "project",
    "allocations.committeemember": "committee seat",
    "allocations.allocationround": "round",
    "allocations.roundpool": "SU a round offers",
    "projects.resourcepool": "resource pool",
    "projects.poolpartition": "partition of a pool",
    "allocations.enforcementaction": "enforcement action",
    "allocations.slurmsyncplan": "Slurm plan",
    "allocations.slurmsyncaction": "Slurm action",
    "accounting.partitionversion": "rate version",
    "people.apitoken": "API token",
    "auth.user": "person",
}


def audit_register() -> None:
    """Put every audited model in auditlog's registry (PortalConfig.ready)."""
    from auditlog.registry import auditlog

    from accounting.models import PartitionVersion
    from allocations.models import (
        Adjustment,
        Allocation,
        AllocationRound,
        BudgetPeriod,
        CommitteeMember,
        EnforcementAction,
        RoundPool,
        SlurmSyncAction,
        SlurmSyncPlan,
    )
    from people.models import ApiToken
    from projects.models import Membership, PoolPartition, Project, ResourcePool

    for model in (Allocation, BudgetPeriod, Adjustment, Membership, Project, CommitteeMember,
                  EnforcementAction, PartitionVersion):  # fmt: skip
        auditlog.register(model)
    # What staff run from their pages (docs/allocations.md, "Staff work in the portal").
    for staff_model in (AllocationRound, RoundPool, ResourcePool, PoolPartition):
        auditlog.register(staff_model)
    # Each Slurm action when it is planned and when Slurm shows it done; a plan's review and
    # outcome, not sacctmgr's whole output.
    auditlog.register(SlurmSyncAction)
    auditlog.register(SlurmSyncPlan, exclude_fields=["output"])
    auditlog.register(ApiToken, exclude_fields=["digest", "last_used_at"])
    # A person's roles, not their profile or their last sign-in.
    auditlog.register(
        User, include_fields=["is_staff", "is_superuser", "is_active"], m2m_fields={"groups"}
    )


class AuditActorMiddleware(AuditlogMiddleware):
    """auditlog's middleware with the client address the lockout uses (X-Forwarded-For only
    from trusted proxies). API calls with a token get their actor when the token is checked
    (people/authentication.py), after this middleware has run."""

    def get_extra_data(self, request: HttpRequest) -> dict[str, Any]:
        data: dict[str, Any] = super().get_extra_data(request)
        data["remote_addr"] = client_address(request)
        return data


def audit_entries(*, user: Actor, project: str | None = None) -> QuerySet:
    """The entries ``user`` may read, newest first; only ``project``'s when given."""
    from auditlog.models import LogEntry

    entries = LogEntry.objects.select_related("actor", "content_type").order_by("-timestamp")
    allowed = projects_audited(user=user)
    if allowed is not None:
        entries = entries.filter(
            additional_data__project__in=list(allowed.values_list("code", flat=True))
        )
    if project:
        entries = entries.filter(additional_data__project=project)
    return entries


def audit_changes(entry: object) -> list[tuple[str, str, str]]:
    """(field, before, after) of an entry, in words; a many-to-many change as added/removed."""
    changes: Any = getattr(entry, "changes", None) or {}
    rows = []
    for field, change in changes.items():
        if isinstance(change, list) and len(change) == 2:
            rows.append((field, str(change[0]), str(change[1])))
        elif isinstance(change, dict) and change.get("type") == "m2m":
            objects = ", ".join(str(name) for name in change.get("objects", []))
            verb = "removed" if change.get("operation") == "delete" else "added"
            rows.append((field, "", f"{verb} {objects}"))
        else:
            rows.append((field, "", str(change)))
    return rows


def audit_kind(entry: object) -> str:
    content_type = getattr(entry, "content_type", None)
    key = f"{content_type.app_label}.{content_type.model}" if content_type else ""
    return AUDITED_NAMES.get(key, key)
