"""Budget arithmetic: periods, exact splits, the balance identity."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocations.grants.budget import Balance, exhaustion_shift, periods, split_even
from kit.calendar import add_months

MICRO = Decimal("0.000001")


def test_a_year_splits_into_four_calendar_quarters():
    assert periods(date(2027, 1, 1), date(2028, 1, 1)) == [
        (date(2027, 1, 1), date(2027, 4, 1)), (date(2027, 4, 1), date(2027, 7, 1)),
        (date(2027, 7, 1), date(2027, 10, 1)), (date(2027, 10, 1), date(2028, 1, 1)),
    ]  # fmt: skip


def test_a_period_that_is_not_whole_quarters_ends_with_a_short_one():
    assert periods(date(2027, 1, 1), date(2027, 5, 15))[-1] == (date(2027, 4, 1), date(2027, 5, 15))


def test_month_arithmetic_clamps_to_the_end_of_the_month():
    assert add_months(date(2027, 1, 31), 1) == date(2027, 2, 28)
    assert add_months(date(2028, 1, 31), 1) == date(2028, 2, 29)


def test_an_empty_period_is_refused():
    with pytest.raises(ValueError, match="must not be empty"):
        periods(date(2027, 1, 1), date(2027, 1, 1))


@given(
    total=st.integers(min_value=0, max_value=10**15).map(lambda units: Decimal(units) * MICRO),
    parts=st.integers(min_value=1, max_value=60),
)
def test_an_even_split_adds_up_exactly_and_differs_by_at_most_a_micro_su(total, parts):
    shares = split_even(total, parts)
    assert sum(shares) == total
    assert max(shares) - min(shares) <= MICRO


def _balance(**overrides):
    values = {
        "start": date(2027, 1, 1), "end": date(2027, 4, 1), "budget_su": Decimal(1000),
        "carried_in_su": Decimal(0), "adjustments_su": Decimal(0), "used_su": Decimal(0),
        "pending_su": Decimal(0), "used_last_7_days_su": Decimal(0),
        "used_last_30_days_su": Decimal(0), "on": date(2027, 2, 1),
    }  # fmt: skip
    values.update(overrides)
    return Balance(**values)


def test_projected_exhaustion_follows_the_burn_rate():
    balance = _balance(used_su=Decimal(400), used_last_30_days_su=Decimal(600))
    assert balance.remaining_su == Decimal(600)
    assert balance.burn_rate_30_days == Decimal(20)
    assert balance.projected_exhaustion == date(2027, 2, 1) + timedelta(days=30)
    assert balance.percent_used == Decimal("40.00")


def test_no_exhaustion_is_projected_without_use_or_after_the_period():
    assert _balance().projected_exhaustion is None
    slow = _balance(used_su=Decimal(1), used_last_30_days_su=Decimal(3))
    assert slow.projected_exhaustion is None  # 999 SU at 0.1 SU/day outlast the quarter


def test_an_exhausted_balance_is_exhausted_today():
    assert _balance(used_su=Decimal(1200)).projected_exhaustion == date(2027, 2, 1)


@given(
    budget=st.decimals(min_value=0, max_value=10**9, places=6),
    used=st.decimals(min_value=0, max_value=10**9, places=6),
    adjustments=st.lists(st.decimals(min_value=-(10**6), max_value=10**6, places=6), max_size=20),
)
def test_the_balance_identity_holds_exactly(budget, used, adjustments):
    balance = _balance(budget_su=budget, used_su=used, adjustments_su=sum(adjustments, Decimal(0)))
    assert balance.remaining_su == budget - used + sum(adjustments, Decimal(0))


def test_a_doubled_price_brings_exhaustion_forward_by_a_worked_number_of_days():
    """1,000 SU left on 1 Feb 2027, 300 SU used in the last 30 days (10 SU a day): the period
    runs out in 100 days, on 12 May. Jobs that cost twice as much burn 20 SU a day: it runs out
    in 50 days, on 23 March, 50 days earlier."""
    balance = _balance(
        budget_su=Decimal(1300), used_su=Decimal(300), used_last_30_days_su=Decimal(300),
        end=date(2027, 7, 1),
    )  # fmt: skip
    shift = exhaustion_shift(balance, ratio=Decimal(2))
    assert shift.current == date(2027, 5, 12)
    assert shift.draft_burn_rate == Decimal(20)
    assert shift.draft == date(2027, 3, 23)
    assert shift.days_earlier == 50


def test_exhaustion_moved_inside_the_period_counts_from_when_it_would_have_run_out():
    """At 10 SU a day the period would outlast its end (30 April); at 20 SU a day it runs out
    on 23 March: 50 days before the 12 May it would have run out on."""
    balance = _balance(
        budget_su=Decimal(1300), used_su=Decimal(300), used_last_30_days_su=Decimal(300),
        end=date(2027, 5, 1),
    )  # fmt: skip
    shift = exhaustion_shift(balance, ratio=Decimal(2))
    assert shift.current is None
    assert (shift.draft, shift.days_earlier) == (date(2027, 3, 23), 50)


def test_a_cheaper_rate_or_no_use_brings_nothing_forward():
    used = _balance(
        budget_su=Decimal(1300), used_su=Decimal(300), used_last_30_days_su=Decimal(300)
    )
    assert exhaustion_shift(used, ratio=Decimal("0.5")).days_earlier == 0
    idle = _balance()
    assert exhaustion_shift(idle, ratio=Decimal(3)).days_earlier == 0
