"""A person's own pages: their API tokens."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from people.forms import TokenCreateForm
from people.tokens import TokenError, token_create, token_revoke, tokens_of


def _me(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required ran
    return request.user


@never_cache  # the page that shows a new token must not sit in any cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """List my tokens and make a new one; a new token is shown on this response only."""
    user = _me(request)
    form = TokenCreateForm(request.POST or None)
    issued = None
    if request.method == "POST" and form.is_valid():
        try:
            issued = token_create(user=user, **form.cleaned_data)
        except TokenError as error:
            form.add_error("name", str(error))
        else:
            form = TokenCreateForm()
    context = {
        "form": form,
        "issued": issued,
        "tokens": tokens_of(user=user),
        "now": timezone.now(),
        "current": "people:tokens",
    }
    return render(request, "people/tokens.html", context)


@login_required
@require_POST
def token_revoke_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of my tokens (another person's token is not found)."""
    token = get_object_or_404(tokens_of(user=_me(request)), pk=pk)
    token_revoke(token=token)
    messages.success(request, f"Token “{token.name}” revoked: it no longer opens the API.")
    return redirect("people:tokens")
