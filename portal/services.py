"""Write-side operations of the site itself: a person's API token."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.authtoken.models import Token


def token_get_or_create(*, user: User) -> Token:
    """The user's API token, made on first use."""
    token, _ = Token.objects.get_or_create(user=user)
    return token


@transaction.atomic
def token_regenerate(*, user: User) -> Token:
    """Replace the user's token: the old one stops working at once."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)
