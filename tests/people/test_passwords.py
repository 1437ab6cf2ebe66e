"""Portal passwords: reset mails are throttled, and a new password revokes the API tokens."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import UserFactory, api_token

pytestmark = pytest.mark.django_db

RESET_LINK = re.compile(r"https?://[^/\s]+(/accounts/reset/\S+/)")


def _ask_for_reset(email: str, address: str = "192.0.2.10") -> int:
    response = Client(REMOTE_ADDR=address).post("/accounts/password_reset/", {"email": email})
    return response.status_code


def _api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_reset_mails_to_one_account_stop_at_the_limit_whatever_the_address_or_case(settings):
    settings.PORTAL_PASSWORD_RESET_PER_ACCOUNT = 3
    UserFactory(username="dana", email="dana@example.org")
    asked = ["dana@example.org", "Dana@Example.org", "DANA@example.org", "dana@example.org"]
    statuses = [_ask_for_reset(email, f"192.0.2.{n}") for n, email in enumerate(asked, 1)]
    assert statuses == [302, 302, 302, 429]
    assert len(mail.outbox) == 3
    refused = Client(REMOTE_ADDR="198.51.100.7").post(
        "/accounts/password_reset/", {"email": "dana@example.org"}
    )
    assert refused.status_code == 429
    assert "Too many password-reset requests" in refused.content.decode()
    assert "no mail was sent" in refused.content.decode()
    assert len(mail.outbox) == 3


def test_reset_mails_from_one_address_stop_at_the_limit_for_every_account(settings):
    settings.PORTAL_PASSWORD_RESET_PER_ADDRESS = 3
    for n in range(5):
        UserFactory(username=f"person{n}", email=f"person{n}@example.org")
    statuses = [_ask_for_reset(f"person{n}@example.org", "203.0.113.5") for n in range(5)]
    assert statuses == [302, 302, 302, 429, 429]
    assert len(mail.outbox) == 3
    assert _ask_for_reset("person4@example.org", "198.51.100.7") == 302  # another address
    assert len(mail.outbox) == 4


def test_an_address_nobody_has_is_counted_the_same_so_the_limit_reveals_no_account(settings):
    settings.PORTAL_PASSWORD_RESET_PER_ACCOUNT = 2
    statuses = [_ask_for_reset("nobody@example.org", f"192.0.2.{n}") for n in range(1, 4)]
    assert statuses == [302, 302, 429]
    assert mail.outbox == []


def test_a_password_change_revokes_the_api_tokens_and_says_so_by_mail(
    django_capture_on_commit_callbacks,
):
    dana = UserFactory(username="dana", email="dana@example.org")
    token = api_token(dana, name="laptop")
    assert _api(token).get("/api/v1/projects/").status_code == 200
    client = Client()
    client.force_login(dana)
    with django_capture_on_commit_callbacks(execute=True):
        changed = client.post(
            "/accounts/password_change/",
            {
                "old_password": "pw-for-tests",
                "new_password1": "a-new-long-passphrase",
                "new_password2": "a-new-long-passphrase",
            },
        )
    assert changed.status_code == 302
    refused = _api(token).get("/api/v1/projects/")
    assert refused.status_code == 401
    assert refused.json()["message"].startswith("This token was revoked on ")
    [notice] = mail.outbox
    assert notice.to == ["dana@example.org"]
    assert "API tokens were revoked" in notice.subject
    assert "laptop" in notice.body


def test_a_password_reset_revokes_the_api_tokens_and_says_so_by_mail(
    django_capture_on_commit_callbacks,
):
    dana = UserFactory(username="dana", email="dana@example.org")
    token = api_token(dana, name="laptop")
    assert _ask_for_reset("dana@example.org") == 302
    link = RESET_LINK.search(mail.outbox[0].body)
    assert link is not None
    client = Client()
    form = client.get(link.group(1), follow=True)
    assert form.status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(
            form.redirect_chain[-1][0],
            {"new_password1": "a-new-long-passphrase", "new_password2": "a-new-long-passphrase"},
        )
    assert done.status_code == 302
    assert done["Location"] == "/accounts/reset/done/"
    assert _api(token).get("/api/v1/projects/").status_code == 401
    assert len(mail.outbox) == 2
    assert mail.outbox[1].to == ["dana@example.org"]
    assert "API tokens were revoked" in mail.outbox[1].subject


def test_signing_in_with_the_password_leaves_the_tokens_alone():
    dana = UserFactory(username="dana")
    token = api_token(dana)
    client = Client()
    client.post("/accounts/login/", {"username": "dana", "password": "pw-for-tests"})
    assert "_auth_user_id" in client.session
    assert _api(token).get("/api/v1/projects/").status_code == 200
