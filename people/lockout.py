"""Sign-in lockout (django-axes): who is asking from where, and what a locked-out person sees.

Repeated failures lock the account (whatever address they come from) and the address
(whatever account they try) for a cool-off time; staff unlock early in the admin ("Access
attempts") or with ``manage.py axes_reset_username``. The same client address is used for the
API's throttles (REST_FRAMEWORK NUM_PROXIES), so the two never disagree about who is asking.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


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
