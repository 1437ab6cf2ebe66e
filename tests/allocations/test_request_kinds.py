"""Every kind of allocation request: top-up, extension, renewal and appeal beside the
application. Each kind's state machine, its history, who may ask and who decides (PI, manager,
member, another PI, the chair, a conflicted reviewer, staff), and the bad input each refuses
(docs/allocations.md, "Changing an allocation")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from allocations import request_states
from allocations.access import can_appeal, can_decide, deciding_round, requests_visible
from allocations.grants.selectors import balance_get, pool_today
from allocations.grants.services import AllocationError, allocation_grant, su_amount
from allocations.models import Allocation, AllocationRequest, AllocationRound
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_review_start,
    request_submit,
    round_create,
)
from kit.calendar import add_months
from projects.models import Membership
from tests.allocations.conftest import Centre
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db
Kind = AllocationRequest.Kind
State = AllocationRequest.State


@dataclass
class Kinds:
    centre: Centre
    round: AllocationRound
    application: AllocationRequest  # pawsey0001's: 1000 CPU granted, 200 of 500 GPU
    cpu_grant: Allocation
    gpu_grant: Allocation
    manager: User  # dave, manager of pawsey0001
    member: User  # carol, member of pawsey0001
    conflicted: User  # frank, on the round's committee and a member of pawsey0001
    today: date


@pytest.fixture(name="kinds")
def kinds_fixture(centre) -> Kinds:
    today = pool_today(centre.cpu)
    start = today.replace(day=1)
    manager = UserFactory.create(username="dave")
    conflicted = UserFactory.create(username="frank")
    MembershipFactory(project=centre.p1, user=manager, role=Membership.Role.MANAGER)
    MembershipFactory(project=centre.p1, user=centre.carol)
    MembershipFactory(project=centre.p1, user=conflicted)
    now = timezone.now()
    round_ = round_create(
        name="granting round", opens_at=now - timedelta(days=1), closes_at=now + timedelta(days=9),
        period_start=start, period_end=add_months(start, 12),
        available={centre.cpu: Decimal(10_000), centre.gpu: Decimal(1000)},
        chair=centre.chair, committee=[centre.reviewer, conflicted], actor=centre.staff,
    )  # fmt: skip
    application = request_create(
        round_=round_, project=centre.p1, actor=centre.alice,
        amounts={centre.cpu: Decimal(1000), centre.gpu: Decimal(500)},
    )  # fmt: skip
    request_submit(request=application, actor=centre.alice)
    request_review_start(request=application, actor=centre.chair)
    request_decide(
        request=application, actor=centre.chair, reason="the GPU pool is oversubscribed",
        granted={centre.cpu: Decimal(1000), centre.gpu: Decimal(200)},
    )  # fmt: skip
    return Kinds(
        centre=centre, round=round_, application=application,
        cpu_grant=Allocation.objects.get(request=application, pool=centre.cpu),
        gpu_grant=Allocation.objects.get(request=application, pool=centre.gpu),
        manager=manager, member=centre.carol, conflicted=conflicted, today=today,
    )  # fmt: skip


def _history(request: AllocationRequest) -> list[str]:
    return list(request.transitions.values_list("to_state", flat=True))


# --- The state machines (pure) --------------------------------------------------------------


def test_requests_in_a_round_are_reviewed_before_they_are_decided():
    for kind in ("new", "renewal"):
        assert request_states.allowed(kind, "draft", "submitted")
        assert request_states.allowed(kind, "submitted", "under_review")
        assert not request_states.allowed(kind, "submitted", "granted")
        assert request_states.allowed(kind, "under_review", "partially_granted")
        assert request_states.decidable_from(kind) == "under_review"


def test_top_ups_extensions_and_appeals_go_from_submitted_straight_to_a_decision():
    for kind in ("top_up", "extension", "appeal"):
        assert request_states.allowed(kind, "submitted", "granted")
        assert request_states.allowed(kind, "submitted", "rejected")
        assert not request_states.allowed(kind, "submitted", "under_review")
        assert not request_states.allowed(kind, "draft", "granted")
        assert request_states.decidable_from(kind) == "submitted"


def test_a_decision_is_final_and_only_less_than_asked_may_be_appealed_once_removed():
    for kind in request_states.KINDS:
        for decided in request_states.DECIDED:
            assert request_states.TRANSITIONS[kind].get(decided) is None
    assert request_states.is_appealable("new", "partially_granted")
    assert request_states.is_appealable("top_up", "rejected")
    assert not request_states.is_appealable("new", "granted")
    assert not request_states.is_appealable("new", "under_review")
    assert not request_states.is_appealable("appeal", "rejected")


def test_an_amount_that_is_not_a_number_is_refused_with_a_message():
    with pytest.raises(AllocationError, match="must be a number, not 'lots'") as error:
        su_amount("lots", "SU requested", field="amounts")
    assert error.value.field == "amounts"


# --- Top-up ---------------------------------------------------------------------------------


def test_a_top_up_goes_to_the_chair_of_the_round_behind_the_grant_and_adds_su_now(kinds):
    centre = kinds.centre
    before = balance_get(project=centre.p1, pool=centre.cpu)
    top_up = request_create(
        project=centre.p1, actor=kinds.manager, kind=Kind.TOP_UP,
        amounts={centre.cpu: Decimal(300)}, justification="a deadline",
    )  # fmt: skip
    assert top_up.round is None
    assert top_up.grant == kinds.cpu_grant
    assert deciding_round(top_up) == kinds.round
    assert top_up not in requests_visible(user=centre.chair)  # a draft stays with its project
    request_submit(request=top_up, actor=centre.alice)
    assert top_up in requests_visible(user=centre.chair)
    assert top_up not in requests_visible(user=centre.reviewer)  # the chair's alone
    with pytest.raises(AllocationError, match="decided without the committee's review"):
        request_review_start(request=top_up, actor=centre.chair)
    request_decide(request=top_up, actor=centre.chair, granted={centre.cpu: Decimal(300)})
    after = balance_get(project=centre.p1, pool=centre.cpu)
    assert before is not None
    assert after is not None
    assert after.available_su == before.available_su + 300
    top_up.refresh_from_db()
    assert top_up.state == State.GRANTED
    assert _history(top_up) == ["draft", "submitted", "granted"]


def test_who_may_ask_for_a_top_up_and_who_decides_it(kinds):
    centre = kinds.centre
    for outsider in (kinds.member, centre.bob, centre.chair, kinds.conflicted):
        with pytest.raises(PermissionDenied, match="only the PI of pawsey0001"):
            request_create(
                project=centre.p1, actor=outsider, kind=Kind.TOP_UP,
                amounts={centre.cpu: Decimal(1)},
            )  # fmt: skip
    top_up = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.TOP_UP, amounts={centre.cpu: Decimal(5)}
    )
    request_submit(request=top_up, actor=centre.alice)
    assert [can_decide(user, top_up) for user in (centre.chair, centre.staff)] == [True, True]
    for refused in (kinds.conflicted, centre.reviewer, centre.alice, kinds.manager, centre.bob):
        assert not can_decide(refused, top_up)
        with pytest.raises(PermissionDenied):
            request_decide(request=top_up, actor=refused, granted={centre.cpu: Decimal(5)})
    top_up.refresh_from_db()
    assert top_up.state == State.SUBMITTED  # a refusal changes nothing
    request_decide(request=top_up, actor=centre.staff, granted={centre.cpu: Decimal(5)})


def test_a_top_up_needs_a_grant_in_force_on_its_pool(centre):
    with pytest.raises(AllocationError, match="holds no grant in force on testbed CPU") as error:
        request_create(
            project=centre.p2, actor=centre.bob, kind=Kind.TOP_UP,
            amounts={centre.cpu: Decimal(10)},
        )  # fmt: skip
    assert error.value.field == "amounts"
    assert not AllocationRequest.objects.filter(project=centre.p2).exists()


def test_a_top_up_names_one_pool_and_no_round(kinds):
    centre = kinds.centre
    with pytest.raises(AllocationError, match="names one pool"):
        request_create(
            project=centre.p1, actor=centre.alice, kind=Kind.TOP_UP,
            amounts={centre.cpu: Decimal(1), centre.gpu: Decimal(1)},
        )  # fmt: skip
    with pytest.raises(AllocationError, match="is not made in a round"):
        request_create(
            project=centre.p1, actor=centre.alice, kind=Kind.TOP_UP, round_=kinds.round,
            amounts={centre.cpu: Decimal(1)},
        )  # fmt: skip


def test_a_top_up_of_a_grant_staff_made_outside_rounds_is_decided_by_staff(centre):
    today = pool_today(centre.cpu)
    allocation_grant(
        project=centre.p2, pool=centre.cpu, amount=Decimal(100), period_start=today,
        period_end=today + timedelta(days=90), actor=centre.staff,
    )  # fmt: skip
    top_up = request_create(
        project=centre.p2, actor=centre.bob, kind=Kind.TOP_UP, amounts={centre.cpu: Decimal(5)}
    )
    request_submit(request=top_up, actor=centre.bob)
    assert deciding_round(top_up) is None
    assert not can_decide(centre.chair, top_up)
    request_decide(
        request=top_up, actor=centre.staff, granted={centre.cpu: Decimal(0)}, reason="no"
    )
    top_up.refresh_from_db()
    assert top_up.state == State.REJECTED


# --- Extension ------------------------------------------------------------------------------


def test_an_extension_moves_the_grants_end_and_adds_budget_periods_with_its_su(kinds):
    centre = kinds.centre
    old_end = kinds.cpu_grant.period_end
    new_end = add_months(old_end, 6)
    extension = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.EXTENSION, new_end=new_end,
        amounts={centre.cpu: Decimal(600)},
    )  # fmt: skip
    request_submit(request=extension, actor=centre.alice)
    request_decide(
        request=extension, actor=centre.chair, granted={centre.cpu: Decimal(400)},
        reason="two thirds of the rate asked",
    )  # fmt: skip
    grant = Allocation.objects.get(pk=kinds.cpu_grant.pk)
    assert grant.period_end == new_end
    assert grant.granted_su == Decimal(1400)
    added = list(grant.budget_periods.filter(start__gte=old_end).order_by("start"))
    assert [(p.start, p.end) for p in added] == [
        (old_end, add_months(old_end, 3)),
        (add_months(old_end, 3), new_end),
    ]
    assert [p.budget_su for p in added] == [Decimal(200), Decimal(200)]
    assert sum(p.budget_su for p in grant.budget_periods.all()) == grant.granted_su
    in_the_added_span = balance_get(project=centre.p1, pool=centre.cpu, on=old_end)
    assert in_the_added_span is not None
    assert in_the_added_span.budget_su == Decimal(200)
    extension.refresh_from_db()
    assert extension.state == State.PARTIALLY_GRANTED
    assert _history(extension) == ["draft", "submitted", "partially_granted"]


def test_an_extension_must_end_after_the_grant(kinds):
    centre = kinds.centre
    for wrong in (kinds.cpu_grant.period_end, kinds.cpu_grant.period_end - timedelta(days=30)):
        with pytest.raises(AllocationError, match="must be after the grant's end") as error:
            request_create(
                project=centre.p1, actor=centre.alice, kind=Kind.EXTENSION, new_end=wrong,
                amounts={centre.cpu: Decimal(10)},
            )  # fmt: skip
        assert error.value.field == "new_end"
    with pytest.raises(AllocationError, match="names its new end"):
        request_create(
            project=centre.p1, actor=centre.alice, kind=Kind.EXTENSION,
            amounts={centre.cpu: Decimal(10)},
        )  # fmt: skip


def test_an_extension_never_runs_into_the_next_grant_nor_past_two_years(kinds):
    centre = kinds.centre
    end = kinds.cpu_grant.period_end
    extension = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.EXTENSION,
        new_end=add_months(end, 3), amounts={centre.cpu: Decimal(10)},
    )  # fmt: skip
    request_submit(request=extension, actor=centre.alice)
    allocation_grant(
        project=centre.p1, pool=centre.cpu, amount=Decimal(50), period_start=end,
        period_end=add_months(end, 12), actor=centre.staff,
    )  # fmt: skip
    with pytest.raises(AllocationError, match="holds another grant on testbed CPU"):
        request_decide(request=extension, actor=centre.chair, granted={centre.cpu: Decimal(10)})
    assert Allocation.objects.get(pk=kinds.cpu_grant.pk).period_end == end
    with pytest.raises(AllocationError, match="adds at most 24 months") as error:
        request_create(
            project=centre.p1, actor=centre.alice, kind=Kind.EXTENSION,
            new_end=date(9999, 12, 31), amounts={centre.gpu: Decimal(10)},
        )  # fmt: skip
    assert error.value.field == "new_end"


# --- Renewal --------------------------------------------------------------------------------


def test_a_renewal_without_a_next_round_is_refused_with_what_to_do(kinds):
    with pytest.raises(AllocationError, match="no open round covers the period after") as error:
        request_create(project=kinds.centre.p1, actor=kinds.centre.alice, kind=Kind.RENEWAL)
    assert error.value.field == "round"
    with pytest.raises(AllocationError, match="no grant in force to renew"):
        request_create(project=kinds.centre.p2, actor=kinds.centre.bob, kind=Kind.RENEWAL)


def test_a_renewal_goes_into_the_next_round_prefilled_from_the_grants_in_force(kinds):
    centre = kinds.centre
    end = kinds.cpu_grant.period_end
    now = timezone.now()
    next_round = round_create(
        name="next year", opens_at=now - timedelta(hours=1), closes_at=now + timedelta(days=30),
        period_start=end, period_end=add_months(end, 12),
        available={centre.cpu: Decimal(5000), centre.gpu: Decimal(5000)},
        chair=centre.reviewer, actor=centre.staff,
    )  # fmt: skip
    renewal = request_create(project=centre.p1, actor=centre.alice, kind=Kind.RENEWAL)
    assert renewal.round == next_round
    asked = {amount.pool: amount.requested_su for amount in renewal.amounts.all()}
    assert asked == {centre.cpu: Decimal(1000), centre.gpu: Decimal(200)}
    with pytest.raises(AllocationError, match="already has an application in next year"):
        request_create(
            project=centre.p1, actor=centre.alice, round_=next_round,
            amounts={centre.cpu: Decimal(1)},
        )  # fmt: skip
    request_submit(request=renewal, actor=centre.alice)
    with pytest.raises(AllocationError, match="cannot be decided"):
        request_decide(request=renewal, actor=centre.reviewer, granted={})
    request_review_start(request=renewal, actor=centre.reviewer)
    request_decide(
        request=renewal, actor=centre.reviewer,
        granted={centre.cpu: Decimal(1000), centre.gpu: Decimal(200)},
    )  # fmt: skip
    grant = Allocation.objects.get(request=renewal, pool=centre.cpu)
    assert (grant.period_start, grant.period_end) == (end, add_months(end, 12))
    assert _history(renewal) == ["draft", "submitted", "under_review", "granted"]


# --- Appeal ---------------------------------------------------------------------------------


def test_an_appeal_goes_to_the_chair_once_and_raises_the_grant(kinds):
    centre = kinds.centre
    assert can_appeal(centre.alice, kinds.application)
    assert can_appeal(kinds.manager, kinds.application)
    assert not can_appeal(kinds.member, kinds.application)
    appeal = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.APPEAL, appeal_of=kinds.application,
        justification="the GPU runs are the paper's core",
    )  # fmt: skip
    # The draft asks for what was not granted.
    assert {a.pool: a.requested_su for a in appeal.amounts.all()} == {centre.gpu: Decimal(300)}
    assert deciding_round(appeal) == kinds.round
    assert not can_appeal(centre.alice, kinds.application)  # once per decision
    request_submit(request=appeal, actor=centre.alice)
    assert not can_decide(kinds.conflicted, appeal)
    periods = list(kinds.gpu_grant.budget_periods.order_by("start"))
    request_decide(
        request=appeal, actor=centre.chair, granted={centre.gpu: Decimal(100)},
        reason="a third of the shortfall",
    )  # fmt: skip
    grant = Allocation.objects.get(pk=kinds.gpu_grant.pk)
    assert grant.granted_su == Decimal(300)
    after = list(grant.budget_periods.order_by("start"))
    assert sum(p.budget_su for p in after) == Decimal(300)
    # The raise goes to the periods not over yet: the current one and those to come.
    raised = [new.budget_su - old.budget_su for old, new in zip(periods, after, strict=True)]
    assert all(share > 0 for share in raised)  # the grant started this month: all to come
    assert kinds.application.amounts.get(pool=centre.gpu).granted_su == Decimal(300)
    appeal.refresh_from_db()
    assert appeal.state == State.PARTIALLY_GRANTED
    assert _history(appeal) == ["draft", "submitted", "partially_granted"]


def test_a_second_appeal_of_one_decision_is_refused_and_the_database_says_so_too(kinds):
    centre = kinds.centre
    request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.APPEAL, appeal_of=kinds.application
    )
    with pytest.raises(AllocationError, match="appealed already: once per decision") as error:
        request_create(
            project=centre.p1, actor=kinds.manager, kind=Kind.APPEAL, appeal_of=kinds.application
        )
    assert error.value.field == "appeal_of"
    with pytest.raises(IntegrityError), transaction.atomic():
        AllocationRequest.objects.create(
            project=centre.p1, kind=Kind.APPEAL, appeal_of=kinds.application,
            created_by=centre.alice,
        )  # fmt: skip


def test_only_a_decision_that_gave_less_than_asked_may_be_appealed(kinds):
    centre = kinds.centre
    top_up = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.TOP_UP, amounts={centre.cpu: Decimal(5)}
    )
    with pytest.raises(AllocationError, match="is draft") as error:
        request_create(project=centre.p1, actor=centre.alice, kind=Kind.APPEAL, appeal_of=top_up)
    assert error.value.field == "appeal_of"
    request_submit(request=top_up, actor=centre.alice)
    request_decide(request=top_up, actor=centre.chair, granted={centre.cpu: Decimal(5)})
    top_up.refresh_from_db()
    with pytest.raises(AllocationError, match="is granted"):
        request_create(project=centre.p1, actor=centre.alice, kind=Kind.APPEAL, appeal_of=top_up)
    for outsider in (centre.bob, kinds.member, centre.chair):
        with pytest.raises(PermissionDenied):
            request_create(
                project=centre.p1, actor=outsider, kind=Kind.APPEAL, appeal_of=kinds.application
            )


def test_an_appeal_of_a_rejected_top_up_is_granted_as_a_top_up(kinds):
    centre = kinds.centre
    before = balance_get(project=centre.p1, pool=centre.cpu)
    top_up = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.TOP_UP, amounts={centre.cpu: Decimal(50)}
    )
    request_submit(request=top_up, actor=centre.alice)
    request_decide(request=top_up, actor=centre.chair, granted={}, reason="not now")
    appeal = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.APPEAL, appeal_of=top_up
    )
    request_submit(request=appeal, actor=centre.alice)
    request_decide(request=appeal, actor=centre.chair, granted={centre.cpu: Decimal(50)})
    with pytest.raises(AllocationError, match="an appeal's decision is final"):
        request_create(project=centre.p1, actor=centre.alice, kind=Kind.APPEAL, appeal_of=appeal)
    after = balance_get(project=centre.p1, pool=centre.cpu)
    assert before is not None
    assert after is not None
    assert after.adjustments_su == before.adjustments_su + 50


def test_a_submitted_top_up_is_mailed_to_the_chair_who_decides_it(
    kinds, django_capture_on_commit_callbacks, mailoutbox
):
    centre = kinds.centre
    top_up = request_create(
        project=centre.p1, actor=centre.alice, kind=Kind.TOP_UP, amounts={centre.cpu: Decimal(5)}
    )
    mailoutbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        request_submit(request=top_up, actor=centre.alice)
    assert [message.to for message in mailoutbox] == [[centre.chair.email]]
    assert "pawsey0001's top-up request" in mailoutbox[0].subject
    assert "waits for you to decide it" in mailoutbox[0].body
