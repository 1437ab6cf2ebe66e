"""E-mail to people: who wants which kind (their /account/notifications/ settings), and the
one way the portal sends a notification (after the transaction commits, with a link)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction

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
    """An absolute link for a mail: PORTAL_URL and a path from reverse()."""
    return settings.PORTAL_URL.rstrip("/") + path


def mail_send(*, recipients: list[str], subject: str, body: str, link: str) -> None:
    """Send once the transaction commits (a rolled-back change mails no one); the subject is
    prefixed, the body ends with the link and where to turn such mail off."""
    if not recipients:
        return
    text = (
        f"{body.rstrip()}\n\n{link}\n\n"
        f"-- \nThe SU portal. Choose which mail you get at "
        f"{portal_link('/account/notifications/')}\n"
    )
    transaction.on_commit(
        lambda: send_mail(f"[SU portal] {subject}", text, settings.DEFAULT_FROM_EMAIL, recipients)
    )
