"""Every state change by the wrong role is refused with a clear error and changes nothing."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied

from allocations.grants.services import (
    adjustment_refund,
    adjustment_top_up,
    adjustment_transfer,
    allocation_grant,
)
from allocations.models import Adjustment, Allocation, AllocationRequest, RequestTransition, Review
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    request_update,
    review_submit,
    round_create,
)
from projects.models import Membership
from projects.services import membership_add, membership_remove
from tests.allocations.conftest import PERIOD, open_round_times
from tests.factories import UserFactory

State = AllocationRequest.State


@pytest.fixture
def round_(centre):
    opens, closes = open_round_times()
    return round_create(
        name="round", opens_at=opens, closes_at=closes, period_start=PERIOD[0],
        period_end=PERIOD[1], available={centre.cpu: Decimal(100)}, chair=centre.chair,
        committee=[centre.reviewer], actor=centre.staff,
    )  # fmt: skip


@pytest.fixture
def draft(centre, round_):
    return request_create(
        round_=round_, project=centre.p1, actor=centre.alice, amounts={centre.cpu: Decimal(10)}
    )


def _snapshot(request):
    request.refresh_from_db()
    return (
        request.state,
        request.justification,
        RequestTransition.objects.filter(request=request).count(),
        Review.objects.filter(request=request).count(),
        Allocation.objects.count(),
    )


def test_only_staff_create_rounds(centre):
    opens, closes = open_round_times()
    with pytest.raises(PermissionDenied, match="only centre staff create allocation rounds"):
        round_create(
            name="x", opens_at=opens, closes_at=closes, period_start=PERIOD[0],
            period_end=PERIOD[1], available={}, chair=centre.chair, actor=centre.alice,
        )  # fmt: skip


def test_only_the_pi_applies_for_a_project(centre, round_):
    with pytest.raises(PermissionDenied, match="only the PI of pawsey0003 applies"):
        request_create(round_=round_, project=centre.p3, actor=centre.carol)
    assert not AllocationRequest.objects.exists()


@pytest.mark.parametrize("who", ["carol", "bob", "chair", "reviewer"])
def test_nobody_but_the_pi_edits_or_submits_a_draft(centre, draft, who):
    before = _snapshot(draft)
    actor = getattr(centre, who)
    with pytest.raises(PermissionDenied, match="only the PI of pawsey0001"):
        request_update(request=draft, actor=actor, justification="mine now")
    with pytest.raises(PermissionDenied, match="only the PI of pawsey0001"):
        request_submit(request=draft, actor=actor)
    assert _snapshot(draft) == before


@pytest.mark.parametrize("who", ["alice", "reviewer", "bob"])
def test_only_the_chair_opens_review_and_decides(centre, draft, who):
    request_submit(request=draft, actor=centre.alice)
    before = _snapshot(draft)
    actor = getattr(centre, who)
    with pytest.raises(PermissionDenied, match="only the round's chair"):
        request_review_start(request=draft, actor=actor)
    request_review_start(request=draft, actor=centre.chair)
    before = _snapshot(draft)
    with pytest.raises(PermissionDenied, match="only the round's chair grants SU"):
        request_decide(request=draft, actor=actor, granted={centre.cpu: Decimal(10)})
    assert _snapshot(draft) == before


def test_only_the_committee_reviews(centre, draft):
    request_submit(request=draft, actor=centre.alice)
    request_review_start(request=draft, actor=centre.chair)
    outsider = UserFactory(username="outsider")
    with pytest.raises(PermissionDenied, match="only the round's committee reviews"):
        review_submit(request=draft, reviewer=outsider, score=4)
    assert not Review.objects.exists()


def test_a_committee_member_who_belongs_to_the_project_may_not_review_it(centre, draft):
    request_submit(request=draft, actor=centre.alice)
    request_review_start(request=draft, actor=centre.chair)
    Membership.objects.create(project=centre.p1, user=centre.reviewer)
    with pytest.raises(PermissionDenied, match="conflict of interest"):
        review_submit(request=draft, reviewer=centre.reviewer, score=5)
    assert not Review.objects.exists()


def test_a_submitted_request_cannot_be_edited_or_decided_before_review(centre, draft):
    from allocations.grants.services import AllocationError

    request_submit(request=draft, actor=centre.alice)
    before = _snapshot(draft)
    with pytest.raises(AllocationError, match="a submitted request cannot be edited"):
        request_update(request=draft, actor=centre.alice, justification="late change")
    with pytest.raises(AllocationError, match="a submitted request cannot be decided"):
        request_decide(request=draft, actor=centre.chair, granted={centre.cpu: Decimal(1)})
    assert _snapshot(draft) == before


def test_only_staff_grant_refund_and_top_up(centre):
    with pytest.raises(PermissionDenied, match="only centre staff and a round's chair grant SU"):
        allocation_grant(
            project=centre.p1, pool=centre.cpu, amount=Decimal(5), period_start=PERIOD[0],
            period_end=PERIOD[1], actor=centre.alice,
        )  # fmt: skip
    allocation_grant(
        project=centre.p1, pool=centre.cpu, amount=Decimal(5), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
    )  # fmt: skip
    day = PERIOD[0]
    with pytest.raises(PermissionDenied, match="only centre staff refund SU"):
        adjustment_refund(
            project=centre.p1,
            pool=centre.cpu,
            actor=centre.alice,
            reason="r",
            amount=Decimal(1),
            on=day,
        )
    with pytest.raises(PermissionDenied, match="only centre staff top up"):
        adjustment_top_up(
            project=centre.p1,
            pool=centre.cpu,
            actor=centre.alice,
            reason="r",
            amount=Decimal(1),
            on=day,
        )
    assert not Adjustment.objects.exists()


def test_only_staff_or_the_source_pi_transfer(centre):
    for project in (centre.p1, centre.p2):
        allocation_grant(
            project=project, pool=centre.cpu, amount=Decimal(8), period_start=PERIOD[0],
            period_end=PERIOD[1], actor=centre.staff,
        )  # fmt: skip
    with pytest.raises(PermissionDenied, match="only centre staff or the PI of pawsey0001"):
        adjustment_transfer(
            source=centre.p1, target=centre.p2, pool=centre.cpu, amount=Decimal(1),
            actor=centre.bob, reason="please", on=PERIOD[0],
        )  # fmt: skip
    assert not Adjustment.objects.exists()


def test_members_are_managed_by_the_pi_and_members_may_leave(centre):
    newcomer = UserFactory(username="dave")
    with pytest.raises(
        PermissionDenied, match="only the PI or a manager of pawsey0003 adds members"
    ):
        membership_add(project=centre.p3, user=newcomer, actor=centre.carol)
    membership_add(project=centre.p3, user=newcomer, actor=centre.alice)
    with pytest.raises(PermissionDenied, match="only the PI of pawsey0003 removes members"):
        membership_remove(project=centre.p3, user=newcomer, actor=centre.carol)
    membership_remove(project=centre.p3, user=centre.carol, actor=centre.carol)  # leaves
    assert not Membership.objects.filter(project=centre.p3, user=centre.carol).exists()
    from projects.services import ProjectError

    with pytest.raises(ProjectError, match="is the PI of pawsey0003"):
        membership_remove(project=centre.p3, user=centre.alice, actor=centre.staff)
