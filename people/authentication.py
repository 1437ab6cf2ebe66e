"""``Authorization: Token <token>`` for the API, with personal tokens (people/tokens.py).

A read-only token may call every GET, HEAD and OPTIONS, and the few POSTs that only compute
an answer (such a view says ``open_to_read_only_tokens = True``, e.g. the quote); any other
write is refused with 403 before the view looks at what was sent.
"""

from __future__ import annotations

from typing import Any

from auditlog.context import auditlog_value
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle

from people.models import ApiToken
from people.tokens import TokenRefused, token_authenticate

KEYWORDS = (b"token", b"bearer")


def tokens_page(request: Request | None = None) -> str:
    path = reverse("people:tokens")
    return request.build_absolute_uri(path) if request is not None else path


class PersonalTokenAuthentication(BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() not in KEYWORDS:
            return None
        if len(words) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid token header: send `Authorization: Token <token>`, one token."
            )
        try:
            plaintext = words[1].decode("ascii")
        except UnicodeDecodeError as error:
            raise exceptions.AuthenticationFailed("Invalid token.") from error
        try:
            token = token_authenticate(plaintext)
        except TokenRefused as refused:
            raise exceptions.AuthenticationFailed(
                f"{refused} Make, list and revoke your tokens at {tokens_page(request)}."
            ) from refused
        if token.scope == ApiToken.Scope.READ and not _reads_only(request):
            raise exceptions.PermissionDenied(
                f"the token {token.name!r} is read-only; make a read-write token at "
                f"{tokens_page(request)} to change things"
            )
        _audit_actor(token.user)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class AnonymousRequestsCounted(BaseAuthentication):
    """The last authentication class: a request that brought no credentials is counted
    against the anonymous rate of its address here. DRF checks throttles only after
    permissions, so without this a 401 would answer anonymous traffic uncounted, forever."""

    def authenticate(self, request: Request) -> None:
        throttle = _AnonymousThrottle()
        view: Any = (getattr(request, "parser_context", None) or {}).get("view")
        if not throttle.allow_request(request, view):
            raise exceptions.Throttled(throttle.wait())
        return None


class _AnonymousThrottle(AnonRateThrottle):
    def get_cache_key(self, request: Any, view: Any) -> str:
        # Not request.user: it is being worked out by the caller.
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def _audit_actor(user: User) -> None:
    """Name the token's owner as the actor of what this request changes (portal/audit.py):
    the audit middleware ran before DRF knew who was asking."""
    try:
        context = auditlog_value.get()
    except LookupError:  # no request context (a test calling the class directly)
        return
    if context.get("actor") is None:
        context["actor"] = user


def _reads_only(request: Request) -> bool:
    if request.method in SAFE_METHODS:
        return True
    view: Any = (getattr(request, "parser_context", None) or {}).get("view")
    return bool(getattr(view, "open_to_read_only_tokens", False))
