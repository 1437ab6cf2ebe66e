"""Token and session authentication, token replacement, scopes and throttling."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from people.models import ApiToken
from people.tokens import token_digest, token_revoke
from tests.factories import UserFactory, api_token

pytestmark = pytest.mark.django_db


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_a_username_and_password_buy_a_new_named_token_that_opens_the_api():
    UserFactory(username="dana")
    response = APIClient().post(
        "/api/v1/auth/token/",
        {"username": "dana", "password": "pw-for-tests", "name": "laptop", "scope": "read"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["token"].startswith("su_")
    assert (body["username"], body["name"], body["scope"]) == ("dana", "laptop", "read")
    assert body["manage"] == "http://testserver/account/tokens/"
    assert _client(body["token"]).get("/api/v1/projects/").status_code == 200
    again = APIClient().post(
        "/api/v1/auth/token/", {"username": "dana", "password": "pw-for-tests"}, format="json"
    )
    assert again.status_code == 201
    assert again.json()["token"] != body["token"]  # each call makes a token of its own
    assert again.json()["scope"] == "write"
    assert ApiToken.objects.filter(user__username="dana").count() == 2


def test_the_database_never_holds_a_usable_token():
    user = UserFactory(username="dana")
    plaintext = api_token(user)
    stored = ApiToken.objects.get(user=user)
    assert stored.digest == token_digest(plaintext) != plaintext
    with connection.cursor() as cursor:  # no column of the table holds it, nor its secret part
        cursor.execute("SELECT * FROM people_apitoken")
        cells = [str(cell) for row in cursor.fetchall() for cell in row]
    assert not any(plaintext[len("su_") :][:20] in cell for cell in cells)
    # What is stored does not open the API: neither the digest nor the shown prefix.
    assert _client(stored.digest).get("/api/v1/projects/").status_code == 401
    assert _client(stored.prefix).get("/api/v1/projects/").status_code == 401


@pytest.mark.parametrize(
    ("username", "password"),
    [("dana", "wrong"), ("nobody", "pw-for-tests"), ("idle", "pw-for-tests")],
)
def test_wrong_credentials_or_an_inactive_user_get_no_token(username, password):
    UserFactory(username="dana")
    UserFactory(username="idle", is_active=False)
    response = APIClient().post(
        "/api/v1/auth/token/", {"username": username, "password": password}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "message": "password: wrong username or password",
        "errors": {"password": ["wrong username or password"]},
    }
    assert not ApiToken.objects.exists()


def test_replacing_a_token_retires_the_old_one_at_once_and_keeps_its_name_and_scope():
    user = UserFactory(username="dana")
    old = api_token(user, scope="write", name="login node")
    client = _client(old)
    response = client.post("/api/v1/auth/token/regenerate/")
    assert response.status_code == 201
    new = response.json()
    assert new["token"] != old
    assert (new["name"], new["scope"]) == ("login node", "write")
    refused = client.get("/api/v1/projects/")
    assert refused.status_code == 401
    assert refused.json()["message"].startswith("This token was revoked on ")
    assert "/account/tokens/" in refused.json()["message"]
    assert _client(new["token"]).get("/api/v1/projects/").status_code == 200


def test_a_read_only_token_cannot_replace_itself():
    user = UserFactory(username="dana")
    reader = _client(api_token(user, scope="read", name="login node"))
    refused = reader.post("/api/v1/auth/token/regenerate/")
    assert refused.status_code == 403
    assert "is read-only" in refused.json()["message"]
    assert ApiToken.objects.get().revoked_at is None
    assert reader.get("/api/v1/projects/").status_code == 200


def test_replacing_a_token_never_lengthens_its_life():
    user = UserFactory(username="dana")
    old = api_token(user, scope="write", name="ci")
    made = timezone.now() - timedelta(days=300)
    ApiToken.objects.update(created_at=made, expires_at=made + timedelta(days=365))
    first = _client(old).post("/api/v1/auth/token/regenerate/").json()
    second = _client(first["token"]).post("/api/v1/auth/token/regenerate/").json()
    expires = ApiToken.objects.filter(revoked_at__isnull=True).get().expires_at
    assert expires == made + timedelta(days=365)
    assert second["expires_at"] == first["expires_at"]


def test_the_centres_maximum_life_holds_at_creation_and_at_replacement(settings):
    settings.PORTAL_TOKEN_MAX_DAYS = 30
    UserFactory(username="dana")
    too_long = APIClient().post(
        "/api/v1/auth/token/",
        {"username": "dana", "password": "pw-for-tests", "expires_in_days": 31},
        format="json",
    )
    assert too_long.status_code == 400
    assert too_long.json()["errors"] == {
        "expires_in_days": ["at most 30 days (the centre's maximum)"]
    }
    assert not ApiToken.objects.exists()
    settings.PORTAL_TOKEN_MAX_DAYS = 365
    made = APIClient().post(
        "/api/v1/auth/token/",
        {"username": "dana", "password": "pw-for-tests", "expires_in_days": 365},
        format="json",
    )
    assert made.status_code == 201
    settings.PORTAL_TOKEN_MAX_DAYS = 30  # the centre lowers the maximum
    replaced = _client(made.json()["token"]).post("/api/v1/auth/token/regenerate/")
    assert replaced.status_code == 201
    token = ApiToken.objects.get(revoked_at__isnull=True)
    assert token.expires_at - token.created_at == timedelta(days=30)


def test_a_read_only_token_reads_and_quotes_but_may_not_write():
    staff = UserFactory(username="sam", is_staff=True)
    reader = _client(api_token(staff, scope="read"))
    assert reader.get("/api/v1/projects/").status_code == 200
    refused = reader.post("/api/v1/projects/", {"code": "x"}, format="json")
    assert refused.status_code == 403
    assert "is read-only" in refused.json()["message"]
    # the quote computes and writes nothing: a read-only token may ask for one
    assert reader.post("/api/v1/quote/", {}, format="json").status_code == 400
    writer = _client(api_token(staff, scope="write", name="writer"))
    assert writer.post("/api/v1/projects/", {"code": "x"}, format="json").status_code == 201


def test_an_expired_or_revoked_token_or_one_of_an_inactive_user_is_401_saying_why():
    user = UserFactory(username="dana")
    expired = api_token(user, name="old")
    ApiToken.objects.filter(name="old").update(
        created_at=timezone.now() - timedelta(days=2),
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    message = _client(expired).get("/api/v1/projects/").json()["message"]
    assert message.startswith("This token expired on ")
    revoked = api_token(user, name="gone")
    token_revoke(token=ApiToken.objects.get(name="gone"))
    assert _client(revoked).get("/api/v1/projects/").status_code == 401
    live = api_token(user, name="live")
    user.is_active = False
    user.save()
    assert _client(live).get("/api/v1/projects/").json()["message"].startswith("Invalid token.")


def test_using_a_token_notes_when_without_writing_on_every_call():
    user = UserFactory(username="dana")
    client = _client(api_token(user))
    assert ApiToken.objects.get().last_used_at is None
    client.get("/api/v1/projects/")
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    client.get("/api/v1/projects/")
    assert ApiToken.objects.get().last_used_at == first


def test_a_portal_session_works_too_and_writes_need_its_csrf_token():
    user = UserFactory(username="dana")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/v1/projects/").status_code == 200
    refused = client.post("/api/v1/auth/token/regenerate/")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["message"]


def test_with_a_session_there_is_no_token_to_replace_and_the_answer_says_where_to_go():
    client = APIClient()
    client.force_login(UserFactory(username="dana"))
    response = client.post("/api/v1/auth/token/regenerate/")
    assert response.status_code == 400
    assert "/account/tokens/" in response.json()["message"]


def test_without_credentials_the_api_answers_401_and_says_how_to_authenticate():
    response = APIClient().get("/api/v1/projects/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "message": "Authentication credentials were not provided.",
        "errors": {},
    }


def test_a_bad_token_is_401_and_points_to_the_tokens_page():
    response = _client("0123456789abcdef").get("/api/v1/projects/")
    assert response.status_code == 401
    assert response.json()["message"] == (
        "Invalid token. Make, list and revoke your tokens at http://testserver/account/tokens/."
    )


def test_too_many_requests_are_throttled_with_a_json_error_and_retry_after(monkeypatch):
    rates = {
        **SimpleRateThrottle.THROTTLE_RATES, "user": "3/minute", "token": "2/minute",
        "anon": "2/minute",
    }  # fmt: skip
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    user = UserFactory(username="dana")
    client = _client(api_token(user))
    statuses = [client.get("/api/v1/projects/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    throttled = client.get("/api/v1/projects/")
    assert int(throttled["Retry-After"]) > 0
    assert throttled.json()["message"].startswith("Request was throttled.")
    # Password guessing at the token endpoint is throttled per address, before checking.
    guesses = [
        APIClient()
        .post("/api/v1/auth/token/", {"username": "dana", "password": str(n)})
        .status_code
        for n in range(3)
    ]
    assert guesses == [400, 400, 429]
    # Anonymous traffic is throttled per address too.
    anonymous = [APIClient().get("/api/v1/projects/").status_code for _ in range(3)]
    assert anonymous == [401, 401, 429]
