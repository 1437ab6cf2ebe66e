"""The chair's what-if over the API: ``POST /api/v1/rounds/<id>/what-if/`` returns the draft's
proposals and totals, a proposal is edited with ``PATCH``, and the draft is applied with a
separate ``POST .../apply/`` (docs/api.md)."""

from __future__ import annotations

from decimal import Decimal
from uuid import uuid4

import pytest
from rest_framework.test import APIClient

from allocations.models import AllocationRequest, RequestAmount, WhatIfDraft
from people.tokens import token_create
from tests.allocations.test_what_if_services import fitted_fixture  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    issued = token_create(user=user, name=f"what-if {uuid4()}", scope="write", expires_in_days=1)
    client.credentials(HTTP_AUTHORIZATION=f"Token {issued.plaintext}")
    return client


def test_a_what_if_returns_its_proposals_and_totals_and_applies_in_one_step(centre, fitted):
    round_, _climate, genomics = fitted
    chair = _client(centre.chair)
    made = chair.post(
        f"/api/v1/rounds/{round_.pk}/what-if/",
        {"method": "score_weighted", "exponent": "1"},
        format="json",
    )
    assert made.status_code == 201, made.content
    body = made.json()
    # CPU: g(5) = 1, g(2) = 0.4; lambda = 1000 / (600 + 360) > 1 for pawsey0001: it is whole,
    # and pawsey0002 gets the 400 left.
    proposed = {(p["project"], p["pool"]): p["proposed_su"] for p in body["proposals"]}
    assert proposed[("pawsey0001", "testbed CPU")] == "600.000000"
    assert proposed[("pawsey0002", "testbed CPU")] == "400.000000"
    pools = {pool["pool"]: pool for pool in body["pools"]}
    assert pools["testbed CPU"]["proposed_su"] == "1000.000000"
    assert pools["testbed CPU"]["remaining_su"] == "1000.000000"
    assert pools["testbed CPU"]["fits"] is True
    assert body["submitted"] == 1  # pawsey0003's, not yet opened for review
    assert body["applied_at"] is None

    cut = next(p for p in body["proposals"] if p["project"] == "pawsey0002" and "CPU" in p["pool"])
    edited = chair.patch(
        f"/api/v1/rounds/{round_.pk}/what-if/{body['id']}/proposals/{cut['id']}/",
        {"proposed_su": "350", "reason": "half of it is exploratory"},
        format="json",
    )
    assert edited.status_code == 200, edited.content
    assert edited.json()["edited"] is True

    applied = chair.post(f"/api/v1/rounds/{round_.pk}/what-if/{body['id']}/apply/")
    assert applied.status_code == 200, applied.content
    assert applied.json()["applied_at"] is not None
    genomics.refresh_from_db()
    assert genomics.state == AllocationRequest.State.PARTIALLY_GRANTED
    assert genomics.decision_reason.startswith("half of it is exploratory")
    assert RequestAmount.objects.get(request=genomics, pool=centre.cpu).granted_su == Decimal(350)

    again = chair.post(f"/api/v1/rounds/{round_.pk}/what-if/{body['id']}/apply/")
    assert again.status_code == 400
    assert "applies once" in again.json()["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"method": "protect_small", "threshold_su": "-1"}, "threshold_su"),
        ({"method": "score_weighted", "exponent": "-0.5"}, "exponent"),
        ({"method": "pro_rata", "floor_su": "-3"}, "floor_su"),
        ({"method": "lottery"}, "method"),
        ({"method": "pro_rata", "floor_su": "lots"}, "floor_su"),
    ],
)
def test_bad_parameters_get_a_400_naming_the_field_and_save_nothing(centre, fitted, body, field):
    round_, *_ = fitted
    answer = _client(centre.chair).post(f"/api/v1/rounds/{round_.pk}/what-if/", body, format="json")
    assert answer.status_code == 400
    assert field in answer.json()["errors"]
    assert not WhatIfDraft.objects.exists()


def test_a_proposal_above_its_request_is_refused_on_its_field(centre, fitted):
    round_, *_ = fitted
    chair = _client(centre.chair)
    body = chair.post(
        f"/api/v1/rounds/{round_.pk}/what-if/", {"method": "pro_rata"}, format="json"
    ).json()
    first = body["proposals"][0]
    answer = chair.patch(
        f"/api/v1/rounds/{round_.pk}/what-if/{body['id']}/proposals/{first['id']}/",
        {"proposed_su": "100000", "reason": "more"},
        format="json",
    )
    assert answer.status_code == 400
    assert "cannot exceed the request" in answer.json()["errors"]["proposed_su"][0]


def test_the_written_out_proposal_rendering_is_the_serializers(centre, fitted):
    from allocations.rounds.selectors import what_if_proposal_rows
    from allocations.rounds.serializers import (
        WhatIfProposalOutputSerializer,
        what_if_proposal_out,
    )
    from allocations.rounds.what_if_services import what_if_draft_create

    round_, *_ = fitted
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    rows = what_if_proposal_rows(draft=draft, actor=centre.chair)
    assert len(rows) == 4
    for row in rows:
        assert what_if_proposal_out(row) == WhatIfProposalOutputSerializer(row).data
