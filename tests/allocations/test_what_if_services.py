"""The chair's what-if, written (allocations/rounds/what_if_services.py): a draft of the
requests under review, one figure edited, and the draft applied in one step."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied

from allocations.grants.services import AllocationError
from allocations.models import (
    Allocation,
    AllocationRequest,
    RequestAmount,
    WhatIfDraft,
    WhatIfProposal,
)
from allocations.rounds.selectors import round_capacity, what_if_proposals, what_if_totals
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    review_submit,
    round_create,
)
from allocations.rounds.what_if import WhatIfError
from allocations.rounds.what_if_services import (
    what_if_apply,
    what_if_draft_create,
    what_if_proposal_set,
)
from tests.allocations.conftest import PERIOD, open_round_times
from tests.factories import MembershipFactory

State = AllocationRequest.State
D = Decimal


def _request(round_, project, actor, amounts, *, review=True):
    request = request_create(
        round_=round_, project=project, actor=actor, justification="science", amounts=amounts
    )
    request_submit(request=request, actor=actor)
    if review:
        request_review_start(request=request, actor=round_.committee.get(is_chair=True).user)
    return request


@pytest.fixture(name="fitted")
def fitted_fixture(centre):
    """A round of 1000 CPU SU and 100 GPU SU; pawsey0001 asks 600 + 50, pawsey0002 900 + 100,
    both under review and scored; pawsey0003 asks 300 CPU SU, submitted only."""
    opens, closes = open_round_times()
    round_ = round_create(
        name="2027 round", opens_at=opens, closes_at=closes,
        period_start=PERIOD[0], period_end=PERIOD[1],
        available={centre.cpu: D(1000), centre.gpu: D(100)},
        chair=centre.chair, committee=[centre.reviewer], actor=centre.staff,
    )  # fmt: skip
    climate = _request(round_, centre.p1, centre.alice, {centre.cpu: D(600), centre.gpu: D(50)})
    genomics = _request(round_, centre.p2, centre.bob, {centre.cpu: D(900), centre.gpu: D(100)})
    _request(round_, centre.p3, centre.alice, {centre.cpu: D(300)}, review=False)
    review_submit(request=climate, reviewer=centre.reviewer, score=5)
    review_submit(request=genomics, reviewer=centre.reviewer, score=2)
    return round_, climate, genomics


def _proposed(draft: WhatIfDraft) -> dict[tuple[str, str], Decimal]:
    return {
        (p.request_amount.request.project.code, p.request_amount.pool.name): p.proposed_su
        for p in draft.proposals.select_related("request_amount__request__project")
    }


def test_a_pro_rata_draft_fits_the_requests_under_review_into_the_round(centre, fitted):
    round_, climate, _genomics = fitted
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    # CPU: 1500 asked of 1000: factor 2/3; GPU: 150 asked of 100: factor 2/3 too.
    assert _proposed(draft) == {
        ("pawsey0001", "testbed CPU"): D("400"),
        ("pawsey0001", "testbed GPU"): D("33.333333"),
        ("pawsey0002", "testbed CPU"): D("600"),
        ("pawsey0002", "testbed GPU"): D("66.666666"),
    }
    proposal = draft.proposals.get(request_amount__request=climate, request_amount__pool=centre.cpu)
    assert proposal.request_state == State.UNDER_REVIEW
    assert proposal.score == D("5.00")
    assert "pro rata" in proposal.reason
    assert "factor 0.666666" in proposal.reason
    totals = {total.pool.name: total for total in what_if_totals(draft=draft)}
    assert totals["testbed CPU"].proposed_su == D(1000)
    assert totals["testbed GPU"].proposed_su == D("99.999999")
    assert all(total.fits for total in totals.values())


def test_the_round_figures_count_open_requests_against_what_is_left(centre, fitted):
    round_, *_ = fitted
    cpu, gpu = round_capacity(round_=round_)
    assert (cpu.available_su, cpu.granted_su, cpu.open_su, cpu.under_review_su) == (
        D(1000), D(0), D(1800), D(1500),
    )  # fmt: skip
    assert cpu.oversubscription_percent == D("80.0")
    assert cpu.oversubscription == "80.0 % oversubscribed"
    assert gpu.oversubscription_percent == D("50.0")


def test_applying_grants_exactly_the_proposals_with_their_reasons(centre, fitted):
    round_, climate, genomics = fitted
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    edited = draft.proposals.get(request_amount__request=climate, request_amount__pool=centre.gpu)
    what_if_proposal_set(
        proposal=edited, actor=centre.chair, proposed_su="30", reason="the GPU code is not ready"
    )
    what_if_apply(draft=draft, actor=centre.chair)

    climate.refresh_from_db()
    genomics.refresh_from_db()
    assert climate.state == genomics.state == State.PARTIALLY_GRANTED
    granted = {
        (amount.request.project.code, amount.pool.name): amount.granted_su
        for amount in RequestAmount.objects.filter(request__round=round_, granted_su__isnull=False)
    }
    assert granted == {
        ("pawsey0001", "testbed CPU"): D("400"),
        ("pawsey0001", "testbed GPU"): D("30"),
        ("pawsey0002", "testbed CPU"): D("600"),
        ("pawsey0002", "testbed GPU"): D("66.666666"),
    }
    assert "the GPU code is not ready" in climate.decision_reason
    assert "pro rata" in climate.decision_reason
    assert "pro rata" in genomics.decision_reason
    assert Allocation.objects.filter(request=climate).count() == 2
    draft.refresh_from_db()
    assert draft.applied_by == centre.chair
    assert draft.applied_at is not None


def test_a_request_decided_meanwhile_refuses_the_draft_and_nothing_changes(centre, fitted):
    round_, climate, genomics = fitted
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    request_decide(
        request=genomics, actor=centre.chair, reason="small",
        granted={centre.cpu: D(100), centre.gpu: D(10)},
    )  # fmt: skip
    with pytest.raises(AllocationError, match="pawsey0002 changed since this what-if"):
        what_if_apply(draft=draft, actor=centre.chair)
    climate.refresh_from_db()
    assert climate.state == State.UNDER_REVIEW
    assert not Allocation.objects.filter(request=climate).exists()
    draft.refresh_from_db()
    assert draft.applied_at is None


def test_a_draft_applies_once(centre, fitted):
    round_, _climate, _ = fitted
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="protect_small")
    what_if_apply(draft=draft, actor=centre.chair)
    grants = Allocation.objects.count()
    with pytest.raises(AllocationError, match="a draft applies once"):
        what_if_apply(draft=draft, actor=centre.chair)
    with pytest.raises(AllocationError, match="applied already"):
        what_if_proposal_set(
            proposal=draft.proposals.first(), actor=centre.chair, proposed_su="1", reason="x"
        )
    assert Allocation.objects.count() == grants


def test_proposals_over_what_the_round_has_left_are_refused_at_apply(centre, fitted):
    round_, _climate, _genomics = fitted
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    for proposal in draft.proposals.filter(request_amount__pool=centre.cpu):
        what_if_proposal_set(
            proposal=proposal, actor=centre.chair, proposed_su=proposal.requested_su
        )
    with pytest.raises(AllocationError, match="total 1500 SU; the round has 1000 SU left"):
        what_if_apply(draft=draft, actor=centre.chair)
    assert not Allocation.objects.exists()


@pytest.mark.parametrize(
    ("value", "reason", "field"),
    [("-1", "x", "proposed_su"), ("601", "x", "proposed_su"), ("ten", "x", "proposed_su"),
     ("500", "  ", "reason")],
)  # fmt: skip
def test_a_bad_figure_is_refused_and_changes_nothing(centre, fitted, value, reason, field):
    round_, climate, _ = fitted
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    proposal = draft.proposals.get(request_amount__request=climate, request_amount__pool=centre.cpu)
    with pytest.raises(AllocationError) as refused:
        what_if_proposal_set(
            proposal=proposal, actor=centre.chair, proposed_su=value, reason=reason
        )
    assert refused.value.field == field
    proposal.refresh_from_db()
    assert proposal.proposed_su == D(400)
    assert not proposal.edited


def test_bad_parameters_are_refused_and_no_draft_is_saved(centre, fitted):
    round_, *_ = fitted
    with pytest.raises(WhatIfError) as refused:
        what_if_draft_create(
            round_=round_, actor=centre.chair, method="protect_small", threshold_su="-5"
        )
    assert refused.value.field == "threshold_su"
    assert not WhatIfDraft.objects.exists()


def test_only_the_chair_and_staff_run_a_what_if(centre, fitted):
    round_, *_ = fitted
    with pytest.raises(PermissionDenied):
        what_if_draft_create(round_=round_, actor=centre.reviewer, method="pro_rata")
    draft = what_if_draft_create(round_=round_, actor=centre.staff, method="score_weighted")
    with pytest.raises(PermissionDenied):
        what_if_apply(draft=draft, actor=centre.reviewer)
    assert WhatIfDraft.objects.count() == 1


def test_a_chair_in_conflict_leaves_their_own_projects_request_out(centre, fitted):
    round_, climate, genomics = fitted
    MembershipFactory(project=centre.p2, user=centre.chair)
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    # pawsey0002's request is not in the draft: it is fitted alone, into the whole capacity.
    assert set(_proposed(draft)) == {("pawsey0001", "testbed CPU"), ("pawsey0001", "testbed GPU")}
    assert set(_proposed(draft).values()) == {D(600), D(50)}
    # A draft staff made holds it; the chair does not see its proposals, and cannot edit them.
    staff_draft = what_if_draft_create(round_=round_, actor=centre.staff, method="pro_rata")
    assert {
        p.request_amount.request for p in what_if_proposals(draft=staff_draft, actor=centre.chair)
    } == {climate}
    theirs = staff_draft.proposals.filter(request_amount__request=genomics).first()
    assert isinstance(theirs, WhatIfProposal)
    with pytest.raises(PermissionDenied):
        what_if_proposal_set(proposal=theirs, actor=centre.chair, proposed_su="1", reason="x")


def test_a_round_with_nothing_under_review_gives_an_empty_draft_that_applies(centre, fitted):
    round_, climate, genomics = fitted
    for request in (climate, genomics):
        request_decide(
            request=request, actor=centre.chair, granted={centre.cpu: D(100)}, reason="small"
        )
    draft = what_if_draft_create(round_=round_, actor=centre.chair, method="pro_rata")
    assert not draft.proposals.exists()
    assert {total.pool.name: total.remaining_su for total in what_if_totals(draft=draft)} == {
        "testbed CPU": D(800), "testbed GPU": D(100),
    }  # fmt: skip
    what_if_apply(draft=draft, actor=centre.chair)
    draft.refresh_from_db()
    assert draft.applied_at is not None
