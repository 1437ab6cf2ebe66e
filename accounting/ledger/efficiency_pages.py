"""Efficiency pages: a project's (per month, distributions, per user and partition, CSV) and the
staff page of the users whose jobs leave the most SU on the table. Thin: the form checks, the
selectors read the roll-ups (never the jobs), the charts draw."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounting.ledger import charts
from accounting.ledger.efficiency_selectors import (
    EfficiencyFilters,
    EfficiencyRow,
    EfficiencyTotals,
    efficiency_by,
    efficiency_by_month,
    efficiency_distributions,
    efficiency_summary,
    efficiency_top_users,
    totals_added,
)
from accounting.ledger.forms import EfficiencyPeriodForm
from kit.access import staff_only
from kit.calendar import add_months
from kit.charts import find_chart
from kit.csv_export import csv_writer
from projects.access import projects_visible
from projects.selectors import project_for_user, role_in_project

TOP_USERS = 20
PROJECT_MONTHS = 6  # the project page opens on this month and the five before it
CSV_COLUMNS = (
    "jobs", "charged_service_units", "measured_jobs", "unmeasured_jobs", "service_units",
    "right_sized_service_units", "su_left_on_the_table", "cpu", "memory", "gpu", "walltime",
)  # fmt: skip


def month_start(day: date, months_back: int = 0) -> date:
    """The first day of ``day``'s month, ``months_back`` months earlier."""
    return add_months(day.replace(day=1), -months_back)


def _period(
    request: HttpRequest, default: tuple[date, date]
) -> tuple[EfficiencyPeriodForm, date, date]:
    """The period form and [start, end] from it (both inclusive), ``default`` for what is not
    given; an unbound form shows the default."""
    start, end = default
    form = EfficiencyPeriodForm(request.GET or None, initial={"start": start, "end": end})
    if form.is_bound and form.is_valid():
        start = form.cleaned_data.get("start") or start
        end = form.cleaned_data.get("end") or end
    return form, start, max(start, end)


def _csv(filename: str, key_column: str, rows: Sequence[EfficiencyRow]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
    writer = csv_writer(response)
    writer.writerow((key_column, *CSV_COLUMNS))
    for row in rows:
        totals = row.totals
        writer.writerow(
            (row.key, *("" if (value := getattr(totals, name)) is None else value
                        for name in CSV_COLUMNS))
        )  # fmt: skip
    return response


def _month_points(
    months: Sequence[EfficiencyRow],
) -> list[tuple[date, Any, Any, Any, Any]]:
    return [
        (row.key, t.service_units, t.right_sized_service_units, t.cpu, t.memory)
        for row in months
        if isinstance(row.key, date) and (t := row.totals).measured_jobs
    ]


@require_GET
@login_required
def project_efficiency(request: HttpRequest, code: str) -> HttpResponse:
    """A project's efficiency over a period: totals, SU charged against right-sized per month,
    the distributions, and a table (with CSV) per user and per partition."""
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    today = timezone.localdate()
    form, start, last_day = _period(request, (month_start(today, PROJECT_MONTHS - 1), today))
    filters = EfficiencyFilters(project=project.code, start=start, end=last_day + timedelta(days=1))
    projects = projects_visible(user=request.user)
    months = efficiency_by_month(projects=projects, filters=filters)
    summary = totals_added(months)
    users = efficiency_by(projects=projects, filters=filters, group="user")
    partitions = efficiency_by(projects=projects, filters=filters, group="partition")
    wanted = request.GET.get("csv", "")
    stem = f"{project.code}-efficiency-{start}-{last_day}"
    if wanted == "users":
        return _csv(f"{stem}-users", "user", users)
    if wanted == "partitions":
        return _csv(f"{stem}-partitions", "partition", partitions)
    chart_list = [
        charts.efficiency_months(key="months", months=_month_points(months)),
        charts.efficiency_histogram(
            key="distributions",
            distributions=efficiency_distributions(projects=projects, filters=filters),
        ),
    ]
    chart = find_chart(chart_list, wanted)
    if chart is not None:
        return chart.csv_response(stem)
    return render(
        request,
        "accounting/project_efficiency.html",
        {
            "project": project, "role": role_in_project(user=request.user, project=project),
            "form": form, "start": start, "last_day": last_day, "summary": summary,
            "charts": chart_list, "users": users, "partitions": partitions,
        },
    )  # fmt: skip


def last_full_month(today: date) -> tuple[date, date]:
    """The first and last day of the month before ``today``'s."""
    first = month_start(today, 1)
    return first, month_start(today) - timedelta(days=1)


@require_GET
@staff_only
def efficiency_top(request: HttpRequest) -> HttpResponse:
    """Staff: the users whose jobs left the most SU on the table across the centre."""
    form, start, last_day = _period(request, last_full_month(timezone.localdate()))
    filters = EfficiencyFilters(start=start, end=last_day + timedelta(days=1))
    projects = projects_visible(user=request.user)
    top = efficiency_top_users(projects=projects, filters=filters, limit=TOP_USERS)
    if request.GET.get("csv") == "users":
        return _csv(
            f"efficiency-top-users-{start}-{last_day}",
            "user",
            [EfficiencyRow(key=user.username, totals=user.totals) for user in top],
        )
    centre: EfficiencyTotals = efficiency_summary(projects=projects, filters=filters)
    return render(
        request,
        "accounting/efficiency_top.html",
        {
            "form": form, "start": start, "last_day": last_day, "top": top, "centre": centre,
            "limit": TOP_USERS,
        },
    )  # fmt: skip
