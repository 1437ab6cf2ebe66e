"""Staff's project pages: create and edit projects and their members in the portal rather than
in /admin/. Each checks staff first (``staff_only``: 404 to anyone else), then the input; the
services of ``projects/services.py`` hold the rules, the same ones the API calls."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from allocations.project_staff_forms import MemberAddForm, ProjectEditForm, ProjectForm
from kit.access import staff_only
from kit.errors import ApplicationError
from kit.forms import error_on_field
from projects.models import Project
from projects.selectors import memberships_of
from projects.services import membership_add, membership_remove, project_create, project_update

PROJECTS_PER_PAGE = 50


def _staff(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # staff_only ran
    return request.user


def _projects(search: str) -> QuerySet[Project]:
    projects = Project.objects.select_related("pi").order_by("code")
    if search:
        projects = projects.filter(code__icontains=search) | projects.filter(
            title__icontains=search
        )
    return projects


@require_GET
@staff_only
def staff_projects(request: HttpRequest) -> HttpResponse:
    """Staff: every project, a page at a time, searchable by code or title."""
    search = request.GET.get("q", "").strip()
    page = Paginator(_projects(search), PROJECTS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "allocations/staff_projects.html", {"page": page, "q": search})


@require_http_methods(["GET", "POST"])
@staff_only
def staff_project_new(request: HttpRequest) -> HttpResponse:
    """Staff: a new project, its code (the Slurm account), title, field and PI."""
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_create(**form.cleaned_data, actor=_staff(request))
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            messages.success(request, f"Project {project.code} created.")
            return redirect("allocations:staff-project-edit", code=project.code)
    status = 400 if form.is_bound else 200
    return render(request, "allocations/staff_project_form.html", {"form": form}, status=status)


def _edit_page(
    request: HttpRequest,
    project: Project,
    form: ProjectEditForm | None = None,
    member_form: MemberAddForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {
        "project": project,
        "form": form or ProjectEditForm(
            initial={"title": project.title, "field_of_science": project.field_of_science,
                     "finance_code": project.finance_code,
                     "pi": project.pi.username if project.pi else ""}
        ),
        "member_form": member_form or MemberAddForm(),
        "members": memberships_of(project=project),
    }  # fmt: skip
    return render(request, "allocations/staff_project_form.html", context, status=status)


@require_http_methods(["GET", "POST"])
@staff_only
def staff_project_edit(request: HttpRequest, code: str) -> HttpResponse:
    """Staff: a project's title, field and PI (the PI before stays a member), and its members."""
    project = get_object_or_404(Project.objects.select_related("pi"), code=code)
    if request.method != "POST":
        return _edit_page(request, project)
    form = ProjectEditForm(request.POST)
    if form.is_valid():
        try:
            project_update(project=project, actor=_staff(request), **form.cleaned_data)
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            messages.success(request, f"Project {project.code} saved.")
            return redirect("allocations:staff-project-edit", code=project.code)
    return _edit_page(request, project, form=form, status=400)


@require_POST
@staff_only
def staff_member_add(request: HttpRequest, code: str) -> HttpResponse:
    """Staff: add someone to a project as a member or a manager."""
    project = get_object_or_404(Project.objects.select_related("pi"), code=code)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            membership = membership_add(project=project, actor=_staff(request), **form.cleaned_data)
        except ApplicationError as error:
            error_on_field(form, error)
        else:
            messages.success(request, f"{membership.user} is a {membership.role} of {project}.")
            return redirect("allocations:staff-project-edit", code=project.code)
    return _edit_page(request, project, member_form=form, status=400)


@require_POST
@staff_only
def staff_member_remove(request: HttpRequest, code: str, username: str) -> HttpResponse:
    """Staff: take someone out of a project; never its PI (name another PI first)."""
    project = get_object_or_404(Project.objects.select_related("pi"), code=code)
    member = get_object_or_404(memberships_of(project=project), user__username=username).user
    try:
        membership_remove(project=project, user=member, actor=_staff(request))
    except ApplicationError as error:
        messages.error(request, str(error))
        return _edit_page(request, project, status=400)
    messages.success(request, f"{member} is no longer in {project}.")
    return redirect("allocations:staff-project-edit", code=project.code)
