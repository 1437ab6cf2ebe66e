"""Journey: a PI appeals a partial grant in Chromium, the chair decides the appeal in Chromium,
and the decision is not offered for a second appeal, nor taken when asked for by hand
(docs/allocations.md, "Changing an allocation")."""

from __future__ import annotations

import re

import pytest

from allocations.models import Allocation
from tests.browser.test_journey_top_up import granted_project

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pi_appeals_a_partial_grant_once_and_the_chair_raises_it(live_server, sign_in):
    granted = granted_project()
    decision_url = f"{live_server.url}/allocations/requests/{granted.application.pk}/"

    pi = sign_in("alice")
    pi.goto(decision_url)
    assert pi.locator("#request-state").inner_text() == "partially granted"
    pi.get_by_role("link", name="Appeal this decision").click()
    pi.wait_for_url("**kind=appeal**")
    assert "oversubscribed" in pi.locator("#appealed").locator("..").inner_text()
    pi.get_by_role("button", name="Save draft").click()  # no justification: said on the field
    pi.locator(".field", has=pi.locator("#id_justification")).locator(".errorlist").wait_for()
    pi.fill("#id_justification", "The GPU runs are the paper's core result.")
    pi.get_by_role("button", name="Save draft").click()
    pi.wait_for_url(re.compile(r".*/allocations/requests/\d+/$"))
    appeal_url = pi.url
    assert pi.locator("#appeal-of").inner_text().startswith("Appeals the decision on request")
    # The draft asks for what was not granted: 300 GPU SU.
    assert pi.locator(f"#id_pool_{granted.gpu.pk}").input_value() == "300"
    pi.get_by_role("button", name="Submit", exact=True).click()
    pi.locator("#request-state", has_text="submitted").wait_for()

    pi.goto(decision_url)  # appealed once: no second appeal offered
    assert pi.get_by_role("link", name="Appeal this decision").count() == 0
    assert "Appealed: request" in pi.locator("#appealed-by").inner_text()

    chair = sign_in("dana")
    chair.goto(appeal_url)
    chair.get_by_role("link", name="Decide and grant").click()
    chair.fill(f"#id_pool_{granted.gpu.pk}", "300")
    chair.get_by_role("button", name="Record the decision").click()
    chair.locator("#request-state", has_text="granted").wait_for()
    assert Allocation.objects.get(project=granted.project, pool=granted.gpu).granted_su == 500

    # Asked for by hand, a second appeal of the decision is refused with the reason.
    pi.goto(
        f"{live_server.url}/allocations/projects/pawsey0001/requests/new/"
        f"?kind=appeal&appeal_of={granted.application.pk}"
    )
    pi.fill("#id_justification", "Once more.")
    pi.get_by_role("button", name="Save draft").click()
    refused = pi.locator(".errorlist.nonfield")
    refused.wait_for()
    assert "appealed already: once per decision" in refused.inner_text()
    assert pi.errors == []
    assert chair.errors == []
