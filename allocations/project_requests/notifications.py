"""Mail about project requests, at each step: to the named PI (please confirm), to the
approvers (a request waits), to the requester and the PI (changes asked, approved, rejected).
Each says what happened and links to the request's page (``PORTAL_URL``); people/mail.py drops
whoever turned such mail off."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import User
from django.urls import reverse

from allocations.access import approvers_of_project_requests
from allocations.models import ProjectRequest
from kit import numbers
from people.mail import MailKind, mail_recipients, mail_send, portal_link


def _link(request: ProjectRequest) -> str:
    return portal_link(reverse("allocations:project-request-detail", args=[request.pk]))


def _what(request: ProjectRequest) -> str:
    return f"The request for the project \u201c{request.title}\u201d"


def _send(people: Iterable[User | None], request: ProjectRequest, subject: str, body: str) -> None:
    mail_send(
        recipients=mail_recipients(people, MailKind.ALLOCATION_EVENTS),
        subject=subject,
        body=body,
        link=_link(request),
    )


def notify_pi_asked(request: ProjectRequest) -> None:
    """To the person named PI: confirm before the approvers see the request."""
    _send(
        [request.pi], request, f"Please confirm you lead \u201c{request.title}\u201d",
        f"{request.requester.get_full_name() or request.requester.username} asked for a new "
        f"project, \u201c{request.title}\u201d, naming you as its PI. Please confirm (or "
        "decline) on its page; the centre sees the request once you confirm.",
    )  # fmt: skip


def notify_submitted(request: ProjectRequest) -> None:
    """To the approvers (staff and the approvers' group): a request waits for a decision."""
    _send(
        approvers_of_project_requests(), request, f"{_what(request)} waits for a decision",
        f"{_what(request)} (PI {request.pi.username}, asked by {request.requester.username}) "
        "waits for you to approve it, ask for changes or reject it.",
    )  # fmt: skip


def notify_pi_declined(request: ProjectRequest) -> None:
    """To the requester: the named PI declined."""
    _send(
        [request.requester], request, f"{_what(request)}: the PI declined",
        f"{request.pi.username} declined to lead the project."
        + (f"\nTheir reason: {request.decision_reason}" if request.decision_reason else ""),
    )  # fmt: skip


def notify_changes_asked(request: ProjectRequest) -> None:
    """To the requester (and the PI): what to change before resubmitting."""
    _send(
        [request.requester, request.pi], request, f"{_what(request)}: changes asked",
        f"The centre asks for changes before it decides:\n{request.decision_reason}\n"
        "Edit the request on its page and resubmit it.",
    )  # fmt: skip


def notify_decided(request: ProjectRequest) -> None:
    """To the requester and the PI: approved (the project's code and SU) or rejected (why)."""
    if request.state == ProjectRequest.State.APPROVED:
        assert request.project is not None
        granted = ", ".join(
            f"{numbers.su(amount.granted_su)} SU on {amount.pool}"
            for amount in request.amounts.select_related("pool")
            if amount.granted_su
        )
        body = f"{_what(request)} was approved: the project is {request.project.code}."
        if granted:
            body += f"\nGranted: {granted}."
        link = portal_link(reverse("allocations:project-detail", args=[request.project.code]))
        body += f"\nThe project's page: {link}"
    else:
        body = f"{_what(request)} was rejected.\nThe reason: {request.decision_reason}"
    if request.decision_reason and request.state == ProjectRequest.State.APPROVED:
        body += f"\nThe approver's note: {request.decision_reason}"
    _send(
        [request.requester, request.pi], request,
        f"{_what(request)}: {request.get_state_display()}", body,
    )  # fmt: skip
