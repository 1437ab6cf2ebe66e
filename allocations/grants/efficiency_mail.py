"""The PI's monthly efficiency summary: on the 1st of each month, each PI is mailed last month's
figures of the projects they lead (SU charged, SU left on the table, CPU and memory efficiency,
the users and jobs to look at, a link to the project's efficiency page). Sent once per PI and
month (:class:`EfficiencySummaryNotice`); whoever turned it off on their notifications page
is skipped (people/mail.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.urls import reverse

from accounting.ledger.efficiency_selectors import (
    EfficiencyFilters,
    EfficiencyRow,
    EfficiencyTotals,
    efficiency_by,
    efficiency_summary,
    efficiency_top_jobs,
    projects_charged_in,
)
from accounting.models import Job
from allocations.models import EfficiencySummaryNotice
from kit.calendar import add_months
from people.mail import MailKind, mail_recipients, mail_send, portal_link
from projects.models import Membership, Project

TOP = 3  # users and jobs to look at, per project


def month_after(month: date) -> date:
    return add_months(month.replace(day=1), 1)


def month_before(day: date) -> date:
    """The first day of the month before ``day``'s."""
    return add_months(day.replace(day=1), -1)


@dataclass(frozen=True)
class ProjectMonth:
    """One project's month, as the summary tells it."""

    project: Project
    totals: EfficiencyTotals
    top_users: list[EfficiencyRow]
    top_jobs: list[Job]


def project_month_get(*, project: Project, month: date) -> ProjectMonth:
    """The figures of ``project``'s jobs that ended in ``month`` (the roll-ups' days; the jobs
    to look at by their end in UTC)."""
    end = month_after(month)
    filters = EfficiencyFilters(project=project.code, start=month, end=end)
    only = Project.objects.filter(pk=project.pk)
    users = efficiency_by(projects=only, filters=filters, group="user")
    return ProjectMonth(
        project=project,
        totals=efficiency_summary(projects=only, filters=filters),
        top_users=[row for row in users if row.totals.su_left_on_the_table > 0][:TOP],
        top_jobs=efficiency_top_jobs(
            project=project,
            start=datetime.combine(month, time.min, tzinfo=UTC),
            end=datetime.combine(end, time.min, tzinfo=UTC),
            limit=TOP,
        ),
    )


def _percent(ratio: Decimal | None) -> str:
    return "not measured" if ratio is None else f"{ratio * 100:.1f} %"


def efficiency_page_link(*, project: Project, month: date) -> str:
    last_day = month_after(month) - timedelta(days=1)
    path = reverse("accounting:project-efficiency", args=[project.code])
    return portal_link(f"{path}?start={month.isoformat()}&end={last_day.isoformat()}")


def summary_text(*, months: list[ProjectMonth], month: date) -> str:
    """The mail's body: each project's month, in plain text."""
    lines = [f"How the jobs of the projects you lead used what they asked for in {month:%Y-%m}."]
    for item in months:
        t = item.totals
        lines += [
            "",
            f"{item.project.code}{f' · {item.project.title}' if item.project.title else ''}",
            f"  SU charged: {t.charged_service_units:,.2f} ({t.jobs:,} jobs)",
            f"  SU left on the table: {t.su_left_on_the_table:,.2f} of {t.service_units:,.2f} SU "
            f"charged for the {t.measured_jobs:,} jobs with usage data",
            f"  CPU efficiency: {_percent(t.cpu)}; memory efficiency: {_percent(t.memory)}",
        ]
        if t.unmeasured_jobs:
            lines.append(f"  {t.unmeasured_jobs:,} jobs had no usage data: they are in no figure.")
        if item.top_users:
            lines.append("  Users to look at:")
            lines += [
                f"    {row.key}: {row.totals.su_left_on_the_table:,.2f} SU left "
                f"(CPU {_percent(row.totals.cpu)}, memory {_percent(row.totals.memory)})"
                for row in item.top_users
            ]
        if item.top_jobs:
            lines.append("  Jobs to look at:")
            lines += [
                f"    {job.job_id} ({job.username}): "
                f"{job.service_units - (job.right_sized_service_units or 0):,.2f} SU left, "
                f"{portal_link(reverse('accounting:job-detail', args=[job.pk]))}"
                for job in item.top_jobs
            ]
        lines.append(f"  {efficiency_page_link(project=item.project, month=month)}")
    lines += [
        "",
        "SU left on the table: what the jobs were charged beyond requests sized to what they "
        "used (whole cores for their CPU time, memory rounded up to whole cores' shares of a node "
        "for their peak).",
    ]
    return "\n".join(lines)


def _leaders(projects: list[Project]) -> dict[User, list[Project]]:
    """Each PI (the project's PI, and members with the PI role) with their projects."""
    led: dict[User, list[Project]] = {}
    by_id = {project.pk: project for project in projects}
    for project in projects:
        if project.pi is not None:
            led.setdefault(project.pi, []).append(project)
    memberships = Membership.objects.filter(
        project_id__in=by_id, role=Membership.Role.PI
    ).select_related("user")
    for membership in memberships:
        mine = led.setdefault(membership.user, [])
        if by_id[membership.project_id] not in mine:
            mine.append(by_id[membership.project_id])
    return led


def efficiency_summaries_send(*, month: date) -> int:
    """Mail each PI the summary of ``month`` (its first day) for the projects they lead that
    charged jobs in it; returns how many were mailed. Idempotent: a PI already mailed for the
    month is skipped, so a second run sends nothing."""
    month = month.replace(day=1)
    projects = list(projects_charged_in(start=month, end=month_after(month)))
    done = set(
        EfficiencySummaryNotice.objects.filter(month=month).values_list("user_id", flat=True)
    )
    sent = 0
    for user, led in sorted(_leaders(projects).items(), key=lambda item: item[0].username):
        recipients = mail_recipients([user], MailKind.EFFICIENCY_SUMMARY)
        if user.pk in done or not recipients:
            continue
        led = sorted(led, key=lambda project: project.code)
        months = [project_month_get(project=project, month=month) for project in led]
        try:
            with transaction.atomic():
                EfficiencySummaryNotice.objects.create(
                    user=user, month=month, projects=" ".join(p.code for p in led)
                )
                mail_send(
                    recipients=recipients,
                    subject=f"Efficiency of your projects in {month:%Y-%m}",
                    body=summary_text(months=months, month=month),
                    link=(
                        efficiency_page_link(project=led[0], month=month)
                        if len(led) == 1
                        else portal_link(reverse("home"))
                    ),
                )
        except IntegrityError:  # a concurrent run mailed them first
            continue
        sent += 1
    return sent
