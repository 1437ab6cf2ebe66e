"""The token endpoints of the API: a token for a password (scripts that cannot open a
browser), and a leaked token replaced by a fresh one."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from people.authentication import tokens_page
from people.lockout import failures_forgive
from people.models import ApiToken
from people.tokens import IssuedToken, TokenError, token_create, token_replace


class TokenObtainThrottle(AnonRateThrottle):
    """Password guessing through the token endpoint is throttled per address."""

    scope = "token"


class TokenObtainInputSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, style={"input_type": "password"})
    name = serializers.CharField(
        max_length=100, required=False, help_text="defaults to “password login <UTC time>”"
    )
    scope = serializers.ChoiceField(
        choices=ApiToken.Scope.choices, default=ApiToken.Scope.WRITE, required=False
    )
    expires_in_days = serializers.IntegerField(
        min_value=1, required=False,
        help_text="defaults to PORTAL_TOKEN_DEFAULT_DAYS (90); at most PORTAL_TOKEN_MAX_DAYS (365)",
    )  # fmt: skip

    def validate_expires_in_days(self, days: int) -> int:
        # The centre's maximum as it is now, not as it was when this module was imported.
        if days > settings.PORTAL_TOKEN_MAX_DAYS:
            raise serializers.ValidationError(
                f"at most {settings.PORTAL_TOKEN_MAX_DAYS} days (the centre's maximum)"
            )
        return days


class TokenOutputSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="send as `Authorization: Token <token>`; shown once")
    username = serializers.CharField()
    name = serializers.CharField()
    scope = serializers.ChoiceField(choices=ApiToken.Scope.choices)
    expires_at = serializers.DateTimeField()
    manage = serializers.URLField(help_text="the page where tokens are listed and revoked")


def _token_body(request: Request, issued: IssuedToken) -> dict[str, Any]:
    return {
        "token": issued.plaintext,
        "username": issued.token.user.get_username(),
        "name": issued.token.name,
        "scope": issued.token.scope,
        "expires_at": issued.token.expires_at,
        "manage": tokens_page(request),
    }


class TokenObtainView(APIView):
    """Exchange a username and password for a new personal token (listed, and revocable, at
    /account/tokens/). Where the centre signs in with SSO, make tokens on that page instead."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [TokenObtainThrottle]

    @extend_schema(
        tags=["auth"],
        request=TokenObtainInputSerializer,
        responses={201: TokenOutputSerializer},
        auth=[],
    )
    def post(self, request: Request) -> Response:
        data = TokenObtainInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        user = authenticate(
            request._request, username=values["username"], password=values["password"]
        )
        if not isinstance(user, User) or not user.is_active:
            raise exceptions.ValidationError(
                {"password": ["wrong username or password"]}, code="authorization"
            )
        failures_forgive(request=request._request, username=user.get_username())
        name = values.get("name") or f"password login {timezone.now():%Y-%m-%d %H:%M:%S} UTC"
        try:
            issued = token_create(
                user=user, name=name, scope=values["scope"],
                expires_in_days=values.get("expires_in_days", settings.PORTAL_TOKEN_DEFAULT_DAYS),
            )  # fmt: skip
        except TokenError as error:
            raise exceptions.ValidationError({"name": [str(error)]}) from error
        return Response(_token_body(request, issued), status=201)


class TokenRegenerateView(APIView):
    """Replace the read-write token this request is sent with (e.g. after it leaked): the old
    one stops working at once; the new one has the same name and scope and expires when the old
    one would have. A read-only token may not (it is refused with 403 like any other write)."""

    @extend_schema(tags=["auth"], request=None, responses={201: TokenOutputSerializer})
    def post(self, request: Request) -> Response:
        if not isinstance(request.auth, ApiToken):
            raise exceptions.ValidationError(
                {"authorization": [
                    f"send the token to replace as `Authorization: Token <token>`; with a "
                    f"portal session, manage tokens at {tokens_page(request)}"
                ]}
            )  # fmt: skip
        try:
            issued = token_replace(token=request.auth)
        except TokenError as error:
            raise exceptions.ValidationError({"authorization": [str(error)]}) from error
        return Response(_token_body(request, issued), status=201)
