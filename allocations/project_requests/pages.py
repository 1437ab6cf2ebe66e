"""Project request pages: ask for a new project, the person's own requests, a request's page
(the PI confirms, the requester edits and resubmits, an approver decides) and the approvers'
queue. Thin: forms check input and keep what was typed, selectors read, the services write
(and check who acts).

A request is seen by whoever asked for it, the person it names PI, staff and the centre's
approvers; anyone else gets "not found". Someone who may see it but not act gets "forbidden"."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from allocations.access import (
    approves_project_requests,
    can_confirm_project_request,
    can_edit_project_request,
)
from allocations.models import ProjectRequest
from allocations.project_requests.forms import DecisionForm, ProjectRequestForm
from allocations.project_requests.selectors import (
    estimate_partitions,
    pools_offered,
    project_code_next,
    project_request_for_user,
    project_requests_of,
    project_requests_queue,
)
from allocations.project_requests.services import (
    DECIDERS,
    project_request_approve,
    project_request_changes_ask,
    project_request_create,
    project_request_pi_answer,
    project_request_reject,
    project_request_resubmit,
)
from kit.access import require
from kit.calendar import add_months
from kit.errors import ApplicationError

State = ProjectRequest.State


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _visible(request: HttpRequest, pk: int) -> ProjectRequest:
    found = project_request_for_user(user=request.user, pk=pk)
    if found is None:
        raise Http404
    return found


def _refusal(error: Exception) -> str:
    return str(error.args[0]) if error.args else str(error)


@require_http_methods(["GET", "POST"])
@login_required
def project_request_new(request: HttpRequest) -> HttpResponse:
    """Anyone signed in asks for a new project."""
    form = ProjectRequestForm(
        request.POST or None, pools=pools_offered(), partitions=estimate_partitions()
    )
    if request.method == "POST" and form.is_valid():
        try:
            created = project_request_create(
                requester=_user(request), title=form.cleaned_data["title"],
                abstract=form.cleaned_data["abstract"],
                field_of_science=form.cleaned_data["field_of_science"],
                pi=form.cleaned_data["pi"], amounts=form.cleaned_data["amounts"],
                estimates=form.estimate_lines(),
            )  # fmt: skip
        except ApplicationError as error:  # a rule refused it, or the quote engine
            form.add_error(None, _refusal(error))
        else:
            waiting = (
                "the centre decides"
                if created.state == State.SUBMITTED
                else f"{created.pi.username} confirms they lead it, then the centre decides"
            )
            messages.success(request, f"Your request is sent: {waiting}.")
            return redirect("allocations:project-request-detail", pk=created.pk)
    return render(request, "allocations/project_request_form.html", {"form": form})


@require_GET
@login_required
def project_request_list(request: HttpRequest) -> HttpResponse:
    """The person's own project requests (asked for, or naming them PI) and their states."""
    context = {
        "requests": project_requests_of(user=_user(request)),
        "approver": approves_project_requests(request.user),
        "queue": False,
    }
    return render(request, "allocations/project_request_list.html", context)


@require_GET
@login_required
def project_request_queue(request: HttpRequest) -> HttpResponse:
    """The approvers' queue: every project request, those waiting for a decision first."""
    if not approves_project_requests(request.user):
        raise Http404
    context = {"requests": project_requests_queue(), "approver": True, "queue": True}
    return render(request, "allocations/project_request_list.html", context)


def _decision_form(project_request: ProjectRequest, data: Any = None) -> DecisionForm:
    today = timezone.localdate()
    return DecisionForm(
        data, request=project_request, code=project_code_next(), today=today,
        end=add_months(today, 12),
    )  # fmt: skip


def _detail(
    request: HttpRequest, project_request: ProjectRequest, decision: DecisionForm | None = None
) -> HttpResponse:
    user = request.user
    deciding = approves_project_requests(user) and project_request.state == State.SUBMITTED
    context = {
        "req": project_request,
        "can_confirm": can_confirm_project_request(user, project_request)
        and project_request.state == State.AWAITING_PI,
        "can_edit": can_edit_project_request(user, project_request)
        and project_request.state == State.CHANGES_REQUESTED,
        "decision_form": decision or (_decision_form(project_request) if deciding else None),
        "can_reject": approves_project_requests(user)
        and project_request.state == State.CHANGES_REQUESTED,
    }
    return render(request, "allocations/project_request_detail.html", context)


@require_GET
@login_required
def project_request_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _detail(request, _visible(request, pk))


@require_POST
@login_required
def project_request_confirm(request: HttpRequest, pk: int) -> HttpResponse:
    """The person named PI confirms (``answer=confirm``) or declines."""
    project_request = _visible(request, pk)
    require(
        can_confirm_project_request(request.user, project_request),
        "only the person named PI confirms it",
    )
    try:
        project_request_pi_answer(
            request=project_request, actor=_user(request),
            accept=request.POST.get("answer") == "confirm",
            reason=request.POST.get("reason", ""),
        )  # fmt: skip
    except ApplicationError as error:
        messages.error(request, _refusal(error))
    else:
        messages.success(request, "Thank you: your answer is recorded.")
    return redirect("allocations:project-request-detail", pk=pk)


@require_POST
@login_required
def project_request_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """An approver approves, asks for changes or rejects; a wrong input shows the request
    again with the message on its field and what was typed."""
    project_request = _visible(request, pk)
    require(approves_project_requests(request.user), DECIDERS)
    form = _decision_form(project_request, request.POST)
    if not form.is_valid():
        return _detail(request, project_request, form)
    data = form.cleaned_data
    actor = _user(request)
    try:
        if data["decision"] == "changes":
            project_request_changes_ask(request=project_request, actor=actor, reason=data["reason"])
            done = "The requester is asked for changes."
        elif data["decision"] == "reject":
            project_request_reject(request=project_request, actor=actor, reason=data["reason"])
            done = "The request is rejected."
        else:
            project_request_approve(
                request=project_request, actor=actor, code=data["code"],
                period_start=data["period_start"], period_end=data["period_end"],
                granted=data["granted"], reason=data["reason"],
            )  # fmt: skip
            assert project_request.project is not None
            done = (
                f"Approved: {project_request.project.code} is created, with its grants; its "
                "Slurm accounts wait in a plan for review."
            )
    except ApplicationError as error:
        form.add_error(None, _refusal(error))
        return _detail(request, _visible(request, pk), form)
    messages.success(request, done)
    return redirect("allocations:project-request-detail", pk=pk)


@require_http_methods(["GET", "POST"])
@login_required
def project_request_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """The requester makes the changes asked for and resubmits."""
    project_request = _visible(request, pk)
    require(
        can_edit_project_request(request.user, project_request),
        "only the person who asked edits it",
    )
    form = ProjectRequestForm.editing(
        project_request, pools=pools_offered(), data=request.POST or None
    )
    if request.method == "POST" and form.is_valid():
        try:
            project_request_resubmit(
                request=project_request, actor=_user(request), title=form.cleaned_data["title"],
                abstract=form.cleaned_data["abstract"],
                field_of_science=form.cleaned_data["field_of_science"],
                amounts=form.cleaned_data["amounts"],
            )  # fmt: skip
        except (ApplicationError, PermissionDenied) as error:
            form.add_error(None, _refusal(error))
        else:
            messages.success(request, "Resubmitted: the centre decides again.")
            return redirect("allocations:project-request-detail", pk=pk)
    context = {"form": form, "req": project_request}
    return render(request, "allocations/project_request_form.html", context)
