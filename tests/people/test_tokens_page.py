"""/account/tokens/: a person makes named tokens, sees each once, lists and revokes them."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client

from people.models import ApiToken
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'value="(su_[A-Za-z0-9_-]{43})"')


@pytest.fixture
def dana():
    return UserFactory(username="dana")


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_new_token_is_shown_once_and_then_only_by_its_name_and_first_characters(dana):
    client = _signed_in(dana)
    made = client.post(
        "/account/tokens/", {"name": "setonix login", "scope": "read", "expires_in_days": 30}
    )
    assert made.status_code == 200
    assert "no-cache" in made["Cache-Control"]
    assert "no-store" in made["Cache-Control"]
    plaintext = TOKEN.search(made.content.decode()).group(1)
    token = ApiToken.objects.get(user=dana)
    assert (token.name, token.scope, token.prefix) == ("setonix login", "read", plaintext[:11])
    assert (token.expires_at - token.created_at).days == 30
    listed = client.get("/account/tokens/").content.decode()
    assert plaintext not in listed
    assert "setonix login" in listed
    assert f"{plaintext[:11]}…" in listed
    api = Client(headers={"Authorization": f"Token {plaintext}"})
    assert api.get("/api/v1/projects/").status_code == 200


def test_a_name_already_in_use_or_a_lifetime_not_offered_is_refused_and_nothing_is_made(dana):
    client = _signed_in(dana)
    client.post("/account/tokens/", {"name": "laptop", "scope": "write", "expires_in_days": 7})
    again = client.post(
        "/account/tokens/", {"name": "laptop", "scope": "read", "expires_in_days": 7}
    )
    assert "already have a token named" in again.content.decode()
    forever = client.post(
        "/account/tokens/", {"name": "forever", "scope": "read", "expires_in_days": 99999}
    )
    assert "Select a valid choice" in forever.content.decode()
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["laptop"]


def test_a_revoked_token_stops_opening_the_api_and_stays_listed_as_revoked(dana):
    client = _signed_in(dana)
    made = client.post("/account/tokens/", {"name": "ci", "scope": "write", "expires_in_days": 7})
    plaintext = TOKEN.search(made.content.decode()).group(1)
    token = ApiToken.objects.get()
    response = client.post(f"/account/tokens/{token.pk}/revoke/", follow=True)
    assert "revoked: it no longer opens the API" in response.content.decode()
    assert re.search(r"revoked <time[^>]*>20", response.content.decode())
    api = Client(headers={"Authorization": f"Token {plaintext}"})
    assert api.get("/api/v1/projects/").status_code == 401
    # revoking frees the name for a new token
    client.post("/account/tokens/", {"name": "ci", "scope": "write", "expires_in_days": 7})
    assert ApiToken.objects.filter(name="ci").count() == 2


def test_another_persons_token_is_not_found_and_is_not_revoked(dana):
    made = _signed_in(dana).post(
        "/account/tokens/", {"name": "mine", "scope": "read", "expires_in_days": 7}
    )
    assert made.status_code == 200
    token = ApiToken.objects.get()
    other = _signed_in(UserFactory(username="eve"))
    assert other.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert "mine" not in other.get("/account/tokens/").content.decode()
    token.refresh_from_db()
    assert token.revoked_at is None


def test_signed_out_the_tokens_page_sends_to_sign_in_and_revoking_needs_a_post(dana):
    assert Client().get("/account/tokens/")["Location"].startswith("/accounts/login/")
    assert _signed_in(dana).get("/account/tokens/1/revoke/").status_code == 405


def test_the_page_offers_only_the_lifetimes_the_centre_allows(dana, settings):
    settings.PORTAL_TOKEN_MAX_DAYS = 30
    client = _signed_in(dana)
    page = client.get("/account/tokens/").content.decode()
    assert 'value="30"' in page
    assert 'value="90"' not in page
    refused = client.post(
        "/account/tokens/", {"name": "long", "scope": "read", "expires_in_days": 90}
    )
    assert "Select a valid choice" in refused.content.decode()
    assert not ApiToken.objects.exists()


def test_a_new_token_comes_with_a_copy_button_served_by_the_portal(dana, client):
    """The copy button names the field it copies and the status line it speaks through; its
    script is the portal's own static file, not a CDN's (issue 31, item 8)."""
    client.force_login(dana)
    page = client.post(
        "/account/tokens/", {"name": "laptop", "scope": "read", "expires_in_days": 30}
    ).content.decode()

    assert (
        '<button type="button" class="secondary" id="copy-token" data-copy="new-token" '
        'data-copy-status="copy-token-status">Copy the token</button>'
    ) in page
    assert '<span id="copy-token-status" class="small" role="status" aria-live="polite">' in page
    script = re.search(r'<script src="([^"]*copy[^"]*\.js)" defer></script>', page)
    assert script is not None
    assert script.group(1).startswith(settings.STATIC_URL)
    assert "copy.js" not in client.get("/account/tokens/").content.decode()  # no token, no button
