"""Sign-in lockout: per account and per address, unlocked by staff, the API included."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

RIGHT = "pw-for-tests"
LIMIT = 3


@pytest.fixture(autouse=True)
def _small_limit(settings):
    settings.AXES_FAILURE_LIMIT = LIMIT


def _sign_in(username: str, password: str, address: str = "192.0.2.10", **headers) -> Any:
    client = Client(REMOTE_ADDR=address, **headers)
    response: Any = client.post("/accounts/login/", {"username": username, "password": password})
    response.signed_in = "_auth_user_id" in client.session
    return response


def test_after_repeated_wrong_passwords_even_the_right_one_is_refused_for_a_while():
    UserFactory(username="dana")
    for n in range(LIMIT - 1):
        assert _sign_in("dana", f"guess-{n}").status_code == 200  # the form again, with its error
    locked = _sign_in("dana", "guess-last")
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in locked.content.decode()
    assert int(locked["Retry-After"]) == 15 * 60
    right = _sign_in("dana", RIGHT)
    assert right.status_code == 429
    assert not right.signed_in


def test_a_locked_account_stays_locked_from_another_address():
    UserFactory(username="dana")
    for n in range(LIMIT):
        _sign_in("dana", f"guess-{n}", address="192.0.2.10")
    elsewhere = _sign_in("dana", RIGHT, address="198.51.100.7")
    assert elsewhere.status_code == 429
    assert not elsewhere.signed_in


def test_an_address_spraying_many_accounts_is_locked_for_every_account():
    UserFactory(username="erin")
    for n in range(LIMIT):
        _sign_in(f"someone-{n}", "guess", address="203.0.113.5")
    assert _sign_in("erin", RIGHT, address="203.0.113.5").status_code == 429
    assert _sign_in("erin", RIGHT, address="198.51.100.7").signed_in  # erin elsewhere is fine


def test_a_forged_forwarded_for_header_does_not_change_the_address_without_a_proxy():
    UserFactory(username="erin")
    for n in range(LIMIT):
        _sign_in(f"someone-{n}", "guess", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}")
    assert _sign_in("erin", RIGHT).status_code == 429


def test_behind_a_trusted_proxy_the_address_is_the_one_the_proxy_saw(settings):
    settings.PORTAL_TRUSTED_PROXY_COUNT = 1
    UserFactory(username="erin")
    for n in range(LIMIT):  # one client behind the proxy, writing a different left part
        _sign_in(f"someone-{n}", "guess", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}, 203.0.113.5")
    via_proxy = {"HTTP_X_FORWARDED_FOR": "203.0.113.5"}
    assert _sign_in("erin", RIGHT, **via_proxy).status_code == 429
    assert _sign_in("erin", RIGHT, HTTP_X_FORWARDED_FOR="198.51.100.7").signed_in


def test_a_success_before_the_limit_starts_the_count_again():
    UserFactory(username="dana")
    for _ in range(3):
        for n in range(LIMIT - 1):
            _sign_in("dana", f"guess-{n}")
        assert _sign_in("dana", RIGHT).signed_in


def test_staff_unlock_an_account_in_the_admin():
    UserFactory(username="dana")
    for n in range(LIMIT):
        _sign_in("dana", f"guess-{n}", address="192.0.2.10")
    attempts = AccessAttempt.objects.filter(username="dana")
    assert attempts.exists()
    staff = Client()
    staff.force_login(UserFactory(username="sam", is_staff=True, is_superuser=True))
    listing = staff.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200
    assert "dana" in listing.content.decode()
    staff.post(
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": [a.pk for a in attempts], "post": "yes"},
    )
    assert not AccessAttempt.objects.filter(username="dana").exists()
    assert _sign_in("dana", RIGHT, address="198.51.100.7").signed_in


def test_staff_unlock_an_account_from_the_command_line():
    UserFactory(username="dana")
    for n in range(LIMIT):
        _sign_in("dana", f"guess-{n}", address="192.0.2.10")
    call_command("axes_reset_username", "dana", stdout=StringIO())
    assert _sign_in("dana", RIGHT, address="198.51.100.7").signed_in


def test_the_token_endpoint_counts_failures_too_and_answers_locked_in_the_api_format():
    UserFactory(username="dana")
    client = APIClient(REMOTE_ADDR="192.0.2.10")
    statuses = [
        client.post("/api/v1/auth/token/", {"username": "dana", "password": f"g{n}"}).status_code
        for n in range(LIMIT)
    ]
    assert statuses == [400] * (LIMIT - 1) + [429]
    locked = APIClient(REMOTE_ADDR="198.51.100.7").post(
        "/api/v1/auth/token/", {"username": "dana", "password": RIGHT}
    )
    assert locked.status_code == 429
    assert locked.json()["message"].startswith("too many failed sign-ins")
    assert locked.json()["errors"] == {}
