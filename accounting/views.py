"""Accounting pages' decorators."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse


def staff_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Staff pages answer 404 to everyone else: their existence is not advertised."""

    @wraps(view)
    @login_required
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise Http404
        return view(request, *args, **kwargs)

    return wrapped
