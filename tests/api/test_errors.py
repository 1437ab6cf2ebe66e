"""Every error under /api/ is the API's JSON ``{"message", "errors"}``, whoever answers it:
DRF, Django's CSRF middleware, the URL resolver, or the paginator and filters refusing a
query parameter (each found by tests/api/test_fuzz.py)."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    body = json.loads(response.content)
    assert set(body) == {"message", "errors"}
    return body


@pytest.fixture
def signed_in_pi(world) -> APIClient:
    """alice with a session cookie and CSRF checks on, as a browser script would be."""
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.users["pi"])
    return client


def test_a_cookie_authenticated_delete_without_a_csrf_token_is_a_json_403(signed_in_pi):
    response = signed_in_pi.delete("/api/v1/projects/pawsey0003/members/carol/")
    assert "CSRF" in _error(response, 403)["message"]


def test_a_cookie_authenticated_delete_of_a_malformed_member_url_is_a_json_404(signed_in_pi):
    # No view of the API matches: Django's CSRF middleware used to answer its HTML page.
    response = signed_in_pi.delete("/api/v1/projects/pawsey0003/members/no%20such/")
    _error(response, 404)
    response = signed_in_pi.post("/api/v1/requests/not-a-number/submit/")
    _error(response, 404)


def test_a_csrf_failure_outside_the_api_is_still_djangos_page(world):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.users["pi"])
    response = client.post("/accounts/logout/")
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")


def test_a_method_the_endpoint_does_not_have_is_a_json_405(world):
    response = world.client("staff").put("/api/v1/clusters/", {}, format="json")
    assert "PUT" in _error(response, 405)["message"]


def test_a_body_of_an_unsupported_media_type_is_a_json_415(world):
    response = world.client("staff").post(
        "/api/v1/profiling-coefficients/", data="k_prof=1", content_type="text/plain"
    )
    assert "text/plain" in _error(response, 415)["message"]


# "\u0661" is an Arabic-Indic one: a digit to str.isdigit, not to the API.
@pytest.mark.parametrize("value", ["null", "", "1.5", "-1", "0", "ten", "\u0661"])
def test_a_page_size_that_is_not_a_positive_whole_number_is_a_400_naming_it(world, value):
    response = world.client("staff").get(f"/api/v1/jobs/?page_size={value}")
    assert list(_error(response, 400)["errors"]) == ["page_size"]


@pytest.mark.parametrize("value", ["null", "", "last", "2.0", "0"])
def test_a_page_that_is_not_a_positive_whole_number_is_a_400_naming_it(world, value):
    response = world.client("staff").get(f"/api/v1/jobs/?page={value}")
    assert list(_error(response, 400)["errors"]) == ["page"]


def test_pagination_parameters_are_documented_as_whole_numbers_from_1(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    for name in ("page", "page_size"):
        assert parameters[name]["schema"] == {"type": "integer", "minimum": 1}
    assert "1000" in parameters["page_size"]["description"]


@pytest.mark.parametrize(
    "query",
    [
        "/api/v1/jobs/?charge_state=",
        "/api/v1/requests/?state=",
        "/api/v1/projects/?status=nope",
        "/api/v1/usage/?end=",
        "/api/v1/usage/?pool=",
        "/api/v1/projects/pawsey0003/balance/?on=",
        "/api/v1/quarantined-lines/?resolved=null",
        "/api/v1/quarantined-lines/?resolved=",
        "/api/v1/quarantined-lines/?import_run=",
        "/api/v1/jobs/?end=",
        "/api/v1/jobs/?project=",
    ],
)
def test_a_query_parameter_given_empty_or_unknown_is_refused_naming_it(world, query):
    response = world.client("staff").get(query)
    name = query.split("?")[1].split("=")[0]
    assert list(_error(response, 400)["errors"]) == [name]


@pytest.mark.parametrize(
    ("handler", "status"),
    [("bad_request", 400), ("permission_denied", 403), ("page_not_found", 404)],
)
def test_djangos_error_handlers_answer_json_under_the_api_and_html_elsewhere(rf, handler, status):
    from kit import api
    from portal import urls

    assert getattr(urls, f"handler{status}") is getattr(api, handler)
    view = getattr(api, handler)
    _error(view(rf.get("/api/v1/anything/"), Exception()), status)
    assert view(rf.get("/allocations/"), Exception())["Content-Type"].startswith("text/html")


def test_a_server_error_under_the_api_is_json_and_says_nothing_more(rf):
    from kit import api
    from portal import urls

    assert urls.handler500 is api.server_error
    body = _error(api.server_error(rf.get("/api/v1/jobs/")), 500)
    assert body["errors"] == {}
    assert api.server_error(rf.get("/"))["Content-Type"].startswith("text/html")


def test_a_yes_or_no_filter_takes_true_false_1_and_0(world):
    client = world.client("staff")
    for value in ("true", "false", "1", "0", "TRUE"):
        assert client.get(f"/api/v1/quarantined-lines/?resolved={value}").status_code == 200
    waiting = client.get("/api/v1/quarantined-lines/?resolved=false").json()["count"]
    assert waiting == client.get("/api/v1/quarantined-lines/?resolved=0").json()["count"] > 0
