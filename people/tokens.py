"""Personal API tokens: made, checked and revoked here, and nowhere else.

A token is ``su_`` and 43 URL-safe characters drawn from 256 random bits. Only its SHA-256
digest is stored. A fast digest is enough: with 256 bits of entropy nobody can search for a
token from its digest, so the slow, salted hashes that protect passwords would only slow down
every API call (GitHub and knox reason the same way).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from kit.errors import ApplicationError
from people.mail import mail_send, portal_link
from people.models import ApiToken

TOKEN_PREFIX = "su_"  # noqa: S105 (a marker, not a secret)
SHOWN_CHARACTERS = 8  # of the token, after su_, kept to tell tokens apart
# last_used_at is written at most this often per token, so a busy script does not turn every
# read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=5)


class TokenError(ApplicationError):
    """A token cannot be made as asked (name taken, expiry out of range)."""


class TokenRefused(Exception):
    """A token that opens nothing, and why, in words its owner can act on."""


@dataclass(frozen=True)
class IssuedToken:
    """A token as made: the plaintext exists only here, to show its owner once."""

    token: ApiToken
    plaintext: str


def token_digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def token_create(*, user: User, name: str, scope: str, expires_in_days: int) -> IssuedToken:
    """Make a named token for ``user``; the only moment its plaintext is known."""
    name = name.strip()
    if not name:
        raise TokenError("a token needs a name")
    if not 1 <= expires_in_days <= settings.PORTAL_TOKEN_MAX_DAYS:
        raise TokenError(
            f"a token expires after 1 to {settings.PORTAL_TOKEN_MAX_DAYS} days, "
            f"not {expires_in_days}"
        )
    if scope not in ApiToken.Scope.values:
        raise TokenError(f"scope must be one of {', '.join(ApiToken.Scope.values)}")
    now = timezone.now()
    return _token_make(
        user=user, name=name, scope=scope, now=now, expires_at=now + timedelta(days=expires_in_days)
    )


def _token_make(
    *, user: User, name: str, scope: str, now: datetime, expires_at: datetime
) -> IssuedToken:
    if tokens_active(user=user).filter(name=name).exists():
        raise TokenError(f"you already have a token named {name!r}: revoke it or pick another")
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=plaintext[: len(TOKEN_PREFIX) + SHOWN_CHARACTERS],
        digest=token_digest(plaintext),
        scope=scope,
        created_at=now,
        expires_at=expires_at,
    )
    return IssuedToken(token=token, plaintext=plaintext)


def token_revoke(*, token: ApiToken) -> None:
    """Stop ``token`` working at once; it stays listed as revoked."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


@transaction.atomic
def token_replace(*, token: ApiToken) -> IssuedToken:
    """Revoke ``token`` (after a leak) and make one of the same name and scope that expires
    when it would have, never later: replacing a token never lengthens its life, so no token
    outlives PORTAL_TOKEN_MAX_DAYS by replacing itself, and a centre that lowers the maximum
    caps the replacement too. A read-only token may not replace itself (it is for reading);
    its owner revokes it and makes another at /account/tokens/."""
    if token.scope != ApiToken.Scope.WRITE:
        raise TokenError("a read-only token cannot replace itself: revoke it on the tokens page")
    now = timezone.now()
    expires_at = min(token.expires_at, now + timedelta(days=settings.PORTAL_TOKEN_MAX_DAYS))
    if expires_at <= now:
        raise TokenError("this token has expired: make a new one on the tokens page")
    token_revoke(token=token)
    return _token_make(
        user=token.user, name=token.name, scope=token.scope, now=now, expires_at=expires_at
    )


@transaction.atomic
def tokens_revoke_all(*, user: User, reason: str) -> int:
    """Revoke every live token of ``user`` (their password changed: whoever held the old one
    may hold a token too) and mail them which, and why; how many were revoked."""
    now = timezone.now()
    live = list(tokens_active(user=user).filter(expires_at__gt=now).order_by("name"))
    tokens_active(user=user).update(revoked_at=now)
    if live and user.email:
        names = "\n".join(f"- {token.name} ({token.prefix}…)" for token in live)
        mail_send(
            recipients=[user.email],
            subject="Your API tokens were revoked",
            body=(
                f"{reason.rstrip('.')}, so the portal revoked your API tokens; scripts using "
                f"them now get 401 Unauthorized:\n\n{names}\n\nMake new ones on the tokens "
                "page. If you did not change your password, tell the centre's help desk now."
            ),
            link=portal_link(reverse("people:tokens")),
        )
    return len(live)


def token_authenticate(plaintext: str) -> ApiToken:
    """The live token ``plaintext`` stands for (not revoked, not expired, its owner active);
    notes when it was last used. Raises TokenRefused otherwise."""
    token = ApiToken.objects.select_related("user").filter(digest=token_digest(plaintext)).first()
    now = timezone.now()
    if token is None or not token.user.is_active:
        raise TokenRefused("Invalid token.")
    if token.revoked_at is not None:
        raise TokenRefused(f"This token was revoked on {token.revoked_at:%Y-%m-%d}.")
    if token.expires_at <= now:
        raise TokenRefused(f"This token expired on {token.expires_at:%Y-%m-%d}.")
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def tokens_active(*, user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True)


def tokens_of(*, user: User) -> QuerySet[ApiToken]:
    """Every token of ``user``, newest first, revoked and expired ones included."""
    return ApiToken.objects.filter(user=user)
