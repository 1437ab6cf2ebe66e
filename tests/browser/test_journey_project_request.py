"""The journey of a new project, in Chromium: a person with no project asks for one from the
dashboard (a mistyped amount is shown on its field and loses nothing typed), staff approve it
from their queue, and the person then opens the new project's page."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import ResourcePoolFactory, UserFactory, example_cluster

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def centre(transactional_db: None) -> dict[str, Any]:
    cluster = example_cluster("slurm-testbed")
    pools = {
        "cpu": ResourcePoolFactory(name="testbed CPU", cluster=cluster, partitions=["work"]),
        "gpu": ResourcePoolFactory(name="testbed GPU", cluster=cluster, partitions=["gpu"]),
    }
    UserFactory(username="nina", first_name="Nina")
    UserFactory(username="staff", is_staff=True)
    return pools


def _field(page: Any, input_id: str) -> Any:
    """The form field (label, input, errors) holding the input ``input_id``."""
    return page.locator("div.field", has=page.locator(f"#{input_id}"))


def test_a_new_user_asks_for_a_project_staff_approve_it_and_she_opens_it(
    live_server, centre, sign_in
):
    cpu, gpu = centre["cpu"], centre["gpu"]
    nina = sign_in("nina")
    assert "not a member of any project" in nina.locator("#no-project").inner_text()
    nina.locator("#no-project").get_by_role("link", name="Ask for a new project").click()
    nina.wait_for_url("**/allocations/project-requests/new/")

    nina.fill("#id_title", "Coral reef models")
    nina.fill("#id_abstract", "Reef growth under warming oceans.")
    nina.fill("#id_field_of_science", "Marine science")
    nina.fill(f"#id_pool_{cpu.pk}", "fifty thousand")
    nina.fill(f"#id_pool_{gpu.pk}", "2000")
    nina.get_by_role("button", name="Send the request").click()
    error = _field(nina, f"id_pool_{cpu.pk}").locator(".errorlist")
    error.wait_for()
    assert "number" in error.inner_text()
    # What was typed is all still there, the wrong amount too, to correct.
    assert nina.input_value("#id_title") == "Coral reef models"
    assert nina.input_value("#id_abstract") == "Reef growth under warming oceans."
    assert nina.input_value("#id_field_of_science") == "Marine science"
    assert nina.input_value(f"#id_pool_{cpu.pk}") == "fifty thousand"
    assert nina.input_value(f"#id_pool_{gpu.pk}") == "2000"

    nina.fill(f"#id_pool_{cpu.pk}", "50000")
    nina.get_by_role("button", name="Send the request").click()
    nina.wait_for_url("**/allocations/project-requests/*/")
    assert nina.locator("#project-request-state").inner_text() == "waiting for a decision"

    staff = sign_in("staff")
    staff.get_by_role("link", name="Project requests to decide (1)").click()
    staff.get_by_role("link", name="Coral reef models").click()
    assert staff.input_value("#id_code") == "pawsey0001"
    staff.get_by_role("button", name="Approve").click()
    staff.locator("#project-request-state", has_text="approved").wait_for()
    assert "pawsey0001 is created" in staff.locator("body").inner_text()

    nina.goto(f"{live_server.url}/")
    nina.get_by_role("link", name="pawsey0001").first.click()
    nina.wait_for_url("**/allocations/projects/pawsey0001/")
    assert "Coral reef models" in nina.locator("body").inner_text()
    assert nina.errors == []
    assert staff.errors == []
