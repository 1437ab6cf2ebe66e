"""Single sign-on set-up around the flow itself (the flow: tests/browser/test_sso.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests
from django.contrib.auth.models import Group, User
from django.test import Client

from people import oidc
from people.oidc import CentreOIDCBackend, ProviderUnavailable, provider_metadata
from people.roles import COMMITTEE_GROUP
from tests.factories import UserFactory
from tests.oidc_provider.harness import PASSWORD, Provider, provider_running

pytestmark = pytest.mark.django_db

# Nothing listens on the discard port of the loopback: a provider that is down.
DOWN = "http://127.0.0.1:9/openid"
PASSWORD_BACKENDS = ["axes.backends.AxesStandaloneBackend", "people.oidc.CentreOIDCBackend"]


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with provider_running(
        tmp_path_factory.mktemp("idp"), redirect_uris=["http://testserver/oidc/callback/"]
    ) as running:
        yield running


@pytest.fixture
def sso_on(settings: Any) -> Any:
    settings.PORTAL_OIDC_ISSUER = DOWN
    settings.OIDC_RP_CLIENT_SECRET = "s"
    settings.AUTHENTICATION_BACKENDS = [
        *PASSWORD_BACKENDS,
        "django.contrib.auth.backends.ModelBackend",
    ]
    oidc.provider_metadata.cache_clear()
    yield settings
    oidc.provider_metadata.cache_clear()


def test_without_an_issuer_the_sign_in_page_offers_only_the_password_form():
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with" not in page
    assert 'name="password"' in page
    assert Client().get("/oidc/authenticate/").status_code == 404


def test_with_an_issuer_the_sign_in_page_offers_the_centre_first(sso_on):
    sso_on.PORTAL_OIDC_NAME = "Pawsey account"
    page = Client().get("/accounts/login/?next=/allocations/rounds/").content.decode()
    assert "Sign in with Pawsey account" in page
    assert "/oidc/authenticate/?next=/allocations/rounds/" in page
    assert 'name="password"' in page
    sso_on.AUTHENTICATION_BACKENDS = PASSWORD_BACKENDS  # PORTAL_PASSWORD_LOGIN=0
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Pawsey account" in page
    assert 'name="password"' not in page


def test_a_provider_that_is_down_gets_a_page_saying_so_and_passwords_still_work(sso_on):
    response = Client().get("/oidc/authenticate/")
    assert response.status_code == 503
    assert "Single sign-on is unavailable" in response.content.decode()
    UserFactory(username="dana")
    client = Client()
    client.post("/accounts/login/", {"username": "dana", "password": "pw-for-tests"})
    assert "_auth_user_id" in client.session


def test_a_failed_sign_on_comes_back_to_the_sign_in_page_with_a_message(sso_on):
    page = Client().get("/accounts/login/?sso=failed").content.decode()
    assert "Single sign-on did not complete" in page


def test_the_start_of_sign_on_sends_to_the_discovered_endpoint_with_pkce(settings, provider):
    settings.PORTAL_OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = provider.client_secret
    oidc.provider_metadata.cache_clear()
    response = Client().get("/oidc/authenticate/")
    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith(f"{provider.issuer}/authorize?")
    assert "code_challenge_method=S256" in location
    assert "client_id=su-portal" in location
    assert "scope=openid+email+profile+groups" in location


def test_discovery_refuses_a_document_that_names_another_issuer(provider):
    provider_metadata.cache_clear()
    with pytest.raises(ProviderUnavailable, match="names the issuer"):
        provider_metadata(provider.issuer + "/")  # what a mistyped issuer would give
    with pytest.raises(ProviderUnavailable):
        provider_metadata(DOWN)


@pytest.mark.parametrize(
    "username", ["", "Robert'); DROP TABLE", "a" * 40, "ümlaut", "1starts-with-digit"]
)
def test_a_username_claim_that_is_no_login_name_is_refused(settings, username):
    assert not CentreOIDCBackend().verify_claims({settings.PORTAL_OIDC_USERNAME_CLAIM: username})


def test_the_username_claim_is_the_login_and_the_groups_claim_gives_roles(settings):
    settings.PORTAL_OIDC_USERNAME_CLAIM = "uid"
    settings.PORTAL_OIDC_GROUPS_CLAIM = "entitlements"
    backend = CentreOIDCBackend()
    claims = {"uid": "Kim", "email": "kim@centre.example", "entitlements": ["hpc-staff"]}
    assert backend.verify_claims(claims)
    kim: User = backend.create_user(claims)
    assert (kim.username, kim.email, kim.is_staff) == ("kim", "kim@centre.example", True)
    assert list(backend.filter_users_by_claims(claims)) == [kim]
    backend.update_user(kim, {"uid": "kim", "entitlements": "allocation-committee"})
    kim.refresh_from_db()
    assert not kim.is_staff
    assert Group.objects.get(name=COMMITTEE_GROUP).user_set.get() == kim


# --- Refusals in the callback, with the real provider -------------------------------------

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def sso_real(settings: Any, provider: Provider) -> Iterator[Provider]:
    settings.PORTAL_OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = provider.client_secret
    settings.AUTHENTICATION_BACKENDS = [*PASSWORD_BACKENDS]
    oidc.provider_metadata.cache_clear()
    yield provider
    oidc.provider_metadata.cache_clear()


def _state(start: Any) -> str:
    return parse_qs(urlsplit(start["Location"]).query)["state"][0]


def _callback_from_the_centre(portal: Client, username: str = "rita") -> str:
    """Start single sign-on in ``portal``'s session and sign in at the provider as a browser
    would; the callback (path and query) the provider sends the browser back to."""
    start = portal.get("/oidc/authenticate/")
    assert start.status_code == 302
    browser = requests.Session()
    page = browser.get(start["Location"], timeout=30)  # to the provider's sign-in page
    token = CSRF.search(page.text)
    assert token is not None, page.text[:500]
    form = {"csrfmiddlewaretoken": token.group(1), "username": username, "password": PASSWORD}
    response = browser.post(page.url, data=form, allow_redirects=False, timeout=30)
    url = page.url
    while not response.headers["Location"].startswith("http://testserver/"):
        url = urljoin(url, response.headers["Location"])
        response = browser.get(url, allow_redirects=False, timeout=30)
    return response.headers["Location"].removeprefix("http://testserver")


def _signed_in_as(client: Client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return None if user_id is None else User.objects.get(pk=user_id).username


def test_a_replayed_callback_comes_back_to_the_sign_in_page_with_a_message(sso_real):
    portal = Client()
    callback = _callback_from_the_centre(portal)
    first = portal.get(callback)
    assert (first.status_code, first["Location"]) == (302, "/")
    assert _signed_in_as(portal) == "rita"
    replayed = portal.get(callback)
    assert (replayed.status_code, replayed["Location"]) == (302, "/accounts/login/?sso=failed")
    page = portal.get(replayed["Location"]).content.decode()
    assert "Single sign-on did not complete" in page


def test_a_code_the_provider_refuses_comes_back_to_the_sign_in_page_with_a_message(sso_real):
    """The code of a completed sign-on, sent again with a state this session still holds:
    the provider's token endpoint answers invalid_grant."""
    portal = Client()
    spare = _state(portal.get("/oidc/authenticate/"))  # a second tab, never completed
    callback = _callback_from_the_centre(portal)
    assert portal.get(callback)["Location"] == "/"
    code = parse_qs(urlsplit(callback).query)["code"][0]
    replayed = portal.get("/oidc/callback/", {"code": code, "state": spare})
    assert (replayed.status_code, replayed["Location"]) == (302, "/accounts/login/?sso=failed")
    page = Client().get(replayed["Location"]).content.decode()
    assert "Single sign-on did not complete" in page


def test_refused_sign_ons_lock_their_addresses_not_everyones(sso_real, settings):
    """A refused callback names no account: it counts against its address alone, so refusals
    from many addresses do not add up to lock single sign-on for everyone."""
    settings.AXES_FAILURE_LIMIT = 2
    for n in range(3):
        stranger = Client(REMOTE_ADDR=f"192.0.2.{n + 1}")
        state = _state(stranger.get("/oidc/authenticate/"))
        refused = stranger.get("/oidc/callback/", {"code": "not-a-code", "state": state})
        assert refused["Location"] == "/accounts/login/?sso=failed"
    portal = Client(REMOTE_ADDR="198.51.100.7")
    assert portal.get(_callback_from_the_centre(portal))["Location"] == "/"
    assert _signed_in_as(portal) == "rita"
