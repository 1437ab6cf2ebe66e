"""Every kind of allocation request over the API: ``POST /api/v1/requests/`` with a ``kind``
and what that kind needs, a 400 naming the field at fault, and the same submit and decide
endpoints for every kind (docs/api.md)."""

from __future__ import annotations

from decimal import Decimal
from uuid import uuid4

import pytest
from rest_framework.test import APIClient

from allocations.grants.selectors import balance_get
from allocations.models import Allocation, AllocationRequest
from kit.calendar import add_months
from people.tokens import token_create
from tests.allocations.test_request_kinds import Kinds, kinds_fixture  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db
URL = "/api/v1/requests/"


def _client(user) -> APIClient:
    client = APIClient()
    issued = token_create(user=user, name=f"kinds {uuid4()}", scope="write", expires_in_days=1)
    client.credentials(HTTP_AUTHORIZATION=f"Token {issued.plaintext}")
    return client


def _post(user, body, url=URL):
    return _client(user).post(url, body, format="json")


def test_a_top_up_is_asked_submitted_and_granted_over_the_api(kinds: Kinds):
    centre = kinds.centre
    before = balance_get(project=centre.p1, pool=centre.cpu)
    created = _post(centre.alice, {
        "kind": "top_up", "project": "pawsey0001", "justification": "a deadline",
        "amounts": [{"pool": "testbed CPU", "su": "250"}],
    })  # fmt: skip
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["kind"], body["round"], body["round_name"]) == ("top_up", None, None)
    assert body["grant"] == kinds.cpu_grant.pk
    pk = body["id"]
    assert _post(centre.alice, {}, f"{URL}{pk}/submit/").status_code == 200
    # The committee does not see a top-up (the chair's alone); a conflicted reviewer sees it
    # as the project's member and is refused before the body is read.
    assert _post(centre.reviewer, {}, f"{URL}{pk}/decide/").status_code == 404
    assert _post(kinds.conflicted, {}, f"{URL}{pk}/decide/").status_code == 403
    review = _post(centre.chair, {}, f"{URL}{pk}/review-start/")
    assert review.status_code == 400
    assert "without the committee's review" in review.json()["message"]
    decided = _post(centre.chair, {"granted": [{"pool": "testbed CPU", "su": "250"}]},
                    f"{URL}{pk}/decide/")  # fmt: skip
    assert decided.status_code == 200, decided.json()
    assert decided.json()["state"] == "granted"
    assert [t["to_state"] for t in decided.json()["transitions"]] == [
        "draft", "submitted", "granted",
    ]  # fmt: skip
    after = balance_get(project=centre.p1, pool=centre.cpu)
    assert before is not None
    assert after is not None
    assert after.available_su - before.available_su == Decimal(250)


def test_an_extension_and_an_appeal_over_the_api(kinds: Kinds):
    centre = kinds.centre
    new_end = add_months(kinds.gpu_grant.period_end, 3)
    extension = _post(centre.alice, {
        "kind": "extension", "project": "pawsey0001", "new_end": new_end.isoformat(),
        "amounts": [{"pool": "testbed GPU", "su": "30"}],
    })  # fmt: skip
    assert extension.status_code == 201, extension.json()
    assert extension.json()["new_end"] == new_end.isoformat()
    pk = extension.json()["id"]
    _post(centre.alice, {}, f"{URL}{pk}/submit/")
    decided = _post(centre.staff, {"granted": [{"pool": "testbed GPU", "su": "30"}]},
                    f"{URL}{pk}/decide/")  # fmt: skip
    assert decided.status_code == 200, decided.json()
    assert Allocation.objects.get(pk=kinds.gpu_grant.pk).period_end == new_end

    appeal = _post(kinds.manager, {"kind": "appeal", "appeal_of": kinds.application.pk})
    assert appeal.status_code == 201, appeal.json()
    assert (appeal.json()["project"], appeal.json()["appeal_of"]) == (
        "pawsey0001", kinds.application.pk,
    )  # fmt: skip
    again = _post(centre.alice, {"kind": "appeal", "appeal_of": kinds.application.pk})
    assert again.status_code == 400
    assert "once per decision" in again.json()["errors"]["appeal_of"][0]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"kind": "new", "project": "pawsey0001"}, "round", "names its round"),
        ({"kind": "top_up", "project": "pawsey0001",
          "amounts": [{"pool": "testbed CPU", "su": "lots"}]}, "amounts", "valid number"),
        ({"kind": "top_up", "project": "pawsey0001"}, "amounts", "names one pool"),
        ({"kind": "extension", "project": "pawsey0001",
          "amounts": [{"pool": "testbed CPU", "su": "5"}]}, "new_end", "new end"),
        ({"kind": "extension", "project": "pawsey0001", "new_end": "2020-01-01",
          "amounts": [{"pool": "testbed CPU", "su": "5"}]}, "new_end", "after the grant's end"),
        ({"kind": "appeal"}, "appeal_of", "names the decided request"),
        ({"kind": "renewal", "project": "pawsey0001"}, "round", "no open round covers"),
        ({"kind": "top_up", "project": "pawsey0002",
          "amounts": [{"pool": "testbed CPU", "su": "5"}]}, "project", "unknown project"),
        ({"kind": "top_up", "project": "pawsey0003",
          "amounts": [{"pool": "testbed CPU", "su": "5"}]}, "amounts", "no grant in force"),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_naming_the_field_and_saves_nothing(kinds: Kinds, body, field, says):
    before = AllocationRequest.objects.count()
    response = _post(kinds.centre.alice, body)
    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert field in errors, errors
    assert says in str(errors[field]), errors
    assert AllocationRequest.objects.count() == before


def test_an_appeal_of_an_undecided_request_is_refused_on_its_field(kinds: Kinds):
    top_up = _post(kinds.centre.alice, {
        "kind": "top_up", "project": "pawsey0001", "amounts": [{"pool": "testbed CPU", "su": "5"}],
    }).json()  # fmt: skip
    response = _post(kinds.centre.alice, {"kind": "appeal", "appeal_of": top_up["id"]})
    assert response.status_code == 400
    assert "is draft" in response.json()["errors"]["appeal_of"][0]


def test_a_member_may_not_ask_and_another_pi_cannot_see_the_decision_to_appeal(kinds: Kinds):
    centre = kinds.centre
    top_up = {"kind": "top_up", "project": "pawsey0001",
              "amounts": [{"pool": "testbed CPU", "su": "5"}]}  # fmt: skip
    # Members of pawsey0001 who lead no project are refused before the body is read.
    assert _post(kinds.member, top_up).status_code == 403
    assert _post(kinds.conflicted, top_up).status_code == 403  # leads no project
    refused = _post(centre.bob, {"kind": "appeal", "appeal_of": kinds.application.pk})
    assert refused.status_code == 400  # bob cannot see it: "unknown request", as a 404 would
    assert "unknown request" in refused.json()["errors"]["appeal_of"][0]
