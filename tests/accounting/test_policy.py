"""The ledger's charging policy (accounting/ledger/policy.py): what a job's line books."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounting.ledger.policy import Booking, Outcome, booking_for, booking_never_ran

SU = Decimal("12.345678")


def test_a_finished_job_is_charged_its_service_units() -> None:
    booking = booking_for(finished=True, state="COMPLETED", service_units=SU,
                          refund_node_failures=True)  # fmt: skip
    assert booking == Booking(Outcome.CHARGED, SU, Decimal(0))


def test_a_running_job_shows_its_charge_as_pending() -> None:
    booking = booking_for(finished=False, state="RUNNING", service_units=SU,
                          refund_node_failures=True)  # fmt: skip
    assert booking == Booking(Outcome.PENDING, Decimal(0), SU)


@pytest.mark.parametrize(
    ("refund", "expected"), [(True, Outcome.REFUNDED), (False, Outcome.CHARGED)]
)
def test_a_node_failure_is_refunded_only_where_the_cluster_says_so(refund, expected) -> None:
    booking = booking_for(finished=True, state="NODE_FAIL", service_units=SU,
                          refund_node_failures=refund)  # fmt: skip
    assert booking.outcome == expected
    assert booking.service_units == (Decimal(0) if refund else SU)
    assert booking.pending_service_units == 0


@pytest.mark.parametrize(
    ("finished", "expected"), [(True, Outcome.CHARGED), (False, Outcome.PENDING)]
)
def test_a_job_that_never_ran_books_nothing(finished, expected) -> None:
    assert booking_never_ran(finished=finished) == Booking(expected, Decimal(0), Decimal(0))


def test_outcomes_are_the_ledger_charge_states() -> None:
    from accounting.models import Job

    assert {outcome.value for outcome in Outcome} == set(Job.ChargeState.values)
