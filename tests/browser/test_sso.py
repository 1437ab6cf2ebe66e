"""Single sign-on through a real OpenID Connect provider, in Chromium, the whole way.

The provider (tests/oidc_provider) runs in its own process on the loopback interface with its
own users and groups; the portal (pytest-django's live server) knows only its issuer URL,
client id and secret, and reads everything else from the provider's discovery document.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from people import oidc
from people.roles import COMMITTEE_GROUP
from tests.oidc_provider.harness import PASSWORD, Provider, provider_running

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def provider(live_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    state = tmp_path_factory.mktemp("idp")
    with provider_running(state, redirect_uris=[f"{live_server.url}/oidc/callback/"]) as running:
        yield running


@pytest.fixture
def sso(settings: Any, provider: Provider) -> Provider:
    """The portal configured as a centre would: issuer, client id, secret; nothing else."""
    settings.PORTAL_OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = provider.client_secret
    settings.AUTHENTICATION_BACKENDS = [
        "axes.backends.AxesStandaloneBackend",
        "people.oidc.CentreOIDCBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    oidc.provider_metadata.cache_clear()
    return provider


def _sign_in_at_the_centre(browser: Any, live_server: Any, username: str) -> Any:
    page = browser.new_context().new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.click("text=Sign in with your centre account")
    page.wait_for_selector("text=Centre identity provider")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("text=Sign in at the centre")
    page.wait_for_url(f"{live_server.url}/")
    return page


def test_a_researcher_signs_in_through_the_centre_and_is_created_on_first_sign_in(
    browser, live_server, sso
):
    assert not User.objects.filter(username="rita").exists()
    page = _sign_in_at_the_centre(browser, live_server, "rita")
    assert page.locator(".who").inner_text() == "rita"
    rita = User.objects.get(username="rita")
    assert (rita.first_name, rita.last_name, rita.email) == (
        "Rita", "Researcher", "rita@centre.example",
    )  # fmt: skip
    assert not rita.is_staff
    assert not rita.has_usable_password()  # the portal never learns the centre password
    page.context.close()


def test_the_groups_claim_makes_staff_and_committee_members_and_is_applied_every_time(
    browser, live_server, sso, provider
):
    page = _sign_in_at_the_centre(browser, live_server, "sam")
    assert User.objects.get(username="sam").is_staff
    assert page.locator("nav >> text=Imports").count() == 1  # the staff menu
    page.context.close()
    page = _sign_in_at_the_centre(browser, live_server, "cleo")
    cleo = User.objects.get(username="cleo")
    assert list(cleo.groups.values_list("name", flat=True)) == [COMMITTEE_GROUP]
    assert not cleo.is_staff
    page.context.close()

    # The centre takes sam out of hpc-staff: at the next sign-in sam is staff no more.
    with sqlite3.connect(provider.state_dir / "idp.sqlite3") as db:
        db.execute(
            "DELETE FROM auth_user_groups WHERE user_id = "
            "(SELECT id FROM auth_user WHERE username = 'sam')"
        )
    page = _sign_in_at_the_centre(browser, live_server, "sam")
    assert not User.objects.get(username="sam").is_staff
    assert page.locator("nav >> text=Imports").count() == 0
    page.context.close()


def test_a_wrong_centre_password_signs_no_one_in(browser, live_server, sso):
    page = browser.new_context().new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.click("text=Sign in with your centre account")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "not-the-password")
    page.click("text=Sign in at the centre")
    assert page.locator("[role=alert]").inner_text() == "Wrong username or password."
    assert not User.objects.filter(username="rita").exists()
    page.context.close()
