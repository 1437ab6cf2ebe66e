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


def test_signing_in_as_oneself_between_guesses_does_not_forgive_the_guesses_at_another():
    """Guess at dana, sign in as oneself from the same address, guess again: the count of
    dana's failures goes on, and dana is locked before the right password is tried."""
    UserFactory(username="dana", is_staff=True)
    UserFactory(username="mallory")
    for n in range(LIMIT - 1):
        assert _sign_in("dana", f"guess-{n}").status_code == 200
        assert _sign_in("mallory", RIGHT).signed_in
    assert _sign_in("dana", "guess-last").status_code == 429
    right = _sign_in("dana", RIGHT, address="198.51.100.7")
    assert right.status_code == 429
    assert not right.signed_in


def test_a_success_forgives_only_the_same_accounts_failures_from_the_same_address():
    UserFactory(username="dana")
    _sign_in("dana", "guess", address="192.0.2.10")
    _sign_in("dana", "guess", address="198.51.100.7")
    assert _sign_in("dana", RIGHT, address="192.0.2.10").signed_in
    assert AccessAttempt.objects.filter(username="dana", ip_address="192.0.2.10").count() == 0
    assert AccessAttempt.objects.filter(username="dana", ip_address="198.51.100.7").count() == 1


def test_case_variants_of_a_username_are_one_count():
    UserFactory(username="dana")
    addresses = ["192.0.2.10", "192.0.2.11", "192.0.2.12"]
    for n, variant in enumerate(["DANA", "Dana", "dAna"][:LIMIT]):
        _sign_in(variant, "guess", address=addresses[n])  # no address reaches the limit
    locked = _sign_in("dana", RIGHT, address="198.51.100.7")
    assert locked.status_code == 429
    assert not locked.signed_in
    assert set(AccessAttempt.objects.values_list("username", flat=True)) == {"dana"}


def test_the_token_endpoint_keeps_counting_across_another_accounts_sign_in():
    UserFactory(username="dana")
    UserFactory(username="mallory")
    client = APIClient(REMOTE_ADDR="192.0.2.10")
    for n in range(LIMIT - 1):
        guess = client.post("/api/v1/auth/token/", {"username": "Dana", "password": f"g{n}"})
        assert guess.status_code == 400
        assert _sign_in("mallory", RIGHT, address="192.0.2.10").signed_in
        own = client.post(
            "/api/v1/auth/token/", {"username": "mallory", "password": RIGHT, "name": f"t{n}"}
        )
        assert own.status_code == 201
    last = client.post("/api/v1/auth/token/", {"username": "DANA", "password": "g-last"})
    assert last.status_code == 429
    right = APIClient(REMOTE_ADDR="198.51.100.7").post(
        "/api/v1/auth/token/", {"username": "dana", "password": RIGHT}
    )
    assert right.status_code == 429
