"""E-mail to people: who wants which kind (their /account/notifications/ settings), and the
one way the portal sends a notification (after the transaction commits, with a link)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import EmailMessage
from django.db import transaction
from django.template.loader import render_to_string

from people.models import MailSettings


class MailKind(Enum):
    ALLOCATION_EVENTS = "allocation_events"
    BUDGET_ALERTS = "budget_alerts"
    EFFICIENCY_SUMMARY = "efficiency_summary"
    GRANT_ENDINGS = "grant_endings"


def mail_settings_get(*, user: User) -> MailSettings:
    settings_row, _ = MailSettings.objects.get_or_create(user=user)
    return settings_row


def mail_recipients(users: Iterable[User | None], kind: MailKind) -> list[str]:
    """The addresses of ``users`` who have one and have not turned ``kind`` off, sorted."""
    people = {user.pk: user for user in users if user is not None and user.email and user.is_active}
    if not people:
        return []
    off = set(
        MailSettings.objects.filter(user_id__in=people, **{kind.value: False}).values_list(
            "user_id", flat=True
        )
    )
    return sorted({user.email for pk, user in people.items() if pk not in off})


def portal_link(path: str) -> str:
    """An absolute link for a mail: PORTAL_URL and a path from reverse(). PORTAL_URL is the
    one source of the portal's address in mail: a mail sent by a task has no request to take
    it from (docs/configuration.md, "Links in mails")."""
    return portal_url() + path


def portal_url() -> str:
    """The portal's address as mails give it, without a trailing slash."""
    return str(settings.PORTAL_URL).rstrip("/")


def mail_send(
    *,
    recipients: list[str],
    subject: str,
    body: str,
    link: str,
    attachments: Sequence[tuple[str, bytes, str]] = (),
) -> None:
    """Send once the transaction commits (a rolled-back change mails no one); the subject is
    prefixed, the body ends with the link and where to turn such mail off
    (templates/mail/notification.txt). ``attachments`` are (file name, content, MIME type),
    as a decision letter's PDF."""
    if not recipients:
        return
    text = render_to_string(
        "mail/notification.txt", {"body": body.rstrip(), "link": link, "portal_url": portal_url()}
    )
    message = EmailMessage(
        f"[SU portal] {subject}", text, settings.DEFAULT_FROM_EMAIL, recipients,
        attachments=list(attachments),
    )  # fmt: skip
    transaction.on_commit(message.send)
