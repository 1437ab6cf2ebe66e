"""Token and session authentication, token regeneration, throttling."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_a_username_and_password_buy_the_users_token_and_the_token_opens_the_api():
    user = UserFactory(username="dana")
    client = APIClient()
    response = client.post(
        "/api/v1/auth/token/", {"username": "dana", "password": "pw-for-tests"}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"token": Token.objects.get(user=user).key, "username": "dana"}
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/v1/projects/").status_code == 200
    again = APIClient().post(
        "/api/v1/auth/token/", {"username": "dana", "password": "pw-for-tests"}, format="json"
    )
    assert again.json()["token"] == response.json()["token"]  # the same token, not a new one


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
    assert not Token.objects.exists()


def test_regenerating_a_token_retires_the_old_one_at_once():
    user = UserFactory(username="dana")
    old = Token.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {old.key}")
    response = client.post("/api/v1/auth/token/regenerate/")
    assert response.status_code == 200
    new = response.json()["token"]
    assert new != old.key
    assert client.get("/api/v1/projects/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {new}")
    assert client.get("/api/v1/projects/").status_code == 200


def test_a_portal_session_works_too_and_writes_need_its_csrf_token():
    user = UserFactory(username="dana")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/v1/projects/").status_code == 200
    refused = client.post("/api/v1/auth/token/regenerate/")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["message"]


def test_without_credentials_the_api_answers_401_and_says_how_to_authenticate():
    response = APIClient().get("/api/v1/projects/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "message": "Authentication credentials were not provided.",
        "errors": {},
    }


def test_a_bad_token_is_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef")
    response = client.get("/api/v1/projects/")
    assert response.status_code == 401
    assert response.json()["message"] == "Invalid token."


def test_too_many_requests_are_throttled_with_a_json_error_and_retry_after(monkeypatch):
    rates = {**SimpleRateThrottle.THROTTLE_RATES, "user": "3/minute", "token": "2/minute"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    user = UserFactory(username="dana")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
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
