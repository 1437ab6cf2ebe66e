"""Passwords stored in the portal: a change revokes the person's API tokens, and reset mails
are throttled.

A password change (the password page, a reset link, the admin, ``changepassword``) means the
old password may be known to someone else, who may have made a token with it: every token of
the person is revoked and they are told by mail (people/tokens.py, ``tokens_revoke_all``).

Reset mails are limited per e-mail address typed (the account) and per client address, over
a sliding window, counted in the database (``PasswordResetRequest``) so that every web process
sees the same count. The count is per address typed whether or not an account has it, so the
limit tells nobody whether an account exists.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from people.models import PasswordResetRequest
from people.tokens import tokens_revoke_all


def password_changed_revoke_tokens(
    sender: Any, *, instance: User, created: bool, **kwargs: Any
) -> None:
    """``post_save`` receiver for User (connected in PeopleConfig.ready).

    ``_password`` holds the new raw password from ``set_password`` until the save completes:
    Django's own test for "the password changed" (``AbstractBaseUser.save``), and one that a
    hash upgrade at sign-in does not pass (``check_password`` clears it before saving)."""
    if created or getattr(instance, "_password", None) is None:
        return
    tokens_revoke_all(user=instance, reason="Your portal password was changed")


def password_reset_admit(*, email: str, address: str | None) -> str | None:
    """Count a request for a reset mail to ``email`` from ``address``; None when the mail may
    go, else why not, in words for the person asking.

    The request is written first and counted after, so two processes asking at once each see
    the other's row: together they never send more than the limit."""
    now = timezone.now()
    window = timedelta(minutes=settings.PORTAL_PASSWORD_RESET_WINDOW_MINUTES)
    PasswordResetRequest.objects.filter(requested_at__lt=now - window).delete()
    folded = email.strip().lower()
    request = PasswordResetRequest.objects.create(email=folded, address=address, requested_at=now)
    recent = PasswordResetRequest.objects.filter(requested_at__gte=now - window)
    for_account = recent.filter(email=folded).count()
    from_address = recent.filter(address=address).count() if address else 0
    if (
        for_account <= settings.PORTAL_PASSWORD_RESET_PER_ACCOUNT
        and from_address <= settings.PORTAL_PASSWORD_RESET_PER_ADDRESS
    ):
        return None
    request.delete()  # a refused request sends nothing, and is not counted
    minutes = settings.PORTAL_PASSWORD_RESET_WINDOW_MINUTES
    return (
        "Too many password-reset requests for this e-mail address or from your network: no "
        f"mail was sent. Try again in {minutes} minutes, or ask the centre's help desk."
    )
