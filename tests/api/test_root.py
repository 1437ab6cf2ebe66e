"""GET /api/v1/: the API root links every resource, and every link answers."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.api.conftest import world  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def test_the_root_links_every_list_of_the_router_and_the_documents(world):  # noqa: F811
    response = world.client("anonymous").get("/api/v1/")
    assert response.status_code == 200
    body = response.json()
    resources = body["resources"]
    for name in ("clusters", "partitions", "jobs", "usage", "imports", "projects",
                 "allocations", "rounds", "requests", "reviews", "adjustments",
                 "quarantined-lines", "profiling-coefficients", "quote", "cost-ratio",
                 "utilisation", "cost-distribution", "priorities", "overhead",
                 "efficiency"):  # fmt: skip
        assert resources[name].startswith("http://testserver/api/v1/"), name
    assert body["schema"] == "http://testserver" + reverse("api-schema")
    assert body["docs"] == "http://testserver" + reverse("api-docs")
    assert body["token"] == "http://testserver" + reverse("api:token-obtain")


def test_every_resource_the_root_links_answers_staff(world):  # noqa: F811
    client = world.client("staff")
    resources = client.get("/api/v1/").json()["resources"]
    answers = {name: client.get(url).status_code for name, url in resources.items()}
    # Lists answer 200; reports 400 without their parameters; the quote calculator is POST
    # only (405 to a GET). Never a 404 or a 5xx.
    wrong = {name: status for name, status in answers.items() if status not in (200, 400)}
    assert wrong == {"quote": 405}


def test_a_member_following_the_links_meets_no_server_error(world):  # noqa: F811
    client = world.client("member")
    resources = client.get("/api/v1/").json()["resources"]
    answers = {name: client.get(url).status_code for name, url in resources.items()}
    # Staff-only resources answer a member 404, as if absent (docs/api.md); none fails.
    assert max(answers.values()) < 500, answers
    assert answers["projects"] == 200
    assert answers["imports"] == 404
