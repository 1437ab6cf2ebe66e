"""Provisioning a cluster's Slurm from the portal, through one reviewable plan.

Projects with a grant on the cluster become Slurm accounts (under their pool's parent account),
their members user associations, and each account's ``GrpTRESMins=billing`` holds the SU its
current budget periods have left (60 billing-minutes per SU, accounting/clusters/slurmconf.py).
``slurm_sync_plan`` compares that with what ``sacctmgr`` shows and keeps the difference as a
:class:`SlurmSyncPlan` for staff to approve; ``slurm_sync_apply`` runs it in ONE ``sacctmgr -i``
process that reads the plan's lines on its standard input, then reads Slurm again and records
which actions took effect. ``slurm_sync_check`` reports drift both ways without planning.
The rules of the plan itself (order, what is never deleted) are in allocations/slurm/plan.py.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path

from auditlog.models import LogEntry
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounting.clusters.slurmconf import billing_minutes
from accounting.models import Cluster
from allocations.grants.selectors import project_balances_get
from allocations.models import (
    Allocation,
    SlurmDriftCheck,
    SlurmSyncAction,
    SlurmSyncPlan,
    SlurmSyncRequest,
)
from allocations.slurm.commands import CommandOutcome, slurm_program_run
from allocations.slurm.plan import (
    ACCOUNT_FORMAT,
    ASSOCIATION_FORMAT,
    ROOT_ACCOUNT,
    Account,
    Action,
    PlanError,
    account_name,
    action_commands,
    action_done,
    name_checked,
    plan_build,
    plan_creates,
    plan_load_file,
    plan_script,
    state_parse,
)
from kit.access import is_staff, require
from kit.audit import audit_rows
from kit.queue import task_enqueue
from projects.models import Membership, PoolPartition, Project, ResourcePool

OUTPUT_KEPT_CHARS = 200_000  # a plan's whole sacctmgr output, for the audit of each line


class SlurmUnavailable(RuntimeError):
    """sacctmgr could not read the cluster's associations; the message has its output."""


@dataclass(frozen=True)
class DesiredState:
    accounts: dict[str, Account]
    skipped: list[str]  # projects or people left out, with why


def desired_state_build(*, cluster: Cluster) -> DesiredState:
    """The accounts the portal wants on ``cluster``: every project not archived with a grant on
    one of its pools (held at 0 billing-minutes between budget periods and when suspended or
    expired; an archived project's accounts are absent, so the plan proposes removing them),
    its members, and each pool's parent account. Balances come from the one balance selector.

    One account per project and pool, named by the one rule (``projects.accounts``: the code
    and the pool's suffix, ``pawsey0001`` and ``pawsey0001-gpu``), each limited to its own
    pool's SU, its members associated in the pool's partitions only (docs/slurm.md, "One
    Slurm limit per pool"). A pool that names no partition gets its accounts but no members:
    nothing could be charged to it."""
    accounts: dict[str, Account] = {}
    skipped: list[str] = []
    grants = (
        Allocation.objects.filter(pool__cluster=cluster)
        .exclude(project__status=Project.Status.ARCHIVED)
        .select_related("project", "pool")
        .order_by("project__code", "pool__name")
    )
    pools_of: dict[tuple[Project, ResourcePool], None] = {}
    for grant in grants:
        pools_of[(grant.project, grant.pool)] = None
    members: dict[int, set[str]] = {}
    for project_id, username in Membership.objects.filter(
        project__in={project for project, _ in pools_of}, user__is_active=True
    ).values_list("project_id", "user__username"):
        members.setdefault(project_id, set()).add(username)
    partitions_of: dict[int, set[str]] = {}
    for pool_id, name in PoolPartition.objects.filter(pool__cluster=cluster).values_list(
        "pool_id", "partition__name"
    ):
        partitions_of.setdefault(pool_id, set()).add(name)

    remaining: dict[int, dict[int, Decimal]] = {}
    for project, pool in pools_of:
        if project.pk not in remaining:
            remaining[project.pk] = _remaining_su(project)
        try:
            code = account_name(project.code, pool.slurm_account_suffix)
            partitions = {name_checked(name) for name in partitions_of.get(pool.pk, ())}
        except PlanError as error:
            skipped.append(f"project {project.code} in {pool.name}: {error}")
            continue
        if not partitions:
            skipped.append(f"members of {code}: pool {pool.name} names no partition")
        users = set()
        for username in sorted(members.get(project.pk, ())):
            try:
                users.add(name_checked(username))
            except PlanError as error:
                skipped.append(f"member of {project.code}: {error}")
        accounts[code] = Account(
            parent=name_checked(pool.slurm_parent_account or ROOT_ACCOUNT),
            billing_minutes=billing_minutes(remaining[project.pk].get(pool.pk, Decimal(0))),
            qos=frozenset(item.strip() for item in pool.slurm_qos.split(",") if item.strip())
            or None,
            default_qos=pool.slurm_default_qos or None,
            partition_users=frozenset(
                (user, name) for user in users for name in sorted(partitions)
            ),
        )
    for account in list(accounts.values()):
        if account.parent != ROOT_ACCOUNT and account.parent not in accounts:
            accounts[account.parent] = Account()
    return DesiredState(accounts=accounts, skipped=skipped)


def _remaining_su(project: Project) -> dict[int, Decimal]:
    """The SU the project's current budget period on each of its pools has left (by pool id),
    0 when overdrawn (a held project) and when suspended or expired; a pool between budget
    periods is missing (0 too)."""
    if project.status in (Project.Status.SUSPENDED, Project.Status.EXPIRED):
        return {}
    return {
        item.pool_id: max(item.current.remaining_su, Decimal(0))
        for item in project_balances_get(project=project).pools
        if item.current is not None
    }


def _sacctmgr(*arguments: str, stdin: str | None = None, data: bool = False) -> CommandOutcome:
    return slurm_program_run(
        ["sacctmgr", *arguments], stdin=stdin, keep=OUTPUT_KEPT_CHARS, data=data
    )


def actual_state_read(*, cluster: Cluster) -> dict[str, Account]:
    """The cluster's accounts as sacctmgr shows them; SlurmUnavailable when it cannot."""
    associations = _sacctmgr(
        "--parsable2", "--noheader", "show", "associations",
        "where", f"cluster={cluster.slurm_name}", f"format={ASSOCIATION_FORMAT}", data=True,
    )  # fmt: skip
    if not associations.succeeded:
        raise SlurmUnavailable(associations.output.strip() or f"exit {associations.exit_code}")
    accounts = _sacctmgr(
        "--parsable2", "--noheader", "show", "accounts", f"format={ACCOUNT_FORMAT}", data=True
    )
    if not accounts.succeeded:
        raise SlurmUnavailable(accounts.output.strip() or f"exit {accounts.exit_code}")
    try:
        return state_parse(associations.output.splitlines(), accounts.output.splitlines())
    except PlanError as error:
        raise SlurmUnavailable(f"unexpected sacctmgr output: {error}") from None


@dataclass(frozen=True)
class PlanOutcome:
    actions: list[Action]
    skipped: list[str]
    plan: SlurmSyncPlan | None  # None for a dry run, or when nothing is to be done


def slurm_sync_plan(
    *,
    cluster: Cluster,
    actor: User | None = None,
    dry_run: bool = False,
    delete_unmanaged: bool = False,
) -> PlanOutcome:
    """Compare the portal with Slurm and keep what differs as a pending plan (superseding any
    plan not applied yet). Nothing to do, or ``dry_run``: nothing is stored. Raises
    SlurmUnavailable when Slurm cannot be read."""
    if actor is not None:
        require(is_staff(actor), "only centre staff plan changes to Slurm")
    desired = desired_state_build(cluster=cluster)
    actual = actual_state_read(cluster=cluster)
    actions, unsafe = _renderable(
        plan_build(desired=desired.accounts, actual=actual, delete_unmanaged=delete_unmanaged),
        cluster=cluster.slurm_name,
    )
    skipped = desired.skipped + unsafe
    applied = [action for action in actions if action.applied]
    if dry_run or not applied:
        return PlanOutcome(actions=actions, skipped=skipped, plan=None)
    with transaction.atomic():
        for stale in SlurmSyncPlan.objects.select_for_update().filter(
            cluster=cluster,
            status__in=[SlurmSyncPlan.Status.PENDING, SlurmSyncPlan.Status.APPROVED],
        ):
            stale.status = SlurmSyncPlan.Status.SUPERSEDED
            stale.save(update_fields=["status"])
        plan = SlurmSyncPlan.objects.create(
            cluster=cluster, created_by=actor, delete_unmanaged=delete_unmanaged
        )
        rows = SlurmSyncAction.objects.bulk_create(
            [
                SlurmSyncAction(
                    plan=plan, position=position, verb=action.verb, account=action.account,
                    user=action.user, partition=action.partition, before=dict(action.before),
                    after=dict(action.after),
                    commands="\n".join(action_commands(action, cluster=cluster.slurm_name)),
                )
                for position, action in enumerate(applied)
            ],
            batch_size=2000,
        )  # fmt: skip
        # Every action is in the audit log, written in bulk (a large centre plans thousands).
        audit_rows(rows, action=LogEntry.Action.CREATE, changes_of=_created_changes, actor=actor)
    return PlanOutcome(actions=actions, skipped=skipped, plan=plan)


def _created_changes(row: SlurmSyncAction) -> dict[str, list[str]]:
    """What auditlog writes for a new row: each field from "None" to its value."""
    fields = (
        "plan", "position", "verb", "account", "user", "partition", "before", "after", "commands",
    )  # fmt: skip
    values = {
        "plan": str(row.plan_id), "position": str(row.position), "verb": row.verb,
        "account": row.account, "user": row.user, "partition": row.partition,
        "before": json.dumps(row.before),
        "after": json.dumps(row.after), "commands": row.commands,
    }  # fmt: skip
    return {field: ["None", values[field]] for field in fields}


def _renderable(actions: list[Action], *, cluster: str) -> tuple[list[Action], list[str]]:
    """Actions on names found in Slurm that a sacctmgr line would have to quote are left alone
    (and said so): the portal never hands sacctmgr a name it has not checked."""
    kept: list[Action] = []
    unsafe: list[str] = []
    for action in actions:
        try:
            action_commands(action, cluster=cluster)
        except PlanError as error:
            if action.applied:
                unsafe.append(f"{action.verb} {action.target}: {error}")
            action = replace(action, applied=False)
        kept.append(action)
    return kept, unsafe


def slurm_sync_approve(
    *, plan: SlurmSyncPlan, actor: User | None, enqueue: bool = True
) -> SlurmSyncPlan:
    """Staff approve a pending plan; a task applies it once this commits (``enqueue``). The
    actor is None for the ``slurm_sync --apply`` command, run by whoever runs the portal."""
    if actor is not None:
        require(is_staff(actor), "only centre staff approve changes to Slurm")
    with transaction.atomic():
        plan = SlurmSyncPlan.objects.select_for_update().get(pk=plan.pk)
        if plan.status != SlurmSyncPlan.Status.PENDING:
            return plan
        plan.status = SlurmSyncPlan.Status.APPROVED
        plan.approved_by, plan.approved_at = actor, timezone.now()
        plan.save(update_fields=["status", "approved_by", "approved_at"])
        if enqueue:
            task_enqueue(
                name="allocations.tasks.slurm_sync_apply",
                args=(plan.pk,),
                on_unsent=lambda unsent: _plan_unsent(plan.pk, unsent),
            )
    return plan


def _plan_unsent(plan_id: int, unsent: Exception) -> None:
    """An approved plan the task queue did not take fails at once, saying why (it waited as
    "approved" for a worker that would never come). Nothing was run: approve a new plan."""
    SlurmSyncPlan.objects.filter(pk=plan_id, status=SlurmSyncPlan.Status.APPROVED).update(
        status=SlurmSyncPlan.Status.FAILED,
        applied_at=timezone.now(),
        error=f"nothing was run: the plan could not be handed to a worker: {unsent}",
    )


def _actions_of(plan: SlurmSyncPlan) -> list[tuple[SlurmSyncAction, Action]]:
    return [
        (row, Action(row.verb, row.account, row.user, row.partition, row.before, row.after))  # type: ignore[arg-type]
        for row in plan.actions.order_by("position")
    ]


def _run_plan(todo: list[Action], *, cluster: str) -> CommandOutcome:
    """Carry out ``todo``: many creations in one ``sacctmgr -i load`` (one slurmdbd commit),
    everything else in one ``sacctmgr -i`` reading its script on standard input. At most two
    runs, whatever the size of the plan; their outputs are kept together."""
    creates = plan_creates(todo)
    rest = [action for action in todo if not any(action is create for create in creates)]
    outcomes = []
    if creates:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "plan.cfg"
            path.write_text(plan_load_file(creates, cluster=cluster))
            outcomes.append(_sacctmgr("-i", "load", f"file={path}"))
    if rest:
        outcomes.append(_sacctmgr("-i", stdin=plan_script(rest, cluster=cluster)))
    failed = [outcome.exit_code for outcome in outcomes if not outcome.succeeded]
    return replace(
        outcomes[-1],
        exit_code=failed[0] if failed else outcomes[-1].exit_code,
        output="\n".join(outcome.output for outcome in outcomes),
    )


def slurm_sync_apply(*, plan: SlurmSyncPlan) -> SlurmSyncPlan:
    """Apply an approved plan: the actions Slurm does not show done yet, in one
    ``sacctmgr -i`` run reading them on its standard input; then read Slurm again and mark each
    action done or not. Slurm unreachable beforehand: the plan stays approved, with the reason,
    and nothing was run. Any action not done afterwards: the plan fails, saying which."""
    if plan.status != SlurmSyncPlan.Status.APPROVED:
        return plan
    cluster = plan.cluster
    rows = _actions_of(plan)
    try:
        before = actual_state_read(cluster=cluster)
    except SlurmUnavailable as error:
        plan.error = f"Slurm could not be read, nothing was run: {error}"
        plan.save(update_fields=["error"])
        return plan
    todo = [action for _, action in rows if not action_done(action, before)]
    outcome = _run_plan(todo, cluster=cluster.slurm_name) if todo else None
    try:
        after = actual_state_read(cluster=cluster)
    except SlurmUnavailable as error:
        after = None
        plan.error = f"Slurm could not be read after the run; what was done is unknown: {error}"
    with transaction.atomic():
        for row, action in rows:
            row.done = None if after is None else action_done(action, after)
        for value in (True, False, None):
            SlurmSyncAction.objects.filter(
                pk__in=[row.pk for row, _ in rows if row.done is value]
            ).update(done=value)
        audit_rows(
            [row for row, _ in rows], action=LogEntry.Action.UPDATE,
            changes_of=lambda row: {"done": ["None", str(row.done)]},
            actor=plan.approved_by,
        )  # fmt: skip
        not_done = [str(row) for row, _ in rows if row.done is not True]
        plan.exit_code = outcome.exit_code if outcome else 0
        plan.output = outcome.output if outcome else "every action was already done"
        plan.applied_at = timezone.now()
        if after is not None and not_done:
            plan.error = f"{len(not_done)} of {len(rows)} actions not done: {', '.join(not_done)}"
        elif after is not None:
            plan.error = ""
        plan.status = SlurmSyncPlan.Status.APPLIED if not not_done else SlurmSyncPlan.Status.FAILED
        plan.save()
    return plan


# What a plan may change without review, on pools with ``slurm_limits_auto``.
LIMIT_FIELDS = frozenset({"GrpTRESMins"})


def _limit_only(row: SlurmSyncAction) -> bool:
    return row.verb == "modify" and not row.user and set(row.after) <= LIMIT_FIELDS


def slurm_limits_refresh(*, cluster: Cluster) -> SlurmSyncPlan | None:
    """Balances moved (an import, a grant, an adjustment, a new budget period): on a cluster
    with a pool that sets ``slurm_limits_auto``, plan again, apply the limit changes at once
    as a plan of their own (approved by the portal), and leave the rest pending for review.
    Returns the limits' plan, or None when no limit changed. Raises SlurmUnavailable."""
    if not ResourcePool.objects.filter(cluster=cluster, slurm_limits_auto=True).exists():
        return None
    plan = slurm_sync_plan(cluster=cluster).plan
    if plan is None:
        return None
    rows = list(plan.actions.order_by("position"))
    limits = [row for row in rows if _limit_only(row)]
    if not limits:
        return None
    if len(limits) < len(rows):
        with transaction.atomic():
            limits_plan = SlurmSyncPlan.objects.create(cluster=cluster)
            SlurmSyncAction.objects.filter(pk__in=[row.pk for row in limits]).update(
                plan=limits_plan
            )
        plan = limits_plan
    return slurm_sync_apply(plan=slurm_sync_approve(plan=plan, actor=None, enqueue=False))


def slurm_sync_check(*, cluster: Cluster, delete_unmanaged: bool = False) -> SlurmDriftCheck:
    """Compare the portal with Slurm both ways and record the drift with the commands that
    would fix it (those the portal would not run without being told are marked so)."""
    desired = desired_state_build(cluster=cluster)
    try:
        actual = actual_state_read(cluster=cluster)
    except SlurmUnavailable as error:
        return SlurmDriftCheck.objects.create(cluster=cluster, error=str(error))
    actions = plan_build(desired=desired.accounts, actual=actual, delete_unmanaged=delete_unmanaged)
    return SlurmDriftCheck.objects.create(
        cluster=cluster, drift=actions_json(actions, cluster=cluster.slurm_name)
    )


def actions_json(actions: Sequence[Action], *, cluster: str) -> list[dict[str, object]]:
    """Actions as the command's --json and the drift check show them, with their commands."""
    return [
        {**action.to_json(), "commands": _commands_or_none(action, cluster)} for action in actions
    ]


def _commands_or_none(action: Action, cluster: str) -> list[str]:
    try:
        return action_commands(action, cluster=cluster)
    except PlanError:
        return []  # a name that would need quoting: no command is offered


@dataclass(frozen=True)
class ClusterSyncView:
    cluster: Cluster
    last_check: SlurmDriftCheck | None
    plans: list[SlurmSyncPlan]  # waiting for review or to be applied, newest first
    recent: list[SlurmSyncPlan]  # applied or failed lately, newest first
    last_request: SlurmSyncRequest | None = None  # the last "Plan now" or "Check for drift"


RECENT_PLANS = 10


def slurm_sync_overview() -> list[ClusterSyncView]:
    """What the staff page shows per cluster with resource pools: the plans waiting, the last
    ones applied or failed, and the last drift check. A fixed number of queries."""
    clusters = list(
        Cluster.objects.filter(resource_pools__isnull=False).distinct().order_by("name")
    )
    open_statuses = [SlurmSyncPlan.Status.PENDING, SlurmSyncPlan.Status.APPROVED]
    plans = list(
        SlurmSyncPlan.objects.filter(cluster__in=clusters, status__in=open_statuses)
        .select_related("created_by", "approved_by")
        .prefetch_related("actions")
    )
    recent = list(
        SlurmSyncPlan.objects.filter(
            cluster__in=clusters,
            status__in=[SlurmSyncPlan.Status.APPLIED, SlurmSyncPlan.Status.FAILED],
        )
        .select_related("approved_by")
        .prefetch_related("actions")[: RECENT_PLANS * max(len(clusters), 1)]
    )
    checks: dict[int, SlurmDriftCheck] = {}
    for check in SlurmDriftCheck.objects.filter(cluster__in=clusters).order_by("-checked_at")[
        : 20 * max(len(clusters), 1)
    ]:
        checks.setdefault(check.cluster_id, check)
    requests: dict[int, SlurmSyncRequest] = {}
    for request in SlurmSyncRequest.objects.filter(cluster__in=clusters).select_related(
        "requested_by"
    )[: 20 * max(len(clusters), 1)]:
        requests.setdefault(request.cluster_id, request)
    return [
        ClusterSyncView(
            cluster=cluster,
            last_request=requests.get(cluster.pk),
            last_check=checks.get(cluster.pk),
            plans=[plan for plan in plans if plan.cluster_id == cluster.pk],
            recent=[plan for plan in recent if plan.cluster_id == cluster.pk][:RECENT_PLANS],
        )
        for cluster in clusters
    ]


def slurm_sync_request(*, cluster: Cluster, actor: User, check: bool) -> SlurmSyncRequest:
    """Staff ask for a new plan (or a drift check) of ``cluster``: a task reads Slurm, never
    the web request. The request is kept, and the task says how it ended (the page shows it)."""
    require(is_staff(actor), "only centre staff plan changes to Slurm")
    kind = SlurmSyncRequest.Kind.CHECK if check else SlurmSyncRequest.Kind.PLAN
    request = SlurmSyncRequest.objects.create(cluster=cluster, kind=kind, requested_by=actor)
    task_enqueue(
        name="allocations.tasks.slurm_sync_check" if check else "allocations.tasks.slurm_sync_plan",
        kwargs={"cluster_id": cluster.pk, "request_id": request.pk}
        if check
        else {"cluster_id": cluster.pk, "actor_id": actor.pk, "request_id": request.pk},
        on_unsent=lambda unsent: slurm_sync_request_end(
            request.pk,
            outcome=SlurmSyncRequest.Outcome.FAILED,
            error=f"it could not be handed to a worker: {unsent}",
        ),
    )
    return request


def slurm_sync_request_end(
    request_id: int | None,
    *,
    outcome: SlurmSyncRequest.Outcome,
    error: str = "",
    plan: SlurmSyncPlan | None = None,
) -> None:
    """Record how a staff request ended (nothing for a run that no request asked for)."""
    if request_id is None:
        return
    SlurmSyncRequest.objects.filter(pk=request_id).update(
        outcome=outcome, error=error, plan=plan, finished_at=timezone.now()
    )
