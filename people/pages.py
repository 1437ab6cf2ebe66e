"""A person's own pages: signing in, and their API tokens."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.contrib.auth.views import LoginView, PasswordResetView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from people.forms import MailSettingsForm, TokenCreateForm
from people.lockout import client_address
from people.mail import mail_settings_get, portal_url
from people.oidc import oidc_enabled
from people.passwords import password_reset_admit
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


class PasswordResetThrottled(PasswordResetView):
    """Django's "forgot my password" page, sending no more mails than the centre allows per
    e-mail address and per client address (people/passwords.py); beyond that it answers 429
    with the form and a message, and sends nothing. Its mail links to PORTAL_URL, as every
    mail does, not to the Host the request named (templates/mail/password_reset.txt)."""

    email_template_name = "mail/password_reset.txt"
    subject_template_name = "mail/password_reset_subject.txt"

    def form_valid(self, form: Any) -> HttpResponse:
        refusal = password_reset_admit(
            email=form.cleaned_data["email"], address=client_address(self.request)
        )
        if refusal is not None:
            form.add_error("email", refusal)
            return self.render_to_response(self.get_context_data(form=form), status=429)
        self.extra_email_context = {"portal_url": portal_url()}
        response: HttpResponse = super().form_valid(form)
        return response


PASSWORD_BACKENDS = (
    "django.contrib.auth.backends.ModelBackend",
    "django_auth_ldap.backend.LDAPBackend",
)


class SignInView(LoginView):
    """The sign-in page: the centre's single sign-on first, when there is one, and the
    username and password form when some backend checks passwords (the portal's, LDAP)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_name"] = settings.PORTAL_OIDC_NAME if oidc_enabled() else None
        context["password_form"] = any(
            backend in settings.AUTHENTICATION_BACKENDS for backend in PASSWORD_BACKENDS
        )
        context["sso_failed"] = self.request.GET.get("sso") == "failed"
        context["current"] = "login"
        return context


@login_required
@require_http_methods(["GET", "POST"])
def notifications(request: HttpRequest) -> HttpResponse:
    """Which mail I get from the portal."""
    form = MailSettingsForm(request.POST or None, instance=mail_settings_get(user=_me(request)))
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Saved: the portal mails you only what is ticked.")
        return redirect("people:notifications")
    return render(
        request, "people/notifications.html", {"form": form, "current": "people:notifications"}
    )
