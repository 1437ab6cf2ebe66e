"""Single sign-on with OpenID Connect (mozilla-django-oidc), set up from the issuer alone.

The centre gives an issuer URL, a client id and a secret (PORTAL_OIDC_*); the endpoints come
from the issuer's discovery document, read the first time someone signs in this way (not at
start-up: a provider that is down must not stop the portal, nor password sign-in). A person
is the user whose username is the claim PORTAL_OIDC_USERNAME_CLAIM (the Slurm login), made on
first sign-in; their roles come from the group claim through people/roles.py.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from people.lockout import username_folded
from people.roles import roles_apply

log = logging.getLogger(__name__)

DISCOVERY_TIMEOUT_SECONDS = 10
# A Slurm login: what sacct's User column and sacctmgr accept.
LOGIN = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
# Settings of mozilla-django-oidc that discovery fills in, and the discovery document's keys.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class ProviderUnavailable(Exception):
    """The identity provider's discovery document could not be read."""


@cache
def provider_metadata(issuer: str) -> dict[str, Any]:
    """The issuer's discovery document (OpenID Connect Discovery 1.0), read once per process."""
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=DISCOVERY_TIMEOUT_SECONDS)
        response.raise_for_status()
        metadata: dict[str, Any] = response.json()
    except (requests.RequestException, ValueError) as error:
        raise ProviderUnavailable(f"{url}: {error}") from error
    if metadata.get("issuer") != issuer:
        raise ProviderUnavailable(
            f"{url} names the issuer {metadata.get('issuer')!r}, not {issuer!r}"
        )
    return metadata


def oidc_setting(attr: str, *default: Any) -> Any:
    """A mozilla-django-oidc setting: the settings' own value, else the discovered endpoint."""
    if attr in DISCOVERED and getattr(settings, attr, None) is None:
        issuer = settings.PORTAL_OIDC_ISSUER
        if not issuer:
            raise ImproperlyConfigured("PORTAL_OIDC_ISSUER is not set")
        return provider_metadata(issuer)[DISCOVERED[attr]]
    return import_from_settings(attr, *default)


def oidc_enabled() -> bool:
    return bool(settings.PORTAL_OIDC_ISSUER)


class CentreSignInStart(OIDCAuthenticationRequestView):
    """``/oidc/authenticate/``: off to the centre's provider (or a page saying it is down)."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(**kwargs)  # endpoints: in get()

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            return render(request, "registration/sso_unavailable.html", status=404)
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except ProviderUnavailable as error:
            log.error("single sign-on: the identity provider is unavailable: %s", error)
            return render(request, "registration/sso_unavailable.html", status=503)
        self.OIDC_RP_CLIENT_ID = oidc_setting("OIDC_RP_CLIENT_ID")
        response: HttpResponse = super().get(request)
        return response


class CentreSignInCallback(OIDCAuthenticationCallbackView):
    """``/oidc/callback/``: a callback whose state this session never sent, or no longer
    holds (the same callback URL opened twice), goes back to the sign-in page with a message,
    as every other refusal does, rather than a 400."""

    def get(self, request: HttpRequest) -> HttpResponse:
        try:
            response: HttpResponse = super().get(request)
        except SuspiciousOperation as error:
            log.warning("single sign-on callback refused: %s", error)
            return self.login_failure()
        return response


def _provider_said(error: requests.RequestException) -> str:
    """The provider's error and description (RFC 6749 5.2), or the exception."""
    response = error.response
    if response is None:
        return str(error)
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} {response.text[:200]}"
    if not isinstance(body, dict):
        return f"{response.status_code} {str(body)[:200]}"
    return f"{response.status_code} {body.get('error')}: {body.get('error_description', '')}"


class CentreOIDCBackend(OIDCAuthenticationBackend):
    """Signs in the person the provider vouches for; roles from its group claim."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the parent's: it reads every endpoint at once, for every sign-in of any kind.
        self.UserModel = get_user_model()

    # The provider's endpoints, read only when a sign-in really goes through it.
    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return str(oidc_setting("OIDC_OP_TOKEN_ENDPOINT"))

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return str(oidc_setting("OIDC_OP_USER_ENDPOINT"))

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return str(oidc_setting("OIDC_OP_JWKS_ENDPOINT"))

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_RP_CLIENT_ID)

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return str(settings.OIDC_RP_CLIENT_SECRET)

    @property
    def OIDC_RP_SIGN_ALGO(self) -> str:
        return str(settings.OIDC_RP_SIGN_ALGO)

    OIDC_RP_IDP_SIGN_KEY = None

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if not oidc_enabled() or request is None or "code" not in request.GET:
            return None  # a password sign-in, or SSO is off: not this backend's business
        try:
            user: User | None = super().authenticate(request, **kwargs)
        except ProviderUnavailable as error:
            log.error("single sign-on: the identity provider is unavailable: %s", error)
            return None
        except requests.RequestException as error:
            # The token endpoint refused the code (invalid_grant: replayed or expired; a wrong
            # PKCE verifier) or did not answer: no one is signed in, and the person is sent
            # back to the sign-in page, not shown a server error.
            log.warning("single sign-on refused by the provider: %s", _provider_said(error))
            return None
        except SuspiciousOperation as error:  # a token that fails the checks (nonce, iss, aud)
            log.warning("single sign-on refused: %s", error)
            return None
        return user

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if payload.get("iss") != settings.PORTAL_OIDC_ISSUER:
            raise SuspiciousOperation(f"ID token from issuer {payload.get('iss')!r}")
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token for another client")
        return payload

    def _username(self, claims: dict[str, Any]) -> str:
        return username_folded(str(claims.get(settings.PORTAL_OIDC_USERNAME_CLAIM, "")))

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        username = self._username(claims)
        if not LOGIN.match(username):
            log.warning(
                "single sign-on refused: claim %s is %r, not a login name",
                settings.PORTAL_OIDC_USERNAME_CLAIM, username,
            )  # fmt: skip
            return False
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> QuerySet[User]:
        return User.objects.filter(username=self._username(claims))

    def describe_user_by_claims(self, claims: dict[str, Any]) -> str:
        return f"username {self._username(claims)}"

    def create_user(self, claims: dict[str, Any]) -> User:
        user = User.objects.create_user(self._username(claims))
        return self.update_user(user, claims)

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        """The provider's names and e-mail, and its roles, afresh at every sign-in."""
        user.first_name = str(claims.get("given_name", user.first_name))[:150]
        user.last_name = str(claims.get("family_name", user.last_name))[:150]
        user.email = str(claims.get("email", user.email))[:254]
        user.save(update_fields=["first_name", "last_name", "email"])
        groups = claims.get(settings.PORTAL_OIDC_GROUPS_CLAIM) or []
        roles_apply(user=user, groups=[groups] if isinstance(groups, str) else groups)
        return user
