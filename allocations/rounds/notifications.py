"""Mail about the allocation process: a request submitted (to the round's chair), a request
put under review (to its reviewers), a decision (to the project's PI and members). Each says
what happened and links to the page; people/mail.py drops whoever turned such mail off.

No mail carries a review, a score or a reviewer's name: the applicant side reads none of them
(``allocations.access.can_read_reviews``), and a committee member reads them on the page, where
the access rules are asked. Nobody is mailed about a request they may not act on because of a
conflict of interest (``has_conflict``)."""

from __future__ import annotations

from django.urls import reverse

from allocations.access import (
    can_decide,
    can_read_letter,
    can_review,
    deciding_round,
)
from allocations.models import AllocationRequest, CommitteeMember
from allocations.rounds.letters import letter_filename, letter_pdf
from allocations.rounds.selectors import decision_letter_of
from kit import numbers
from kit.access import staff_members
from people.mail import MailKind, mail_recipients, mail_send, portal_link
from projects.models import Membership


def _link(request: AllocationRequest) -> str:
    return portal_link(reverse("allocations:request-detail", args=[request.pk]))


def _what(request: AllocationRequest) -> str:
    code = request.project.code
    if request.kind == AllocationRequest.Kind.NEW:
        return f"{code}'s request to {request.round}"
    if request.kind == AllocationRequest.Kind.RENEWAL:
        return f"{code}'s renewal in {request.round}"
    if request.kind == AllocationRequest.Kind.APPEAL:
        return f"{code}'s appeal of the decision on request {request.appeal_of_id}"
    return f"{code}'s {request.get_kind_display()} request"


def notify_request_submitted(request: AllocationRequest) -> None:
    """To the chair who decides the request (``deciding_round``'s); to staff when there is no
    such round, or the chair belongs to the project (a conflict of interest: ``can_decide``
    lets only staff decide it)."""
    round_ = deciding_round(request)
    seats = (
        CommitteeMember.objects.filter(round=round_, is_chair=True).select_related("user")
        if round_
        else []
    )
    deciders = [seat.user for seat in seats if can_decide(seat.user, request)]
    recipients = mail_recipients(deciders or staff_members(), MailKind.ALLOCATION_EVENTS)
    mail_send(
        recipients=recipients,
        subject=f"{_what(request)} was submitted",
        body=f"{_what(request)} was submitted and waits for you to "
        + ("open it for review." if request.in_round else "decide it."),
        link=_link(request),
    )


def notify_review_assigned(request: AllocationRequest) -> None:
    """To the request's reviewers (``can_review``: those the chair assigned, else the round's
    committee), except members of the project (they never review it)."""
    seats = CommitteeMember.objects.filter(round=request.round).select_related("user")
    if request.round is None:
        return
    reviewers = (seat.user for seat in seats if can_review(seat.user, request))
    mail_send(
        recipients=mail_recipients(reviewers, MailKind.ALLOCATION_EVENTS),
        subject=f"Please review {_what(request)}",
        body=f"{_what(request)} is open for review: please score it (1-5) and comment.",
        link=_link(request),
    )


def notify_decision(request: AllocationRequest) -> None:
    """To the project's PI and members: the outcome, the SU granted and the chair's reason;
    never the reviews, their scores or who wrote them. The mail to those who may read the
    decision letter (``can_read_letter``: the PI and managers) carries it as a PDF."""
    project = request.project
    members = Membership.objects.filter(project=project).select_related("user")
    people = {
        person.pk: person
        for person in [project.pi, *(membership.user for membership in members)]
        if person is not None
    }
    granted = ", ".join(
        f"{numbers.su(amount.granted_su)} SU on {amount.pool}"
        for amount in request.amounts.select_related("pool")
        if amount.granted_su
    )
    outcome = request.get_state_display()
    body = f"{_what(request)} was decided: {outcome}."
    if granted:
        body += f"\nGranted: {granted}."
    if request.decision_reason:
        body += f"\nThe chair's reason: {request.decision_reason}"
    letter = decision_letter_of(request)
    readers = [person for person in people.values() if can_read_letter(person, request)]
    others = [person for person in people.values() if person not in readers]
    attachments = []
    if letter is not None:
        name = letter_filename(project_code=project.code, request_id=request.pk)
        attachments.append((name, letter_pdf(letter), "application/pdf"))
    for recipients, attached, note in (
        (readers, attachments, "\nThe decision letter is attached (PDF)." if attachments else ""),
        (others, [], ""),
    ):
        mail_send(
            recipients=mail_recipients(recipients, MailKind.ALLOCATION_EVENTS),
            subject=f"{_what(request)}: {outcome}",
            body=body + note,
            link=_link(request),
            attachments=attached,
        )
