"""The tokens page's copy button in a real browser (issue 31, item 8): it puts the token shown
once on the clipboard and says so, with the portal's own script and no other host."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_copy_button_puts_the_new_token_on_the_clipboard(live_server, sign_in):
    UserFactory(username="dana")
    page = sign_in("dana")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(request.url.split("/")[2]))
    page.goto(f"{live_server.url}/account/tokens/")
    page.fill("#id_name", "laptop")
    page.get_by_role("button", name="Make token").click()
    token = page.locator("#new-token").input_value()
    assert token.startswith("su_")

    button = page.get_by_role("button", name="Copy the token")
    button.click()

    status = page.locator("#copy-token-status")
    status.filter(has_text="Copied to the clipboard.").wait_for()
    assert status.get_attribute("role") == "status"  # read out by screen readers
    assert page.evaluate("navigator.clipboard.readText()") == token
    assert hosts == {live_server.url.split("/")[2]}
    assert page.errors == []
