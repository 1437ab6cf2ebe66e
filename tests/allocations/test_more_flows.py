"""Top-up requests, carry-over, custom splits and the staff enforcement page."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from accounting.ledger.pipeline import jobs_import
from allocations.grants.selectors import balance_get, pool_today
from allocations.grants.services import AllocationError, allocation_grant
from allocations.models import AllocationRequest, EnforcementAction
from allocations.rounds.services import (
    request_create,
    request_decide,
    request_submit,
    round_create,
)
from allocations.slurm.enforcement import thresholds_check
from kit.calendar import add_months
from tests.allocations.conftest import PERIOD, SAMPLE, SAMPLE_DAY, open_round_times


def _round(centre):
    opens, closes = open_round_times()
    return round_create(
        name="r", opens_at=opens, closes_at=closes, period_start=PERIOD[0], period_end=PERIOD[1],
        available={centre.cpu: Decimal(1000)}, chair=centre.chair, actor=centre.staff,
    )  # fmt: skip


def test_a_top_up_outside_rounds_is_decided_by_staff_and_adds_to_the_current_budget_period(
    centre,
):
    _round(centre)
    today = pool_today(centre.cpu)
    allocation_grant(
        project=centre.p1, pool=centre.cpu, amount=Decimal(40), period_start=today.replace(day=1),
        period_end=add_months(today.replace(day=1), 12), actor=centre.staff,
    )  # fmt: skip
    top_up = request_create(
        project=centre.p1, actor=centre.alice,
        kind=AllocationRequest.Kind.TOP_UP, amounts={centre.cpu: Decimal(5)},
    )  # fmt: skip
    request_submit(request=top_up, actor=centre.alice)
    # Staff granted the grant outside a round: no chair stands behind it, staff decide.
    with pytest.raises(PermissionDenied):
        request_decide(request=top_up, actor=centre.chair, granted={centre.cpu: Decimal(5)})
    request_decide(request=top_up, actor=centre.staff, granted={centre.cpu: Decimal(5)})
    balance = balance_get(project=centre.p1, pool=centre.cpu, on=today)
    assert balance.adjustments_su == Decimal(5)
    assert balance.available_su == Decimal(15)
    top_up.refresh_from_db()
    assert top_up.state == AllocationRequest.State.GRANTED


def test_unused_su_carry_over_only_when_the_pool_says_so(centre):
    allocation_grant(
        project=centre.p1, pool=centre.cpu, amount=Decimal(400), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
    )  # fmt: skip
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    first = balance_get(project=centre.p1, pool=centre.cpu, on=SAMPLE_DAY)
    second_quarter = date(2027, 2, 1)
    assert balance_get(project=centre.p1, pool=centre.cpu, on=second_quarter).carried_in_su == 0
    centre.cpu.carry_over = True
    centre.cpu.save()
    carried = balance_get(project=centre.p1, pool=centre.cpu, on=second_quarter)
    assert carried.carried_in_su == first.remaining_su
    assert carried.available_su == Decimal(100) + first.remaining_su


def test_a_custom_split_must_add_up_to_the_grant(centre):
    with pytest.raises(AllocationError, match="must add up to the grant"):
        allocation_grant(
            project=centre.p1, pool=centre.cpu, amount=Decimal(100), period_start=PERIOD[0],
            period_end=PERIOD[1], actor=centre.staff,
            custom_budgets=[Decimal(10), Decimal(20), Decimal(30), Decimal(30)],
        )  # fmt: skip
    allocation = allocation_grant(
        project=centre.p1, pool=centre.cpu, amount=Decimal(100), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
        custom_budgets=[Decimal(10), Decimal(20), Decimal(30), Decimal(40)],
    )  # fmt: skip
    assert [p.budget_su for p in allocation.budget_periods.order_by("start")] == [10, 20, 30, 40]


@pytest.fixture
def proposed(centre):
    allocation_grant(
        project=centre.p2, pool=centre.cpu, amount=Decimal("0.004"), period_start=PERIOD[0],
        period_end=PERIOD[1], actor=centre.staff,
    )  # fmt: skip
    with (SAMPLE / "sacct_allocations.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    thresholds_check(on=SAMPLE_DAY)
    return EnforcementAction.objects.get()


def test_the_enforcement_page_is_for_staff_only(client, centre, proposed):
    url = reverse("allocations:enforcement-list")
    assert client.get(url).status_code == 302
    client.force_login(centre.bob)
    assert client.get(url).status_code == 404
    assert (
        client.post(reverse("allocations:enforcement-decide", args=[proposed.pk])).status_code
        == 404
    )
    client.force_login(centre.staff)
    page = client.get(url).content.decode()
    assert "sacctmgr -i modify account name=pawsey0002 set qos=lowpriority" in page


def test_staff_dismiss_an_action_and_cannot_run_it_where_enforcement_is_off(
    client, centre, proposed
):
    client.force_login(centre.staff)
    decide = reverse("allocations:enforcement-decide", args=[proposed.pk])
    response = client.post(decide, {"decision": "run"}, follow=True)
    assert "Enforcement is not enabled on slurm-testbed" in response.content.decode()
    proposed.refresh_from_db()
    assert proposed.status == EnforcementAction.Status.PROPOSED
    client.post(decide, {"decision": "dismiss"})
    proposed.refresh_from_db()
    assert proposed.status == EnforcementAction.Status.DISMISSED
