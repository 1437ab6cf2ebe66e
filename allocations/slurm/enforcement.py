"""Budget thresholds: notify at 75 / 90 / 100 % (per pool), propose Slurm actions, run them
only where the cluster allows it, and restore automatically in a new budget period.

The Pawsey practice: a project that used its budget period keeps running at low priority
(``sacctmgr -i modify account name=X set qos=lowpriority``) until its next period starts.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from allocations.grants.selectors import balance_for_period, pool_today
from allocations.models import BudgetPeriod, EnforcementAction, ThresholdNotice
from allocations.slurm.commands import slurm_command_run
from kit import numbers
from kit.access import is_staff, require
from people.mail import MailKind, mail_recipients, mail_send, portal_link
from projects.models import Membership


@dataclass
class ThresholdReport:
    notices: list[ThresholdNotice] = field(default_factory=list)
    actions: list[EnforcementAction] = field(default_factory=list)


def _render(template: str, period: BudgetPeriod) -> str:
    allocation = period.allocation
    return template.format(
        account=shlex.quote(allocation.project.code),
        cluster=shlex.quote(allocation.pool.cluster.name),
    )


def _recipients(period: BudgetPeriod) -> list[str]:
    """The PI, PI members and members who asked for alerts, unless they turned alerts off."""
    project = period.allocation.project
    members = Membership.objects.filter(project=project).select_related("user")
    people = [
        membership.user
        for membership in members
        if membership.role == Membership.Role.PI or membership.notify
    ]
    return mail_recipients([project.pi, *people], MailKind.BUDGET_ALERTS)


# ThresholdNotice.percent_used holds up to 9,999,999.99 %: a tiny grant far overspent (0.001 SU
# granted, 10,000 used) is recorded at that ceiling instead of failing the whole check.
_PERCENT_RECORDED_MAX = Decimal("9999999.99")


def _notice_record(
    period: BudgetPeriod, threshold: int, percent: Decimal, recipients: list[str]
) -> ThresholdNotice | None:
    """Record that ``period`` crossed ``threshold``; None when that was recorded before."""
    try:
        with transaction.atomic():
            return ThresholdNotice.objects.create(
                budget_period=period, threshold=threshold,
                percent_used=min(percent, _PERCENT_RECORDED_MAX),
                recipients=", ".join(recipients),
            )  # fmt: skip
    except IntegrityError:
        return None  # noticed already (a concurrent check, or an earlier run)


def _notices_mail(period: BudgetPeriod, notices: list[ThresholdNotice], percent: Decimal) -> None:
    """One mail for the thresholds one check found crossed: the highest of them. Crossing 75 %
    and 90 % in one import says "90 %" once, not two mails at the same minute."""
    recipients = notices[0].recipients.split(", ") if notices[0].recipients else []
    if not recipients:
        return
    threshold = max(notice.threshold for notice in notices)
    allocation = period.allocation
    subject = f"{allocation.project.code} has used {percent}% of its {allocation.pool} budget"
    body = (
        f"Project {allocation.project.code} has used {percent}% of its budget on "
        f"{allocation.pool} for {numbers.period(period.start, period.end)} "
        f"(threshold {threshold}%).\n"
    )
    if threshold >= 100 and allocation.pool.limit_command:
        body += "Jobs will keep running at a lower priority until the next budget period.\n"
    link = portal_link(reverse("allocations:project-detail", args=[allocation.project.code]))
    mail_send(recipients=recipients, subject=subject, body=body, link=link)


def _propose(period: BudgetPeriod, kind: str, template: str) -> EnforcementAction | None:
    if not template:
        return None
    allocation = period.allocation
    try:
        with transaction.atomic():
            return EnforcementAction.objects.create(
                project=allocation.project, pool=allocation.pool, budget_period=period, kind=kind,
                command=_render(template, period),
            )  # fmt: skip
    except IntegrityError:
        return None


def _was_limited_before(period: BudgetPeriod) -> bool:
    """Was the project limited on this pool in an earlier period and not restored since?
    A limit that failed or that staff dismissed never took effect, so it needs no restore."""
    allocation = period.allocation
    last = (
        EnforcementAction.objects.filter(
            project=allocation.project, pool=allocation.pool, budget_period__start__lt=period.start
        )
        .exclude(status__in=[EnforcementAction.Status.DISMISSED, EnforcementAction.Status.FAILED])
        .order_by("-budget_period__start", "-created_at")
        .first()
    )
    return last is not None and last.kind == EnforcementAction.Kind.LIMIT


@transaction.atomic
def thresholds_check(*, on: date | None = None) -> ThresholdReport:
    """Look at every current budget period once: notices, limits and restores. Idempotent."""
    report = ThresholdReport()
    periods = BudgetPeriod.objects.select_related(
        "allocation__project__pi", "allocation__pool__cluster"
    ).order_by("pk")
    for period in periods:
        pool = period.allocation.pool
        day = on or pool_today(pool)
        if not period.start <= day < period.end:
            continue
        balance = balance_for_period(period=period, on=day)
        percent = balance.percent_used
        if percent is None:
            continue
        crossed = [threshold for threshold in pool.thresholds if percent >= threshold]
        if crossed:
            recipients = _recipients(period)
            notices = [
                notice
                for threshold in crossed
                if (notice := _notice_record(period, threshold, percent, recipients)) is not None
            ]
            if notices:
                _notices_mail(period, notices, percent)
                report.notices.extend(notices)
        if percent >= 100:
            action = _propose(period, EnforcementAction.Kind.LIMIT, pool.limit_command)
        elif _was_limited_before(period):
            action = _propose(period, EnforcementAction.Kind.RESTORE, pool.restore_command)
        else:
            action = None
        if action is not None:
            report.actions.append(action)
    return report


def enforcement_execute(
    *, action: EnforcementAction, actor: User | None = None
) -> EnforcementAction:
    """Run a proposed action when its cluster allows it; log the exit code and output.

    The command is split with shlex and run without a shell; account and cluster names
    were quoted when it was rendered.
    """
    if actor is not None:
        require(is_staff(actor), "only centre staff run Slurm actions")
    cluster = action.pool.cluster
    if action.status != EnforcementAction.Status.PROPOSED or not cluster.enforcement_enabled:
        return action
    outcome = slurm_command_run(action.command)
    action.exit_code, action.output = outcome.exit_code, outcome.output
    action.status = (
        EnforcementAction.Status.EXECUTED
        if action.exit_code == 0
        else EnforcementAction.Status.FAILED
    )
    action.executed_at = timezone.now()
    action.save(update_fields=["exit_code", "output", "status", "executed_at"])
    return action


def enforcement_dismiss(*, action: EnforcementAction, actor: User) -> EnforcementAction:
    require(is_staff(actor), "only centre staff dismiss Slurm actions")
    if action.status == EnforcementAction.Status.PROPOSED:
        action.status = EnforcementAction.Status.DISMISSED
        action.save(update_fields=["status"])
    return action


def enforcement_run_proposed() -> list[EnforcementAction]:
    """Run every proposed action of clusters that enable enforcement."""
    proposed = EnforcementAction.objects.filter(
        status=EnforcementAction.Status.PROPOSED, pool__cluster__enforcement_enabled=True
    ).select_related("pool__cluster")
    return [enforcement_execute(action=action) for action in proposed.order_by("created_at")]


def enforcement_actions_recent(*, limit: int = 500) -> list[EnforcementAction]:
    """The actions staff review: open ones first, newest first."""
    return list(
        EnforcementAction.objects.select_related("project", "pool__cluster").order_by(
            "status", "-created_at"
        )[:limit]
    )


def enforcement_action_get(*, pk: int) -> EnforcementAction | None:
    return EnforcementAction.objects.select_related("pool__cluster").filter(pk=pk).first()
