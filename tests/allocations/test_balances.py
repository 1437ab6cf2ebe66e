"""Balances: what they read, how many queries, refunds and transfers."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from accounting.ledger.pipeline import jobs_import
from accounting.models import Job
from allocations.grants.selectors import balance_get, balances_for_project
from allocations.grants.services import (
    AllocationError,
    adjustment_refund,
    adjustment_transfer,
    allocation_grant,
)
from allocations.models import Adjustment
from tests.allocations.conftest import PERIOD, SAMPLE, SAMPLE_DAY


@pytest.fixture
def granted(centre):
    for project in (centre.p1, centre.p2):
        allocation_grant(
            project=project, pool=centre.cpu, amount=Decimal(400), period_start=PERIOD[0],
            period_end=PERIOD[1], actor=centre.staff,
        )  # fmt: skip
    with (SAMPLE / "sacct_all_duplicates.psv").open() as lines:
        jobs_import(cluster=centre.cluster, lines=lines, source="sample")
    return centre


def test_used_su_are_the_roll_ups_of_the_pools_partitions(granted):
    balance = balance_get(project=granted.p1, pool=granted.cpu, on=SAMPLE_DAY)
    jobs = Job.objects.filter(project=granted.p1, partition__name="work")
    assert balance.used_su == sum(job.service_units for job in jobs)
    assert balance.budget_su == Decimal(100)
    assert balance.used_last_7_days_su == 0  # "last 7 days" ends before today's jobs
    tomorrow = balance_get(project=granted.p1, pool=granted.cpu, on=date(2026, 11, 23))
    assert tomorrow.used_last_7_days_su == balance.used_su


def test_a_balance_reads_a_bounded_number_of_queries(granted, django_assert_max_num_queries):
    with django_assert_max_num_queries(7):
        balance_get(project=granted.p1, pool=granted.cpu, on=SAMPLE_DAY)


def test_no_grant_means_no_balance(centre):
    assert balance_get(project=centre.p1, pool=centre.gpu, on=SAMPLE_DAY) is None
    assert balances_for_project(project=centre.p1) == []


def test_a_job_is_refunded_once_and_the_balance_says_so(granted):
    job = Job.objects.filter(
        project=granted.p1, partition__name="work", service_units__gt=0
    ).first()
    before = balance_get(project=granted.p1, pool=granted.cpu, on=SAMPLE_DAY)
    adjustment_refund(
        project=granted.p1, pool=granted.cpu, job=job, actor=granted.staff, reason="node fault",
        on=SAMPLE_DAY,
    )  # fmt: skip
    after = balance_get(project=granted.p1, pool=granted.cpu, on=SAMPLE_DAY)
    assert after.remaining_su == before.remaining_su + job.service_units
    with pytest.raises(AllocationError, match="refunded already"):
        adjustment_refund(
            project=granted.p1, pool=granted.cpu, job=job, actor=granted.staff, reason="again",
            on=SAMPLE_DAY,
        )  # fmt: skip


def test_a_transfer_moves_su_without_creating_any(granted):
    source = balance_get(project=granted.p1, pool=granted.cpu, on=SAMPLE_DAY)
    out, into = adjustment_transfer(
        source=granted.p1, target=granted.p2, pool=granted.cpu, amount=Decimal("12.5"),
        actor=granted.alice, reason="shared campaign", on=SAMPLE_DAY,
    )  # fmt: skip
    assert out.amount_su + into.amount_su == 0
    assert out.transfer_id == into.transfer_id
    assert balance_get(project=granted.p1, pool=granted.cpu, on=SAMPLE_DAY).remaining_su == (
        source.remaining_su - Decimal("12.5")
    )


def test_a_transfer_of_more_than_is_left_is_refused_and_changes_nothing(granted):
    with pytest.raises(AllocationError, match="SU left on testbed CPU"):
        adjustment_transfer(
            source=granted.p1, target=granted.p2, pool=granted.cpu, amount=Decimal(1000),
            actor=granted.staff, reason="too much", on=SAMPLE_DAY,
        )  # fmt: skip
    assert not Adjustment.objects.exists()


def test_adjustments_are_append_only(granted):
    adjustment = adjustment_refund(
        project=granted.p1, pool=granted.cpu, amount=Decimal(1), actor=granted.staff,
        reason="goodwill", on=SAMPLE_DAY,
    )  # fmt: skip
    adjustment.reason = "rewritten"
    with pytest.raises(ValueError, match="append-only"):
        adjustment.save()
