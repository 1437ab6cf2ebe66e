"""Dynamic priority, Q(T) paper eq 14 as corrected by DESIGN section 4. Pure: no database."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounting.utilisation.priority import (
    PriorityCurveError,
    PriorityPolicy,
    dynamic_priority,
    priority_curve,
)

# Figure 2's shape: priority falls below K1, rises from K1, rises faster from K2.
POLICY = PriorityPolicy(
    k1=Decimal("0.4"), k2=Decimal("0.7"), c0=Decimal("0.5"), c1=Decimal(1), c2=Decimal(3)
)


def priority(k: str | int, base: int = 100, policy: PriorityPolicy = POLICY) -> Decimal:
    return dynamic_priority(base=base, k_prof=Decimal(k), policy=policy)


def test_the_priority_at_k1_is_the_base_priority():
    assert priority("0.4") == 100


def test_each_branch_of_eq_14_by_hand():
    assert priority("0.2") == 100 * (Decimal("0.5") * Decimal("-0.2") + 1)  # 90
    assert priority("0.5") == 100 * (1 * Decimal("0.1") + 1)  # 110
    assert priority("0.9") == 100 * (3 * Decimal("0.2") + 1 * Decimal("0.3") + 1)  # 190


@pytest.mark.parametrize("threshold", [POLICY.k1, POLICY.k2])
def test_the_priority_is_continuous_at_both_thresholds(threshold):
    epsilon = Decimal("1e-12")
    below = priority(threshold - epsilon)
    at = priority(threshold)
    above = priority(threshold + epsilon)
    assert abs(at - below) < Decimal("1e-9")
    assert abs(above - at) < Decimal("1e-9")


def test_k1_not_below_k2_is_refused():
    with pytest.raises(PriorityCurveError, match="K1 < K2"):
        PriorityPolicy(k1=Decimal("0.7"), k2=Decimal("0.7"), c0=1, c1=1, c2=1)
    with pytest.raises(PriorityCurveError, match="K1 < K2"):
        PriorityPolicy(k1=Decimal("0.8"), k2=Decimal("0.7"), c0=1, c1=1, c2=1)


def test_a_float_is_refused():
    with pytest.raises(PriorityCurveError, match="Decimal or an int"):
        dynamic_priority(base=1, k_prof=0.5, policy=POLICY)


def test_the_curve_for_the_chart_has_its_corners_at_the_thresholds():
    curve = priority_curve(policy=POLICY, k_min=0, k_max=1)
    assert [k for k, _ in curve] == [0, Decimal("0.4"), Decimal("0.7"), 1]
    assert [pr for _, pr in curve] == [Decimal("0.8"), 1, Decimal("1.3"), Decimal("2.2")]


def test_the_curve_can_be_sampled_evenly_as_well():
    curve = priority_curve(policy=POLICY, k_min=0, k_max=1, samples=9)
    ks = [k for k, _ in curve]
    assert len(ks) == 11  # 0, 0.1, ..., 1.0; the thresholds fall on samples
    assert ks == sorted(ks)


@given(
    k1=st.decimals(-10, 10, places=3),
    gap=st.decimals("0.001", 10, places=3),
    slopes=st.tuples(*[st.decimals("0.001", 5, places=3)] * 3),
    base=st.integers(1, 10_000),
    ks=st.lists(st.decimals(-30, 30, places=4), min_size=2, max_size=10),
)
def test_the_priority_rises_with_k_when_every_slope_is_positive(k1, gap, slopes, base, ks):
    policy = PriorityPolicy(k1=k1, k2=k1 + gap, c0=slopes[0], c1=slopes[1], c2=slopes[2])
    ordered = sorted(ks)
    values = [dynamic_priority(base=base, k_prof=k, policy=policy) for k in ordered]
    assert all(a <= b for a, b in itertools.pairwise(values))
    assert dynamic_priority(base=base, k_prof=k1, policy=policy) == base
