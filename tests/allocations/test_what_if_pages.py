"""The round's figures and the chair's what-if pages: who sees what, a bad parameter shown on
its field, a proposal changed and the draft applied."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from allocations.models import AllocationRequest, RequestAmount, WhatIfDraft
from tests.allocations.test_what_if_services import fitted_fixture  # noqa: F401 (a fixture)
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_committee_reads_the_round_figures_but_not_the_what_if(centre, fitted):
    round_, *_ = fitted
    reviewer = _client(centre.reviewer)
    page = reviewer.get(f"/allocations/rounds/{round_.pk}/").content.decode()
    assert "The round against its capacity" in page
    assert "80.0 % oversubscribed" in page
    assert "what-if" not in page
    assert reviewer.get(f"/allocations/rounds/{round_.pk}/what-if/").status_code == 403
    draft = WhatIfDraft.objects.create(round=round_, method="pro_rata", created_by=centre.chair)
    assert reviewer.get(f"/allocations/rounds/{round_.pk}/what-if/{draft.pk}/").status_code == 404
    # Someone not on the committee does not learn the round's figures at all.
    assert _client(centre.bob).get(f"/allocations/rounds/{round_.pk}/what-if/").status_code == 404


def test_a_threshold_below_zero_is_shown_on_its_field_and_saves_nothing(centre, fitted):
    round_, *_ = fitted
    answer = _client(centre.chair).post(
        f"/allocations/rounds/{round_.pk}/what-if/",
        {"method": "protect_small", "threshold_su": "-10"},
    )
    assert answer.status_code == 200
    assert answer.context["form"].errors["threshold_su"] == ["the threshold cannot be below zero"]
    assert not WhatIfDraft.objects.exists()


def test_the_chair_proposes_changes_one_figure_and_applies(centre, fitted):
    round_, climate, _genomics = fitted
    chair = _client(centre.chair)
    made = chair.post(f"/allocations/rounds/{round_.pk}/what-if/", {"method": "pro_rata"})
    draft = WhatIfDraft.objects.get()
    assert made["Location"] == f"/allocations/rounds/{round_.pk}/what-if/{draft.pk}/"
    page = chair.get(made["Location"]).content.decode()
    assert "pawsey0001" in page
    assert "pawsey0002" in page
    assert "1 request submitted but not yet opened for review" in page
    proposal = draft.proposals.get(request_amount__request=climate, request_amount__pool=centre.cpu)
    # No reason for a figure below the request: refused, shown, nothing changed.
    chair.post(
        f"/allocations/rounds/{round_.pk}/what-if/{draft.pk}/proposals/{proposal.pk}/",
        {"proposed_su": "300", "reason": ""},
    )
    proposal.refresh_from_db()
    assert proposal.proposed_su == Decimal(400)
    chair.post(
        f"/allocations/rounds/{round_.pk}/what-if/{draft.pk}/proposals/{proposal.pk}/",
        {"proposed_su": "300", "reason": "a first year at smaller scale"},
    )
    applied = chair.post(f"/allocations/rounds/{round_.pk}/what-if/{draft.pk}/apply/")
    assert applied["Location"] == f"/allocations/rounds/{round_.pk}/"
    climate.refresh_from_db()
    assert climate.state == AllocationRequest.State.PARTIALLY_GRANTED
    assert RequestAmount.objects.get(request=climate, pool=centre.cpu).granted_su == Decimal(300)


def test_a_chair_in_conflict_is_told_their_projects_request_is_left_out(centre, fitted):
    round_, *_ = fitted
    MembershipFactory(project=centre.p2, user=centre.chair)
    chair = _client(centre.chair)
    made = chair.post(f"/allocations/rounds/{round_.pk}/what-if/", {"method": "pro_rata"})
    page = chair.get(made["Location"]).content.decode()
    assert 'data-project="pawsey0002"' not in page
    assert "1 request of your own projects is not in this what-if: staff decide it." in page


def test_staff_run_the_what_if_too(centre, fitted):
    round_, *_ = fitted
    staff = _client(centre.staff)
    assert staff.get(f"/allocations/rounds/{round_.pk}/what-if/").status_code == 200
    made = staff.post(
        f"/allocations/rounds/{round_.pk}/what-if/", {"method": "score_weighted", "exponent": "2"}
    )
    assert made.status_code == 302
