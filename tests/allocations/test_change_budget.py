"""The budget maths of changing a grant (pure): an extension's budget periods over the added
span, and a raise (an appeal granted) over the periods not yet over."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocations.grants.budget import SU_QUANTUM, extension_budgets, periods, raise_budgets

QUARTERS = periods(date(2026, 1, 1), date(2027, 1, 1), months=3)
micro_su = st.integers(0, 10**12).map(lambda units: Decimal(units) * SU_QUANTUM)


def test_an_extension_splits_its_su_over_the_added_span_in_the_pools_periods():
    added = extension_budgets(date(2027, 1, 1), date(2027, 8, 1), Decimal(100), months=3)
    assert added == [
        (date(2027, 1, 1), date(2027, 4, 1), Decimal("33.333334")),
        (date(2027, 4, 1), date(2027, 7, 1), Decimal("33.333333")),
        (date(2027, 7, 1), date(2027, 8, 1), Decimal("33.333333")),
    ]


def test_an_extension_must_end_after_the_grant_and_within_two_years():
    with pytest.raises(ValueError, match="must end after the grant"):
        extension_budgets(date(2027, 1, 1), date(2027, 1, 1), Decimal(1))
    with pytest.raises(ValueError, match="at most 24 months"):
        extension_budgets(date(2027, 1, 1), date(2029, 1, 2), Decimal(1))
    assert len(extension_budgets(date(2027, 1, 1), date(2029, 1, 1), Decimal(1))) == 8


def test_a_raise_goes_to_the_current_and_later_periods_only():
    shares = raise_budgets(QUARTERS, Decimal(90), on=date(2026, 5, 10))
    assert shares == [Decimal(0), Decimal(30), Decimal(30), Decimal(30)]


def test_a_raise_after_the_grant_ended_goes_to_its_last_period():
    assert raise_budgets(QUARTERS, Decimal(5), on=date(2027, 3, 1))[-1] == Decimal(5)


@given(amount=micro_su, days=st.integers(-30, 400), months=st.integers(1, 12))
def test_extensions_and_raises_add_up_to_their_su_exactly(amount, days, months):
    on = date(2026, 1, 1) + timedelta(days=days)
    assert sum(raise_budgets(QUARTERS, amount, on=on), Decimal(0)) == amount
    added = extension_budgets(date(2027, 1, 1), date(2027, 1, 1) + timedelta(days=days % 365 + 1),
                              amount, months=months)  # fmt: skip
    assert sum((share for _, _, share in added), Decimal(0)) == amount
    assert all(start < end for start, end, _ in added)
    assert added[0][0] == date(2027, 1, 1)
