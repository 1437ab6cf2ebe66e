"""Pages for a project's people: invitations (send, revoke, accept) and members' roles.

The rules are in allocations/access.py and allocations/invitations.py; these views only ask
and show. Each answers a POST from the project page and goes back to it with a message.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from allocations.grants.forms import InvitationForm, MemberRoleForm
from allocations.grants.services import AllocationError
from kit.access import require
from projects.access import ProjectReadOnly, can_delegate, can_manage_project
from projects.invitations import (
    InvitationError,
    invitation_accept,
    invitation_from_token,
    invitation_revoke,
    invitation_send,
    invitations_of,
    membership_role_set,
)
from projects.models import Project
from projects.selectors import memberships_of, project_for_user
from projects.services import membership_remove


def _me(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required ran
    return request.user


def _project(request: HttpRequest, code: str) -> Project:
    project = project_for_user(user=request.user, code=code)
    if project is None:
        raise Http404
    return project


def _back(project: Project) -> HttpResponse:
    return redirect(f"/allocations/projects/{project.code}/#members")


@login_required
@require_POST
def invitation_send_page(request: HttpRequest, code: str) -> HttpResponse:
    project = _project(request, code)
    require(
        can_manage_project(request.user, project),
        f"only the PI or a manager of {project} invites",
    )
    form = InvitationForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return _back(project)
    try:
        sent = invitation_send(project=project, actor=_me(request), **form.cleaned_data)
    except InvitationError as error:
        messages.error(request, str(error))
    else:
        messages.success(
            request, f"Invitation mailed to {sent.invitation.email}; it expires on "
            f"{sent.invitation.expires_at:%Y-%m-%d}.",
        )  # fmt: skip
    return _back(project)


@login_required
@require_POST
def invitation_revoke_page(request: HttpRequest, code: str, pk: int) -> HttpResponse:
    project = _project(request, code)
    require(can_manage_project(request.user, project), f"only the PI or a manager of {project}")
    invitation = get_object_or_404(invitations_of(project=project), pk=pk)
    try:
        invitation_revoke(invitation=invitation, actor=_me(request))
    except InvitationError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"The invitation of {invitation.email} is revoked.")
    return _back(project)


@login_required
@require_POST
def member_role_page(request: HttpRequest, code: str, username: str) -> HttpResponse:
    project = _project(request, code)
    require(can_delegate(request.user, project), f"only the PI of {project} changes roles")
    membership = get_object_or_404(memberships_of(project=project), user__username=username)
    form = MemberRoleForm(request.POST)
    if form.is_valid():
        try:
            membership_role_set(
                project=project, user=membership.user, role=form.cleaned_data["role"],
                actor=_me(request),
            )  # fmt: skip
        except InvitationError as error:
            messages.error(request, str(error))
        else:
            messages.success(request, f"{username} is now {form.cleaned_data['role']}.")
    return _back(project)


@login_required
@require_POST
def member_remove_page(request: HttpRequest, code: str, username: str) -> HttpResponse:
    project = _project(request, code)
    membership = get_object_or_404(memberships_of(project=project), user__username=username)
    try:
        membership_remove(project=project, user=membership.user, actor=_me(request))
    except AllocationError as error:
        messages.error(request, str(error))
        return _back(project)
    messages.success(request, f"{username} is no longer in {project}.")
    if membership.user.pk == request.user.pk:
        return redirect("home")
    return _back(project)


@login_required
@require_http_methods(["GET", "POST"])
def invitation_page(request: HttpRequest, token: str) -> HttpResponse:
    """The mailed link: who invites whom to what; accepting makes the signed-in person a
    member. Anyone signed in may accept (the link is the proof), once."""
    try:
        invitation = invitation_from_token(token)
    except InvitationError as error:
        return render(request, "allocations/invitation.html", {"error": str(error)}, status=404)
    if request.method == "POST":
        try:
            membership = invitation_accept(token=token, user=_me(request))
        except (InvitationError, ProjectReadOnly) as error:  # the invitee is not in it yet
            messages.error(request, str(error))
        else:
            messages.success(
                request, f"Welcome to {membership.project}: you are its {membership.role}."
            )
            return redirect("allocations:project-detail", code=membership.project.code)
    return render(request, "allocations/invitation.html", {"invitation": invitation})
