"""When a grant ends (docs/allocations.md, "When a grant ends"): notices to the PI and managers
before the end, a final usage summary to the PI at the end of the project's last grant, and
the project's status following its grants (active, expired, archived; the rules are pure, in
``allocations/grants/lifecycle.py``). An archived project is read-only
(``projects.access.project_writable_check``); staff un-archiving it is the one write allowed.

Everything here is idempotent: a notice is recorded once per grant, end and days
(:class:`GrantExpiryNotice`: an extended grant is announced again before its new end), a
status changes once, so a second run mails no one twice.
Whoever turned "grants ending" off on their notifications page is not mailed (people/mail.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from allocations.grants import lifecycle
from allocations.grants.selectors import balance_get, grant_balances_of
from allocations.models import Allocation, GrantExpiryNotice
from kit import numbers
from kit.access import is_staff, require
from people.mail import MailKind, mail_recipients, mail_send, portal_link
from projects.models import Membership, Project

ZERO = Decimal(0)


def _today(today: date | None) -> date:
    return today or timezone.localdate()


def _project_link(project: Project) -> str:
    return portal_link(reverse("allocations:project-detail", args=[project.code]))


def _people(project: Project, roles: list[str]) -> list[User | None]:
    """The project's PI and its members with ``roles``."""
    members = Membership.objects.filter(project=project, role__in=roles).select_related("user")
    return [project.pi, *(membership.user for membership in members)]


# --- Notices before a grant ends ------------------------------------------------------------


def _continued(allocation: Allocation) -> bool:
    """Another grant of the project on the pool takes over when this one ends: no notice."""
    return Allocation.objects.filter(
        project_id=allocation.project_id,
        pool_id=allocation.pool_id,
        period_start__lte=allocation.period_end,
        period_end__gt=allocation.period_end,
    ).exists()


def _notice_text(allocation: Allocation, *, days_left: int, today: date) -> str:
    project, pool = allocation.project, allocation.pool
    last_day = allocation.period_end - timedelta(days=1)
    balance = balance_get(project=project, pool=pool, on=today)
    left = (
        f"{numbers.su(balance.remaining_su)} SU of its current budget period are left"
        if balance is not None
        else "no budget period of it runs today"
    )
    return (
        f"The grant of {numbers.su(allocation.granted_su)} SU to {project.code} on {pool.name} "
        f"({numbers.period(allocation.period_start, allocation.period_end)}) ends in "
        f"{numbers.plural(days_left, 'day')}, on {last_day:%Y-%m-%d}; {left}. "
        f"SU left at its end are not carried beyond it.\n"
        f"To go on computing on {pool.name} after that, ask for a renewal or an extension from "
        f"the project's page. Without a grant, the project expires when its last grant ends "
        f"and is archived (read-only) {settings.PORTAL_ARCHIVE_AFTER_DAYS} days later."
    )


def grant_expiry_notices_send(*, today: date | None = None) -> list[GrantExpiryNotice]:
    """Tell the PI and managers of each project whose grant ends within a notice's days
    (PORTAL_GRANT_EXPIRY_NOTICE_DAYS) that it ends; one mail per notice per grant, the most
    urgent notice reached only. Grants that another grant of the pool continues are left out;
    so are archived projects. Returns the notices recorded by this run."""
    day = _today(today)
    notice_days = list(settings.PORTAL_GRANT_EXPIRY_NOTICE_DAYS)
    if not notice_days:
        return []
    # Days left count to the grant's last day (the day before its period_end): on the last
    # day of a grant ending 2026-12-31, on 2026-12-24 it "ends in 7 days".
    horizon = day + timedelta(days=max(notice_days) + 1)
    ending = (
        Allocation.objects.filter(period_end__gt=day, period_end__lte=horizon)
        .exclude(project__status=Project.Status.ARCHIVED)
        .select_related("project__pi", "pool")
        .order_by("period_end", "project__code", "pool__name")
    )
    recorded = []
    for allocation in ending:
        days_left = (allocation.period_end - timedelta(days=1) - day).days
        due = lifecycle.notice_due(days_left=days_left, notice_days=notice_days)
        if due is None or _continued(allocation):
            continue
        told = GrantExpiryNotice.objects.filter(
            allocation=allocation, grant_end=allocation.period_end, days_before=due
        )
        if told.exists():
            continue
        project = allocation.project
        recipients = mail_recipients(
            _people(project, [Membership.Role.PI, Membership.Role.MANAGER]),
            MailKind.GRANT_ENDINGS,
        )
        try:
            with transaction.atomic():
                notice = GrantExpiryNotice.objects.create(
                    allocation=allocation, grant_end=allocation.period_end, days_before=due,
                    recipients=", ".join(recipients),
                )  # fmt: skip
                mail_send(
                    recipients=recipients,
                    subject=f"{project.code}: the grant on {allocation.pool.name} ends in "
                    f"{days_left} days",
                    body=_notice_text(allocation, days_left=days_left, today=day),
                    link=_project_link(project),
                )
        except IntegrityError:  # a concurrent run recorded it first
            continue
        recorded.append(notice)
    return recorded


# --- The final usage summary ----------------------------------------------------------------


@dataclass(frozen=True)
class PoolSummary:
    """A pool's last grant, at its end: SU granted (with adjustments), used, left unused."""

    pool: str
    start: date
    last_day: date
    granted_su: Decimal
    used_su: Decimal

    @property
    def remaining_su(self) -> Decimal:
        return self.granted_su - self.used_su


def final_summary_get(*, project: Project) -> list[PoolSummary]:
    """Per pool, the project's last grant as it ended: its budget periods' budgets and
    adjustments (granted), their use and what was left, as the grants list shows them (the
    one balance's ``GrantBalance``)."""
    last: dict[int, Allocation] = {}
    for allocation in (
        Allocation.objects.filter(project=project).select_related("pool").order_by("period_end")
    ):
        last[allocation.pool_id] = allocation
    figures = grant_balances_of(allocations=list(last.values()))
    summaries = [
        PoolSummary(
            pool=allocation.pool.name,
            start=allocation.period_start,
            last_day=figures[allocation.pk].last_day,
            granted_su=figures[allocation.pk].available_su,
            used_su=figures[allocation.pk].used_su,
        )
        for allocation in last.values()
        if allocation.pk in figures
    ]
    return sorted(summaries, key=lambda summary: summary.pool)


def final_summary_text(*, project: Project, summaries: list[PoolSummary]) -> str:
    lines = [
        f"The last grant of {project.code}"
        f"{f' ({project.title})' if project.title else ''} has ended. What it was granted and "
        f"used, per pool:",
        "",
    ]
    for item in summaries:
        lines += [
            f"{item.pool} ({numbers.day(item.start)} to {numbers.day(item.last_day)})",
            f"  granted: {numbers.su(item.granted_su)} SU (with top-ups, refunds and transfers)",
            f"  used: {numbers.su(item.used_su)} SU",
            f"  remaining: {numbers.su(item.remaining_su)} SU, unused",
        ]
    lines += [
        "",
        f"{project.code} is now expired: its jobs are held until a new grant. It will be "
        f"archived (read-only) {settings.PORTAL_ARCHIVE_AFTER_DAYS} days after the end of its "
        f"last grant unless it is granted SU again; its jobs, usage and audit log stay readable.",
    ]
    return "\n".join(lines)


def _final_summary_send(project: Project) -> None:
    recipients = mail_recipients(_people(project, [Membership.Role.PI]), MailKind.GRANT_ENDINGS)
    mail_send(
        recipients=recipients,
        subject=f"{project.code}: final usage summary of its last grant",
        body=final_summary_text(project=project, summaries=final_summary_get(project=project)),
        link=_project_link(project),
    )


# --- The project's status -------------------------------------------------------------------


@dataclass
class StatusReport:
    expired: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    revived: list[str] = field(default_factory=list)


def _status_change(project: Project, day: date) -> lifecycle.StatusChange | None:
    grants = Allocation.objects.filter(project=project)
    return lifecycle.status_next(
        status=project.status,
        since=project.status_since,
        last_grant_end=grants.aggregate(end=Max("period_end"))["end"],
        has_current_or_future_grant=grants.filter(period_end__gt=day).exists(),
        today=day,
        archive_after_days=settings.PORTAL_ARCHIVE_AFTER_DAYS,
    )


@transaction.atomic
def project_status_follow(*, project: Project, today: date | None = None) -> list[str]:
    """Set ``project``'s status from its grants on ``today``; returns the statuses it went
    through (none when it stays). A project whose last grant ended long enough ago expires and
    is archived in one run. Expiring mails the PI the final usage summary (after the commit)."""
    project = Project.objects.select_for_update().get(pk=project.pk)
    day = _today(today)
    statuses: list[str] = []
    while (change := _status_change(project, day)) is not None and len(statuses) < 2:
        project.status, project.status_since = change.status, change.since
        project.save(update_fields=["status", "status_since"])
        if change.status == Project.Status.EXPIRED:
            _final_summary_send(project)
        statuses.append(change.status)
    return statuses


def project_statuses_follow(*, today: date | None = None) -> StatusReport:
    """Every active project whose grants have all ended expires (a final summary to its PI),
    every expired one with a current or future grant is active again, and every one expired
    PORTAL_ARCHIVE_AFTER_DAYS ago is archived (in the same run when its last grant ended that
    long ago). A second run on the same day changes nothing."""
    day = _today(today)
    ended = (
        Project.objects.filter(status=Project.Status.ACTIVE, allocations__isnull=False)
        .exclude(allocations__period_end__gt=day)
        .distinct()
    )
    candidates = [*ended, *Project.objects.filter(status=Project.Status.EXPIRED)]
    report = StatusReport()
    for project in sorted(candidates, key=lambda project: project.code):
        statuses = project_status_follow(project=project, today=day)
        if Project.Status.EXPIRED in statuses:
            report.expired.append(project.code)
        if Project.Status.ARCHIVED in statuses:
            report.archived.append(project.code)
        if Project.Status.ACTIVE in statuses:
            report.revived.append(project.code)
    return report


@transaction.atomic
def project_unarchive(*, project: Project, actor: User, today: date | None = None) -> Project:
    """Staff make an archived project writable again: expired (archived again after
    PORTAL_ARCHIVE_AFTER_DAYS unless granted SU) or, with a current grant, active."""
    require(is_staff(actor), "only centre staff un-archive a project")
    project = Project.objects.select_for_update().get(pk=project.pk)
    if project.status != Project.Status.ARCHIVED:
        return project
    day = _today(today)
    current = Allocation.objects.filter(project=project, period_end__gt=day).exists()
    project.status = Project.Status.ACTIVE if current else Project.Status.EXPIRED
    project.status_since = day
    project.save(update_fields=["status", "status_since"])
    return project
