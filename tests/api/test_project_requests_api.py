"""The project requests API: ask, list (one's own; staff all), confirm, request changes,
resubmit, approve and reject, with the API's error shape for bad input."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from allocations.models import ProjectRequest
from tests.allocations.conftest import centre  # noqa: F401 (pytest fixture)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/project-requests/"


def _client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def _body(**changes):
    body = {
        "title": "Coral reef models", "abstract": "Reef growth under warming.",
        "field_of_science": "Marine science",
        "amounts": [{"pool": "testbed CPU", "su": "50000"}, {"pool": "testbed GPU", "su": "2000"}],
        "estimates": [{"cluster": "slurm-testbed", "partition": "work", "jobs": 10, "hours": "2"}],
    }  # fmt: skip
    return {**body, **changes}


def test_a_newcomer_asks_staff_approve_and_the_project_exists(centre):  # noqa: F811
    nina = UserFactory(username="nina")
    created = _client(nina).post(URL, _body(), format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["state"], body["requester"], body["pi"]) == ("submitted", "nina", "nina")
    assert [a["pool"] for a in body["amounts"]] == ["testbed CPU", "testbed GPU"]
    assert float(body["estimates"][0]["service_units"]) > 0
    assert [t["to_state"] for t in body["transitions"]] == ["submitted"]

    # The requester lists their own; someone else sees none of it; staff see it.
    assert [r["id"] for r in _client(nina).get(URL).json()["results"]] == [body["id"]]
    assert _client(centre.bob).get(URL).json()["results"] == []
    assert _client(centre.bob).get(f"{URL}{body['id']}/").status_code == 404
    assert _client(centre.staff).get(f"{URL}?state=submitted").json()["count"] == 1

    refused = _client(nina).post(f"{URL}{body['id']}/approve/", {}, format="json")
    assert refused.status_code == 403
    approved = _client(centre.staff).post(
        f"{URL}{body['id']}/approve/",
        {"period_start": "2027-01-01", "period_end": "2028-01-01"},
        format="json",
    )
    assert approved.status_code == 200, approved.json()
    assert (approved.json()["state"], approved.json()["project"]) == ("approved", "pawsey0005")
    project = _client(nina).get("/api/v1/projects/pawsey0005/")
    assert project.status_code == 200
    assert project.json()["pi"] == "nina"
    again = _client(centre.staff).post(f"{URL}{body['id']}/approve/", {}, format="json")
    assert again.status_code == 400
    assert "cannot be approved" in again.json()["message"]


def test_a_named_pi_confirms_then_changes_are_asked_resubmitted_and_rejected(centre):  # noqa: F811
    nina = UserFactory(username="nina")
    body = _client(nina).post(URL, _body(pi="bob@example.org"), format="json").json()
    pk = body["id"]
    assert (body["state"], body["pi"]) == ("awaiting_pi", "bob")
    assert _client(centre.bob).get(URL).json()["count"] == 1  # named as PI
    assert (
        _client(nina).post(f"{URL}{pk}/confirm/", {"accept": True}, format="json").status_code
        == 403
    )
    confirmed = _client(centre.bob).post(f"{URL}{pk}/confirm/", {"accept": True}, format="json")
    assert confirmed.json()["state"] == "submitted"

    missing = _client(centre.staff).post(f"{URL}{pk}/request-changes/", {}, format="json")
    assert missing.status_code == 400
    assert "reason" in missing.json()["errors"]
    changes = _client(centre.staff).post(
        f"{URL}{pk}/request-changes/", {"reason": "Ask for less GPU."}, format="json"
    )
    assert changes.json()["state"] == "changes_requested"
    resubmitted = _client(nina).post(
        f"{URL}{pk}/resubmit/", {"amounts": [{"pool": "testbed CPU", "su": "40000"}]},
        format="json",
    )  # fmt: skip
    assert resubmitted.json()["state"] == "submitted"
    assert [a["pool"] for a in resubmitted.json()["amounts"]] == ["testbed CPU"]

    no_reason = _client(centre.staff).post(f"{URL}{pk}/reject/", {"reason": ""}, format="json")
    assert no_reason.status_code == 400
    rejected = _client(centre.staff).post(
        f"{URL}{pk}/reject/", {"reason": "Outside the centre's remit."}, format="json"
    )
    assert rejected.json()["state"] == "rejected"
    assert rejected.json()["decision_reason"] == "Outside the centre's remit."


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"amounts": [{"pool": "testbed CPU", "su": "lots"}]}, "must be a number"),
        ({"amounts": [{"pool": "nowhere", "su": "10"}]}, "unknown pool nowhere"),
        ({"pi": "nobody@example.org"}, "signed in to the portal yet"),
        ({"title": ""}, "title"),
    ],
)
def test_bad_input_is_a_400_saying_what_and_keeps_nothing(centre, changes, message):  # noqa: F811
    response = _client(centre.bob).post(URL, _body(**changes), format="json")
    assert response.status_code == 400
    assert message in response.json()["message"]
    assert not ProjectRequest.objects.exists()


def test_anonymous_callers_are_refused_before_their_input_is_read(centre):  # noqa: F811
    assert APIClient().post(URL, {}, format="json").status_code in {401, 403}
