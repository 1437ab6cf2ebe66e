"""Ledger invariants under random sequences of charges and adjustments (hypothesis)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import transaction
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounting.models import Partition, UsageDaily
from allocations.grants.selectors import balance_get
from allocations.grants.services import (
    AllocationError,
    adjustment_refund,
    adjustment_top_up,
    adjustment_transfer,
    allocation_grant,
)
from allocations.models import Adjustment, Allocation
from tests.allocations.conftest import PERIOD
from tests.factories import usage_day_add

DAY = date(2026, 11, 22)
amounts = st.integers(min_value=1, max_value=5_000_000).map(lambda units: Decimal(units) / 1000)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("charge"), st.integers(0, 1), amounts),
        st.tuples(st.just("refund"), st.integers(0, 1), amounts),
        st.tuples(st.just("top_up"), st.integers(0, 1), amounts),
        st.tuples(st.just("transfer"), st.integers(0, 1), amounts),
    ),
    max_size=12,
)


def _charge(project, partition, amount):
    usage_day_add(project, partition, "u", DAY, service_units=amount, jobs=1)


@pytest.mark.django_db
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(grants=st.tuples(amounts, amounts), steps=operations)
def test_balances_always_equal_grants_minus_charges_plus_adjustments(centre, grants, steps):
    projects = [centre.p1, centre.p2]
    work = Partition.objects.get(cluster=centre.cluster, name="work")
    with transaction.atomic():
        for project, grant in zip(projects, grants, strict=True):
            allocation_grant(
                project=project, pool=centre.cpu, amount=grant, period_start=PERIOD[0],
                period_end=PERIOD[1], actor=centre.staff,
            )  # fmt: skip
        for kind, index, amount in steps:
            project, other = projects[index], projects[1 - index]
            before = _state(projects)
            try:
                if kind == "charge":
                    _charge(project, work, amount)
                elif kind == "refund":
                    adjustment_refund(
                        project=project,
                        pool=centre.cpu,
                        actor=centre.staff,
                        reason="r",
                        amount=amount,
                        on=DAY,
                    )
                elif kind == "top_up":
                    adjustment_top_up(
                        project=project,
                        pool=centre.cpu,
                        actor=centre.staff,
                        reason="t",
                        amount=amount,
                        on=DAY,
                    )
                else:
                    adjustment_transfer(
                        source=project,
                        target=other,
                        pool=centre.cpu,
                        amount=amount,
                        actor=centre.staff,
                        reason="x",
                        on=DAY,
                    )
            except AllocationError:
                assert _state(projects) == before  # refused: nothing changed
            _assert_invariants(centre, projects)
        transaction.set_rollback(True)


def _state(projects):
    return (Adjustment.objects.count(), UsageDaily.objects.aggregate(t=Sum("service_units"))["t"])


def _assert_invariants(centre, projects):
    for project in projects:
        balance = balance_get(project=project, pool=centre.cpu, on=DAY)
        assert balance is not None
        adjustments = Adjustment.objects.filter(
            project=project, budget_period__start__lte=DAY, budget_period__end__gt=DAY
        ).aggregate(t=Sum("amount_su"))["t"] or Decimal(0)
        used = UsageDaily.objects.filter(project=project).aggregate(t=Sum("service_units"))[
            "t"
        ] or Decimal(0)
        assert balance.remaining_su == balance.budget_su + adjustments - used
        assert balance.used_su == used
    transfers = Adjustment.objects.filter(transfer_id__isnull=False).aggregate(t=Sum("amount_su"))[
        "t"
    ]
    assert (transfers or Decimal(0)) == 0  # no transfer creates SU
    assert not Allocation.objects.filter(granted_su__lt=0).exists()
