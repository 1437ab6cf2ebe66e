"""LDAP sign-in through the real login page, against a real slapd (tests/ldap_server.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse
from django_auth_ldap.config import GroupOfNamesType, PosixGroupType

from people.roles import COMMITTEE_GROUP
from tests.factories import UserFactory
from tests.ldap_server import COMMITTEE, RESEARCHER, STAFF, Person
from tests.people.conftest import settings_from_environment

pytestmark = pytest.mark.django_db

LDAP_BACKEND = "django_auth_ldap.backend.LDAPBackend"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
AXES_BACKEND = "axes.backends.AxesStandaloneBackend"  # the lockout comes first


def sign_in(username: str, password: str) -> Client:
    """POST the login form as a browser would; the client is signed in when it succeeded."""
    client = Client()
    client.post(reverse("login"), {"username": username, "password": password})
    return client


def signed_in_user(client: Client) -> User | None:
    user_id = client.session.get("_auth_user_id")
    return None if user_id is None else User.objects.get(pk=user_id)


def sign_in_as(person: Person) -> User:
    client = sign_in(person.uid, person.password)
    user = signed_in_user(client)
    assert user is not None, f"{person.uid} could not sign in"
    assert client.session["_auth_user_backend"] == LDAP_BACKEND
    return user


def test_a_researcher_signs_in_and_gets_names_and_email_from_the_directory(ldap_sign_in):
    response = Client().post(
        reverse("login"), {"username": RESEARCHER.uid, "password": RESEARCHER.password}
    )
    assert response.status_code == 302
    user = User.objects.get(username=RESEARCHER.uid)
    assert (user.first_name, user.last_name) == (RESEARCHER.given_name, RESEARCHER.surname)
    assert user.email == RESEARCHER.email
    assert not user.is_staff
    assert not user.groups.filter(name=COMMITTEE_GROUP).exists()
    assert not user.has_usable_password()  # the directory holds the password, not the portal


def test_the_login_in_capitals_signs_in_the_same_lower_case_user(ldap_sign_in):
    first = sign_in_as(RESEARCHER)
    client = sign_in(RESEARCHER.uid.upper(), RESEARCHER.password)
    assert signed_in_user(client) == first
    assert first.username == RESEARCHER.uid
    assert User.objects.filter(username__iexact=RESEARCHER.uid).count() == 1


def test_a_wrong_password_is_refused_and_creates_no_user(ldap_sign_in):
    client = sign_in(RESEARCHER.uid, "not-the-password")
    assert signed_in_user(client) is None
    assert not User.objects.filter(username=RESEARCHER.uid).exists()


def test_an_unknown_login_is_refused(ldap_sign_in):
    assert signed_in_user(sign_in("nobody", "anything")) is None


def test_a_member_of_the_staff_group_is_staff_from_the_first_sign_in(ldap_sign_in):
    assert sign_in_as(STAFF).is_staff


def test_a_member_of_the_committee_group_is_in_the_allocation_committee(ldap_sign_in):
    user = sign_in_as(COMMITTEE)
    assert user.groups.filter(name=COMMITTEE_GROUP).exists()
    assert not user.is_staff


def test_leaving_the_staff_group_in_the_directory_removes_staff_at_the_next_sign_in(
    ldap_sign_in,
):
    assert sign_in_as(STAFF).is_staff
    ldap_sign_in.group_remove(group="hpc-staff", person=STAFF)
    try:
        assert not sign_in_as(STAFF).is_staff
    finally:
        ldap_sign_in.group_add(group="hpc-staff", person=STAFF)
    assert sign_in_as(STAFF).is_staff


def test_names_changed_in_the_directory_are_updated_at_the_next_sign_in(ldap_sign_in):
    sign_in_as(RESEARCHER)
    User.objects.filter(username=RESEARCHER.uid).update(email="stale@example.org")
    assert sign_in_as(RESEARCHER).email == RESEARCHER.email


def test_a_local_password_user_still_signs_in_after_ldap(ldap_sign_in, settings):
    assert settings.AUTHENTICATION_BACKENDS == [AXES_BACKEND, LDAP_BACKEND, MODEL_BACKEND]
    UserFactory(username="localadmin")  # password pw-for-tests, in no directory
    client = sign_in("localadmin", "pw-for-tests")
    assert signed_in_user(client) == User.objects.get(username="localadmin")
    assert client.session["_auth_user_backend"] == MODEL_BACKEND


def test_without_a_group_base_ldap_leaves_roles_set_by_hand(ldap_sign_in, settings):
    settings.AUTH_LDAP_GROUP_SEARCH = None
    UserFactory(username=RESEARCHER.uid, is_staff=True)
    assert sign_in_as(RESEARCHER).is_staff


def test_an_unreachable_directory_falls_back_to_local_passwords(ldap_sign_in, settings):
    settings.AUTH_LDAP_SERVER_URI = "ldap://127.0.0.1:9"  # discard port: nothing listens
    UserFactory(username="localadmin")
    assert signed_in_user(sign_in("localadmin", "pw-for-tests")) is not None
    assert signed_in_user(sign_in(RESEARCHER.uid, RESEARCHER.password)) is None


def test_a_locked_login_cannot_sign_in_as_a_case_variant(ldap_sign_in, settings):
    """The directory takes RDAVIES, Rdavies and rDavies for rdavies: the lockout counts them
    as one account, each wrong guess from its own address (no address reaches the limit)."""
    settings.AXES_FAILURE_LIMIT = 3
    variants = ["RDAVIES", "Rdavies", "rDavies"]
    for n, variant in enumerate(variants):
        client = Client(REMOTE_ADDR=f"192.0.2.{10 + n}")
        client.post(reverse("login"), {"username": variant, "password": f"guess-{n}"})
    for variant in [RESEARCHER.uid, "RDavies"]:
        client = Client(REMOTE_ADDR="198.51.100.7")
        response = client.post(
            reverse("login"), {"username": variant, "password": RESEARCHER.password}
        )
        assert response.status_code == 429
        assert signed_in_user(client) is None


# --- The settings portal/settings.py derives from PORTAL_LDAP_* ---------------------------


def test_without_an_ldap_uri_only_stored_passwords_sign_in(monkeypatch):
    monkeypatch.delenv("PORTAL_LDAP_URI", raising=False)
    configured = settings_from_environment(monkeypatch, {})
    assert LDAP_BACKEND not in configured["AUTHENTICATION_BACKENDS"]
    assert not any(name.startswith("AUTH_LDAP_") for name in configured)


def test_the_group_type_may_be_posix_groups(monkeypatch):
    configured = settings_from_environment(
        monkeypatch,
        {
            "PORTAL_LDAP_URI": "ldap://ldap.example",
            "PORTAL_LDAP_USER_BASE": "ou=people,dc=example",
            "PORTAL_LDAP_GROUP_BASE": "ou=groups,dc=example",
            "PORTAL_LDAP_GROUP_TYPE": "posixGroup",
        },
    )
    assert isinstance(configured["AUTH_LDAP_GROUP_TYPE"], PosixGroupType)
    assert configured["AUTH_LDAP_GROUP_SEARCH"].filterstr == "(objectClass=posixGroup)"
    assert configured["AUTH_LDAP_USER_SEARCH"].filterstr == "(uid=%(user)s)"


def test_group_of_names_is_the_default_group_type(monkeypatch):
    configured = settings_from_environment(
        monkeypatch,
        {"PORTAL_LDAP_URI": "ldap://ldap.example", "PORTAL_LDAP_USER_BASE": "dc=example"},
    )
    assert isinstance(configured["AUTH_LDAP_GROUP_TYPE"], GroupOfNamesType)
    assert configured["AUTH_LDAP_GROUP_SEARCH"] is None
    assert configured["AUTH_LDAP_BIND_DN"] == ""


def test_an_unknown_group_type_stops_start_up(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="PORTAL_LDAP_GROUP_TYPE"):
        settings_from_environment(
            monkeypatch,
            {
                "PORTAL_LDAP_URI": "ldap://ldap.example",
                "PORTAL_LDAP_USER_BASE": "dc=example",
                "PORTAL_LDAP_GROUP_TYPE": "groupOfUniqueNames",
            },
        )


def test_an_ldap_uri_without_a_user_base_stops_start_up(monkeypatch):
    monkeypatch.delenv("PORTAL_LDAP_USER_BASE", raising=False)
    with pytest.raises(ImproperlyConfigured, match="PORTAL_LDAP_USER_BASE"):
        settings_from_environment(monkeypatch, {"PORTAL_LDAP_URI": "ldap://ldap.example"})


def test_production_refuses_ldap_in_clear_text(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="START_TLS"):
        settings_from_environment(
            monkeypatch,
            {
                "PORTAL_PRODUCTION": "1",
                "DJANGO_DEBUG": "0",
                "DJANGO_SECRET_KEY": "k" * 50,
                "DJANGO_ALLOWED_HOSTS": "su.example",
                "PORTAL_LDAP_URI": "ldap://ldap.example",
                "PORTAL_LDAP_USER_BASE": "dc=example",
            },
        )
