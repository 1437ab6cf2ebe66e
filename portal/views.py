"""Site pages that belong to no single app: the landing page / dashboard and health."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from allocations.access import approves_project_requests
from allocations.grants import charts
from allocations.grants.selectors import balances_for_projects, projects_of_member
from allocations.project_requests.selectors import (
    project_requests_open_of,
    project_requests_waiting,
)
from allocations.rounds.selectors import changes_for_staff, rounds_for_user
from kit.access import is_staff, require
from portal import health
from portal.audit import audit_entries, audit_lines
from projects.access import leads_a_project, projects_visible
from projects.models import Project

STAFF_PROJECTS_PER_PAGE = 25
AUDIT_ENTRIES_PER_PAGE = 50


def _project_cards(projects: list[Project]) -> list[dict[str, Any]]:
    cards = []
    balances = balances_for_projects(projects=projects)  # one read for all my projects
    for project in projects:
        pools = []
        for item in balances[project.pk]:
            balance = item.balance
            entry: dict[str, Any] = {"pool": item.pool, "balance": balance, "gauge": None}
            if balance is not None:
                entry["alert"] = charts.alert_level(balance.percent_used, item.pool.thresholds)
                entry["gauge"] = charts.balance_gauge(
                    key=f"gauge-{project.pk}-{item.pool.pk}", pool=item.pool.name,
                    percent_used=balance.percent_used, used_su=balance.used_su,
                    available_su=balance.available_su, thresholds=item.pool.thresholds,
                )  # fmt: skip
            pools.append(entry)
        cards.append({"project": project, "pools": pools})
    return cards


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Signed out: what the portal is and a sign-in button. Signed in: the dashboard, each of
    my projects with a balance gauge per pool for the current budget period, percent used,
    projected exhaustion and the 75/90/100 % alerts."""
    if not request.user.is_authenticated:
        return render(request, "portal/home.html", {})
    projects = list(projects_of_member(user=request.user).select_related("pi"))
    context: dict[str, Any] = {
        "cards": _project_cards(projects),
        "seats": rounds_for_user(user=request.user),
        "approves_projects": approves_project_requests(request.user),
    }
    if context["approves_projects"]:
        context["project_requests_waiting"] = project_requests_waiting()
    if not projects:  # what the person without a project already asked for
        context["my_project_requests"] = list(project_requests_open_of(user=request.user))
    if is_staff(request.user):
        everything = Project.objects.select_related("pi").order_by("code")
        page = Paginator(everything, STAFF_PROJECTS_PER_PAGE).get_page(request.GET.get("page"))
        shown = list(page)  # a page of 25: their balances in one read, however many projects
        balances = balances_for_projects(projects=shown)
        for project in shown:
            project.pool_use = balances[project.pk]  # type: ignore[attr-defined]
        context["all_projects"] = page
        context["staff_changes"] = changes_for_staff()
    return render(request, "portal/dashboard.html", context)


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    """Who changed what and when, before and after: everything for staff, their projects'
    entries for a PI (portal/audit.py); ``?project=CODE`` narrows to one project."""
    require(leads_a_project(request.user), "the audit log is for project PIs and centre staff")
    code = request.GET.get("project") or None
    if code is not None and not projects_visible(user=request.user).filter(code=code).exists():
        raise Http404("no such project")
    entries = audit_entries(user=request.user, project=code)
    page = Paginator(entries, AUDIT_ENTRIES_PER_PAGE).get_page(request.GET.get("page"))
    rows = audit_lines(page)
    context = {"page": page, "rows": rows, "project": code, "current": "audit"}
    return render(request, "portal/audit.html", context)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Health for monitoring: the database, the cache and the broker, each ``ok`` or the
    error. 200 while the database answers (a cache or broker outage degrades the portal but
    does not stop it), 503 when it does not. No authentication; no data, but an error may name
    an internal host (docs/configuration.md)."""
    database_ok, parts = health.health()
    return JsonResponse(parts, status=200 if database_ok else 503)


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness for load balancers: 200 when the database answers and every migration is
    applied, 503 otherwise (portal/health.py says why the cache and the broker are not
    asked). No authentication; nothing private."""
    ready, parts = health.readiness()
    return JsonResponse(parts, status=200 if ready else 503)
