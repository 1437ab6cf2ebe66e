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

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from auditlog.middleware import AuditlogMiddleware
from django.contrib.auth.models import User
from django.core.exceptions import FieldDoesNotExist
from django.db.models import (
    BooleanField,
    DateField,
    DateTimeField,
    DecimalField,
    Field,
    Model,
    QuerySet,
)
from django.http import HttpRequest

from kit import numbers
from kit.access import Actor
from people.lockout import client_address
from projects.access import projects_audited

AUDITED_NAMES = {
    "allocations.allocation": "grant",
    "allocations.budgetperiod": "budget period",
    "allocations.adjustment": "adjustment",
    "allocations.membership": "membership",
    "allocations.project": "project",
    "projects.membership": "membership",  # the models moved to projects with their content types
    "projects.project": "project",
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
        auditlog.register(model, exclude_fields=_reverse_relations(model))
    # What staff run from their pages (docs/allocations.md, "Staff work in the portal").
    for staff_model in (AllocationRound, RoundPool, ResourcePool, PoolPartition):
        auditlog.register(staff_model, exclude_fields=_reverse_relations(staff_model))
    # Each Slurm action when it is planned and when Slurm shows it done; a plan's review and
    # outcome, not sacctmgr's whole output.
    auditlog.register(SlurmSyncAction, exclude_fields=_reverse_relations(SlurmSyncAction))
    auditlog.register(SlurmSyncPlan, exclude_fields=["output", *_reverse_relations(SlurmSyncPlan)])
    auditlog.register(
        ApiToken, exclude_fields=["digest", "last_used_at", *_reverse_relations(ApiToken)]
    )
    # A person's roles, not their profile or their last sign-in.
    auditlog.register(
        User, include_fields=["is_staff", "is_superuser", "is_active"], m2m_fields={"groups"}
    )


def _reverse_relations(model: type[Model]) -> list[str]:
    """The other models' foreign keys to ``model`` (a grant's ``budget_periods``): auditlog
    would record each as "None -> allocations.BudgetPeriod.None". They are not the model's
    values; their own entries say what changed."""
    return [
        field.name
        for field in model._meta.get_fields()
        if field.auto_created and not field.concrete
    ]


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


# --- How an entry reads ---------------------------------------------------------------------
# One rule for every entry: its fields named as the model names them, a foreign key as the
# name of what it points to (a project's code, a pool's name, a person's username), SU grouped
# (kit/numbers.py), a period's end as its last day; and for the entries people look for most
# (grants, budget periods, adjustments, memberships) a sentence of what happened.

_ACTIONS = {0: "created", 1: "changed", 2: "deleted", 3: "read"}
_EMPTY = {"None", ""}


@dataclass(frozen=True)
class AuditLine:
    """One entry as the audit page shows it: the sentence and each change in words."""

    entry: Any
    kind: str
    sentence: str
    changes: list[tuple[str, str, str]]  # (what, before, after); "" when there is none


def audit_kind(entry: object) -> str:
    content_type = getattr(entry, "content_type", None)
    key = f"{content_type.app_label}.{content_type.model}" if content_type else ""
    return AUDITED_NAMES.get(key, key)


def audit_lines(entries: Iterable[Any]) -> list[AuditLine]:
    """Each entry in words (the one rule above). Names of the objects the entries point to are
    read with one query per kind of object, whatever the number of entries."""
    entries = list(entries)
    names = _names_pointed_to(entries)
    return [_line(entry, names) for entry in entries]


def _model_of(entry: Any) -> type[Model] | None:
    content_type = getattr(entry, "content_type", None)
    return content_type.model_class() if content_type is not None else None


def _field(model: type[Model] | None, name: str) -> Field | None:
    if model is None:
        return None
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return None
    return field if isinstance(field, Field) else None  # a reverse relation is no Field


def _changes(entry: Any) -> dict[str, Any]:
    changes = getattr(entry, "changes", None) or {}
    return changes if isinstance(changes, dict) else {}


def _names_pointed_to(entries: list[Any]) -> dict[tuple[type[Model], str], str]:
    wanted: dict[type[Model], set[str]] = {}
    for entry in entries:
        model = _model_of(entry)
        for name, change in _changes(entry).items():
            field = _field(model, name)
            if field is None or not field.is_relation or not isinstance(change, list):
                continue
            related = field.related_model
            assert isinstance(related, type)
            wanted.setdefault(related, set()).update(
                str(value) for value in change if str(value) not in _EMPTY
            )
    names: dict[tuple[type[Model], str], str] = {}
    for related, keys in wanted.items():
        valid = [key for key in keys if key.isdigit()]
        for obj in related._default_manager.filter(pk__in=valid):
            names[(related, str(obj.pk))] = _name(obj)
    return names


def _name(obj: Model) -> str:
    """What people call an object: a person's username, a project's code, a pool's name."""
    for attribute in ("code", "username", "name"):
        value = getattr(obj, attribute, None)
        if isinstance(value, str) and value:
            return value
    return str(obj)


def _value(
    model: type[Model] | None, name: str, raw: Any, names: dict[tuple[type[Model], str], str]
) -> str:
    """A stored value in words; "" for none."""
    text = "" if raw is None else str(raw)
    if text in _EMPTY:
        return ""
    field = _field(model, name)
    if field is None:
        return text
    if field.is_relation and isinstance(field.related_model, type):
        return names.get((field.related_model, text), f"#{text} (deleted)")
    if field.choices:
        return str(dict(field.flatchoices).get(text, text))
    if isinstance(field, BooleanField):
        return {"True": "yes", "False": "no"}.get(text, text)
    if isinstance(field, DecimalField) and name.endswith("_su"):
        try:
            return f"{numbers.su(Decimal(text))} SU"
        except InvalidOperation:
            return text
    if isinstance(field, DateTimeField):
        return text[:16]  # to the minute, as the page's "When" column
    if isinstance(field, DateField) and name in _EXCLUSIVE_ENDS:
        return _last_day_text(text)
    return text


_EXCLUSIVE_ENDS = {"period_end", "end"}  # stored as [start, end): people read the last day


def _last_day_text(text: str) -> str:
    try:
        return numbers.period_last_day(date.fromisoformat(text))
    except ValueError:
        return text


def _label(model: type[Model] | None, name: str) -> str:
    field = _field(model, name)
    if field is None:
        return name.replace("_", " ")
    if name in _EXCLUSIVE_ENDS:
        return "last day"
    return str(field.verbose_name)


def _line(entry: Any, names: dict[tuple[type[Model], str], str]) -> AuditLine:
    model = _model_of(entry)
    action = getattr(entry, "action", 1)
    rows: list[tuple[str, str, str]] = []
    after: dict[str, str] = {}
    for name, change in _changes(entry).items():
        if isinstance(change, dict) and change.get("type") == "m2m":
            objects = ", ".join(str(item) for item in change.get("objects", []))
            verb = "removed" if change.get("operation") == "delete" else "added"
            rows.append((_label(model, name), "", f"{verb} {objects}"))
            continue
        if name == "id" or (model is not None and _field(model, name) is None):
            continue  # the key, or a reverse relation recorded before it was excluded
        before_raw, after_raw = (
            change if isinstance(change, list) and len(change) == 2 else (None, change)
        )
        before = _value(model, name, before_raw, names)
        now = _value(model, name, after_raw, names)
        after[name] = now or before  # on a delete, what it was
        field = _field(model, name)
        if before == now or getattr(field, "auto_now_add", False):
            continue  # unchanged, or the entry's own time
        if action == 2:
            rows.append((_label(model, name), "", before))  # what was deleted
        else:
            rows.append((_label(model, name), before, now))
    who = entry.actor.get_username() if getattr(entry, "actor", None) else "the portal"
    sentence = _sentence(audit_kind(entry), action, after, who) or (
        f"{_ACTIONS.get(action, 'changed')} {audit_kind(entry)} "
        f"{getattr(entry, 'object_repr', '')}".rstrip()
    )
    return AuditLine(entry=entry, kind=audit_kind(entry), sentence=sentence, changes=rows)


def _sentence(kind: str, action: int, values: dict[str, str], who: str) -> str:
    """The sentence of an entry people look for most; "" for the others."""
    created, deleted = action == 0, action == 2
    if kind == "grant" and created:
        by = values.get("granted_by") or who
        period = ""
        if values.get("period_start") and values.get("period_end"):
            period = f" for {values['period_start']} to {values['period_end']}"
        return (
            f"granted {values.get('granted_su', 'SU')} to {values.get('project', '?')} "
            f"({values.get('pool', '?')}){period} by {by}"
        )
    if kind == "budget period" and created:
        return (
            f"budget period {values.get('start', '?')} to {values.get('end', '?')}: "
            f"{values.get('budget_su', '?')}"
        )
    if kind == "adjustment" and created:
        amount = values.get("amount_su", "")
        return (
            f"{values.get('kind', 'adjustment')} of {amount.lstrip('-')} "
            f"{'from' if amount.startswith('-') else 'to'} {values.get('project', '?')} "
            f"by {values.get('actor') or who}"
        ) + (f" ({values['reason']})" if values.get("reason") else "")
    if kind == "membership":
        user, project, role = (
            values.get("user", "?"),
            values.get("project", "?"),
            values.get("role"),
        )
        if created:
            return f"added {user} to {project} as {role or 'member'} by {who}"
        if deleted:
            return f"removed {user} from {project} by {who}"
        if role and "user" in values:
            return f"made {user} {role} of {project} by {who}"
    return ""
