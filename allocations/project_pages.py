"""The project page: balances with burn-down, usage by partition and by user, top jobs,
adjustments, members and requests. It shows every domain of a project at once, so it sits
above the domains (it reads grants' balances and rounds' requests)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accounting.ledger.selectors import ledger_stamp, top_jobs, usage_series
from allocations import request_states
from allocations.access import can_edit_outputs, can_read_letter
from allocations.grants import charts
from allocations.grants.expiry import project_unarchive
from allocations.grants.forms import InvitationForm, UsageStepForm
from allocations.grants.selectors import (
    PoolBalance,
    adjustments_recent,
    allocations_in_force,
    balances_for_project,
)
from allocations.outputs.selectors import outputs_since
from allocations.rounds.selectors import requests_of_project
from allocations.statements.assembly import recent_months
from kit.access import is_staff, staff_only
from kit.caching import remembered
from kit.charts import Chart, find_chart
from projects.access import (
    can_delegate,
    can_manage_project,
    project_is_writable,
    roles_read_once,
)
from projects.invitations import invitations_of
from projects.models import Project
from projects.selectors import memberships_of, project_for_user, role_in_project

# A grant ending this soon offers its renewal and its extension on the project page.
ENDING_SOON_DAYS = 60

# How far back the usage charts reach for each step.
USAGE_WINDOWS = {"day": 60, "week": 26 * 7, "month": 365}


def _usage_window(step: str, today: date) -> tuple[date, date]:
    end = today + timedelta(days=1)
    start = today - timedelta(days=USAGE_WINDOWS[step] - 1)
    if step == "week":
        start -= timedelta(days=start.weekday())
    elif step == "month":
        start = start.replace(day=1)
    return start, end


def _top_jobs_window(
    pool_balances: list[PoolBalance], *, today: date, usage_start: date
) -> tuple[date, date]:
    """The days whose jobs the costliest list reads: the budget periods in force (the earliest
    start of any pool's to the latest end, never past today), or the usage charts' window
    when no pool has a period now."""
    periods = [item.balance for item in pool_balances if item.balance is not None]
    tomorrow = today + timedelta(days=1)
    if not periods:
        return usage_start, tomorrow
    since = min(balance.start for balance in periods)
    until = min(max(balance.end for balance in periods), tomorrow)
    return since, max(until, since)


# --- Project page -----------------------------------------------------------------------------


@require_GET
@login_required
def project_detail(request: HttpRequest, code: str) -> HttpResponse:
    """Balances with burn-down, usage by partition and by user, top jobs, adjustments, members."""
    with roles_read_once():  # its header, manage, edit and delegate rules: one read of the role
        return _project_detail(request, code)


def _project_detail(request: HttpRequest, code: str) -> HttpResponse:
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    step_form = UsageStepForm(request.GET or None)
    step = (step_form.is_valid() and step_form.cleaned_data.get("step")) or "week"
    pool_balances = balances_for_project(project=project, grants=True, per_day=True)
    today = pool_balances[0].balance.on if pool_balances and pool_balances[0].balance else None
    today = today or datetime.now(UTC).date()

    pools = []
    chart_list: list[Chart] = []
    # Chart data changes only with the ledger: cached under its stamp (portal/caching.py).
    stamp = ledger_stamp()
    for item in pool_balances:
        balance = item.balance
        burn = None
        if balance is not None:
            # The days the balance read already: no query of its own, cached or not.
            used = dict(balance.used_per_day)
            burn = charts.burn_down(
                key=f"burn-{item.pool.pk}", pool=item.pool.name, start=balance.start,
                end=balance.end, today=balance.on, available_su=balance.available_su,
                used_per_day=used,
                burn_rate_per_day=max(balance.burn_rate_7_days, balance.burn_rate_30_days),
                projected_exhaustion=balance.projected_exhaustion,
            )  # fmt: skip
            chart_list.append(burn)
        pools.append(
            {
                "pool": item.pool,
                "balance": balance,
                "currency": item.currency,
                "burn": burn,
                "grants": item.grants,
                "submit_with": item.submit_with,
                "alert": charts.alert_level(
                    balance.percent_used if balance else None, item.pool.thresholds
                ),
            }
        )

    start, end = _usage_window(step, today)
    top_since, top_until = _top_jobs_window(pool_balances, today=today, usage_start=start)
    by_partition = charts.usage_stacked(
        key="usage-partition",
        title=f"SU per {step} by partition",
        points=[
            (p.period, p.key, p.service_units)
            for p in remembered(
                ("usage", project.pk, start, end, step, "partition", stamp),
                lambda: usage_series(
                    project=project, start=start, end=end, step=step, group="partition"
                ),
            )
        ],
        step=step,
        group_label="partition",
        window=(start, end),
    )
    by_user = charts.usage_stacked(
        key="usage-user",
        title=f"SU per {step} by user",
        points=[
            (p.period, p.key, p.service_units)
            for p in remembered(
                ("usage", project.pk, start, end, step, "user", stamp),
                lambda: usage_series(
                    project=project, start=start, end=end, step=step, group="user"
                ),
            )
        ],
        step=step,
        group_label="user",
        window=(start, end),
    )
    chart_list += [by_partition, by_user]
    wanted = find_chart(chart_list, request.GET.get("csv", ""))
    if wanted is not None:
        return wanted.csv_response(project.code)

    manages = can_manage_project(request.user, project)
    requests = list(requests_of_project(project=project)[:20])
    writable = project_is_writable(project)  # an archived project shows no write action
    context = {
        "project": project,
        "role": role_in_project(user=request.user, project=project),
        "can_apply": manages and writable,
        "can_audit": manages,
        "can_unarchive": not writable and is_staff(request.user),
        "can_delegate": manages and writable and can_delegate(request.user, project),
        "invitations": (
            invitations_of(project=project).filter(accepted_at__isnull=True)[:20]
            if manages and writable
            else []
        ),
        "invitation_form": InvitationForm(),
        "role_choices": [("member", "member"), ("manager", "manager")],
        "pools": pools,
        "step_form": step_form,
        "step": step,
        "usage_start": start,
        "by_partition": by_partition,
        "by_user": by_user,
        # The ten costliest jobs of the budget period, kept per month under the month's
        # roll-ups: after an import only the months it touched are read again, each from its
        # own partition (docs/pages.md, "Performance").
        "top_jobs": top_jobs(
            project=project,
            ended_from=datetime.combine(top_since, time.min, tzinfo=UTC),
            ended_before=datetime.combine(top_until, time.min, tzinfo=UTC),
        ),
        "top_jobs_since": top_since,
        "adjustments": adjustments_recent(project=project),
        "members": memberships_of(project=project),
        "requests": requests,
        # Decided requests whose letter the viewer may download (``can_read_letter``).
        "letters": {
            item.pk
            for item in requests
            if item.state in request_states.DECIDED and can_read_letter(request.user, item)
        },
        "outputs": outputs_since(project, None),
        "can_edit_outputs": writable and can_edit_outputs(request.user, project),
        # Monthly statements (docs/costs.md): the PI's, managers' and staff's, newest first.
        "statement_months": recent_months(today=timezone.localdate()) if manages else [],
        # Changing an allocation (docs/allocations.md): grants ending soon offer a renewal and
        # an extension to whoever may ask for them.
        "grants_ending": [
            grant
            for grant in allocations_in_force(project=project)
            if (grant.period_end - today).days <= ENDING_SOON_DAYS
        ]
        if manages
        else [],
    }
    return render(request, "allocations/project_detail.html", context)


@staff_only
@require_POST
def project_unarchive_page(request: HttpRequest, code: str) -> HttpResponse:
    """Staff make an archived project writable again (the one write an archived project takes)."""
    project = get_object_or_404(Project, code=code)
    assert isinstance(request.user, User)  # staff_only ran
    project = project_unarchive(project=project, actor=request.user)
    messages.success(request, f"{project.code} is {project.status} again: it can be changed.")
    return redirect("allocations:project-detail", project.code)
