"""The role every layer builds on: centre staff, and how a page hides itself from the rest.

Project roles are in ``projects/access.py``, committee roles in ``allocations``' access module,
who sees which jobs in ``accounting/access.py``: each layer adds its rules on the one below and
none restates them (docs/access.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse

Actor = User | AnonymousUser


def is_staff(user: Actor) -> bool:
    """Centre staff: an active account with Django's staff flag."""
    return isinstance(user, User) and user.is_active and user.is_staff


def staff_members() -> QuerySet[User]:
    """Every user ``is_staff`` holds: whom to tell when no one else may act."""
    return User.objects.filter(is_active=True, is_staff=True)


def require(allowed: bool, message: str) -> None:
    """Refuse with a clear message (HTTP 403 in views) when ``allowed`` is false."""
    if not allowed:
        raise PermissionDenied(message)


def staff_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Staff pages answer 404 to everyone else: their existence is not advertised."""

    @wraps(view)
    @login_required
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_staff(request.user):
            raise Http404
        return view(request, *args, **kwargs)

    return wrapped
