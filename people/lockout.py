"""Sign-in lockout (django-axes): who is asking from where, and what a locked-out person sees.

Repeated failures lock the account (whatever address they come from) and the address
(whatever account they try) for a cool-off time; staff unlock early in the admin ("Access
attempts") or with ``manage.py axes_reset_username``. The same client address is used for the
API's throttles (REST_FRAMEWORK NUM_PROXIES), so the two never disagree about who is asking.

The account is the username *folded* (``username_folded``): ``RDavies`` and ``rdavies`` are one
person to LDAP, so they are one count here. A success forgives only the failures of the same
account from the same address (``failures_forgive``), never another account's: signing in as
oneself must not wipe the guesses made at someone else from that address (axes'
``AXES_RESET_ON_SUCCESS`` would, as it deletes every failure of the address).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from axes.models import AccessAttempt, AccessBase
from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def username_folded(username: str) -> str:
    """The account a typed username names, as the backends see it: Django's sign-in form
    normalises it (NFKC), django-auth-ldap strips it and keeps it in lower case (the directory
    matches ``uid`` without case). Portal passwords match the username exactly, so folding
    there only counts ``Dana`` and ``dana`` together: stricter, never looser."""
    return unicodedata.normalize("NFKC", username).strip().lower()


def lockout_username(request: HttpRequest, credentials: dict[str, Any] | None) -> str | None:
    """AXES_USERNAME_CALLABLE: the folded username of a sign-in attempt (None when there is
    none, e.g. a single sign-on callback: then only the address is counted)."""
    if credentials is not None:
        typed = credentials.get("username")
    else:
        typed = getattr(request, "data", request.POST).get("username")
    return username_folded(typed) if isinstance(typed, str) else None


def lockout_parameters(request: Any, credentials: dict[str, Any] | None) -> list[str]:
    """AXES_LOCKOUT_PARAMETERS: the account and the address; the address alone for an attempt
    that names no account (a single sign-on callback). Counted "per account", attempts without
    one would be one account, and any ten refused sign-ons would lock everyone's."""
    if isinstance(request, AccessBase):
        username = request.username
    else:
        username = lockout_username(request, credentials)
    return ["username", "ip_address"] if username else ["ip_address"]


def failures_forgive(*, request: HttpRequest, username: str) -> int:
    """After a success: forget the failures of this account from this address (their own
    typos), and no others; how many records went."""
    deleted, _ = AccessAttempt.objects.filter(
        username=username_folded(username), ip_address=client_address(request)
    ).delete()
    return deleted


def failures_forgive_on_sign_in(
    sender: Any, *, request: HttpRequest | None, user: User, **kwargs: Any
) -> None:
    """``user_logged_in`` receiver (connected in PeopleConfig.ready)."""
    if request is not None:
        failures_forgive(request=request, username=user.get_username())


def client_address(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, or, behind ``PORTAL_TRUSTED_PROXY_COUNT`` reverse
    proxies, the address the outermost of them saw (X-Forwarded-For, counted from the right:
    what a client writes on the left cannot pick its own address)."""
    proxies = settings.PORTAL_TRUSTED_PROXY_COUNT
    if proxies:
        hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        hops = [hop for hop in hops if hop]
        if len(hops) >= proxies:
            return hops[-proxies]
    return request.META.get("REMOTE_ADDR")


def lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """429: the API's JSON error under /api/, else a page saying when to try again."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    message = (
        f"too many failed sign-ins: this account or address is locked for {minutes} minutes; "
        "centre staff can unlock it sooner"
    )
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"message": message, "errors": {}}, status=429)
    else:
        response = render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response
