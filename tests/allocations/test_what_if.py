"""The what-if's maths (allocations/rounds/what_if.py): worked examples, and properties over
random rounds (capacities of zero, requests of zero SU, random scores and parameters)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocations.rounds.what_if import (
    METHODS,
    PRO_RATA,
    PROTECT_SMALL,
    SCORE_WEIGHTED,
    Ask,
    Parameters,
    WhatIfError,
    parameters_check,
    score_weight,
    what_if,
)

D = Decimal


def _proposed(result: object) -> dict[tuple[int, str], Decimal]:
    return {(p.request_id, p.pool): p.proposed_su for p in result.proposals}  # type: ignore[attr-defined]


# --- Worked examples -----------------------------------------------------------------------


def test_pro_rata_cuts_every_request_by_one_factor() -> None:
    asks = [Ask(1, "cpu", D(600)), Ask(2, "cpu", D(300)), Ask(3, "cpu", D(100))]
    result = what_if(capacity={"cpu": D(800)}, asks=asks, parameters=Parameters(PRO_RATA))
    assert _proposed(result) == {(1, "cpu"): D(480), (2, "cpu"): D(240), (3, "cpu"): D(80)}
    (fit,) = result.pools
    assert fit.factor == D("0.8")
    assert fit.proposed_su == D(800)
    assert fit.unallocated_su == 0


def test_rounding_down_leaves_a_residue_unallocated() -> None:
    asks = [Ask(n, "cpu", D(1)) for n in range(3)]
    result = what_if(capacity={"cpu": D(1)}, asks=asks, parameters=Parameters(PRO_RATA))
    assert set(_proposed(result).values()) == {D("0.333333")}
    (fit,) = result.pools
    assert fit.proposed_su == D("0.999999")
    assert fit.unallocated_su == D("0.000001")
    assert fit.factor == D("0.333333")


def test_protect_small_grants_small_requests_in_full_and_cuts_the_rest() -> None:
    asks = [Ask(1, "cpu", D(50)), Ask(2, "cpu", D(1000)), Ask(3, "cpu", D(500))]
    parameters = parameters_check(method=PROTECT_SMALL, threshold_su=D(100))
    result = what_if(capacity={"cpu": D(800)}, asks=asks, parameters=parameters)
    # 50 in full; 750 left for 1500 asked: each large request halved.
    assert _proposed(result) == {(1, "cpu"): D(50), (2, "cpu"): D(500), (3, "cpu"): D(250)}
    assert result.pools[0].factor == D("0.5")
    assert result.pools[0].notes == ()


def test_protect_small_cuts_the_small_ones_too_when_they_alone_exceed_capacity() -> None:
    asks = [Ask(1, "cpu", D(60)), Ask(2, "cpu", D(40)), Ask(3, "cpu", D(1000))]
    parameters = parameters_check(method=PROTECT_SMALL, threshold_su=D(100))
    result = what_if(capacity={"cpu": D(50)}, asks=asks, parameters=parameters)
    assert _proposed(result) == {(1, "cpu"): D(30), (2, "cpu"): D(20), (3, "cpu"): D(0)}
    assert "small requests alone exceed" in result.pools[0].notes[0]


def test_score_weighted_water_fills_what_the_capped_requests_leave() -> None:
    # k = 1: g(5) = 1, g(1) = 0.2. Capacity 600 of 1000 asked: lambda with both open would be
    # 600 / (500 * 1 + 500 * 0.2) = 1, so the scored-5 request is whole and the other gets
    # the 100 left, lambda = 100 / 100 = 1 on its weight 0.2: 0.2 of its request.
    asks = [Ask(1, "cpu", D(500), D(5)), Ask(2, "cpu", D(500), D(1))]
    parameters = parameters_check(method=SCORE_WEIGHTED, exponent=D(1))
    result = what_if(capacity={"cpu": D(600)}, asks=asks, parameters=parameters)
    assert _proposed(result) == {(1, "cpu"): D(500), (2, "cpu"): D(100)}


def test_score_weighted_shares_proportionally_to_request_times_weight() -> None:
    # g(4) = 0.8, g(2) = 0.4; lambda = 300 / (500 * 0.8 + 500 * 0.4) = 0.5.
    asks = [Ask(1, "cpu", D(500), D(4)), Ask(2, "cpu", D(500), D(2))]
    parameters = parameters_check(method=SCORE_WEIGHTED, exponent=D(1))
    result = what_if(capacity={"cpu": D(300)}, asks=asks, parameters=parameters)
    assert _proposed(result) == {(1, "cpu"): D(200), (2, "cpu"): D(100)}
    assert result.pools[0].factor == D("0.5")


def test_a_request_nobody_scored_counts_as_a_neutral_three() -> None:
    assert score_weight(None, D(2)) == score_weight(D(3), D(2)) == D("0.36")
    asks = [Ask(1, "cpu", D(100), None), Ask(2, "cpu", D(100), D(3))]
    parameters = parameters_check(method=SCORE_WEIGHTED, exponent=D(2))
    result = what_if(capacity={"cpu": D(100)}, asks=asks, parameters=parameters)
    assert _proposed(result) == {(1, "cpu"): D(50), (2, "cpu"): D(50)}


def test_a_floor_is_granted_first_and_the_method_shares_the_rest() -> None:
    asks = [Ask(1, "cpu", D(1000)), Ask(2, "cpu", D(100)), Ask(3, "cpu", D(20))]
    parameters = parameters_check(method=PRO_RATA, floor_su=D(50))
    # Floors 50 + 50 + 20 = 120; 480 left for the rests 950 + 50 + 0 = 1000: factor 0.48.
    result = what_if(capacity={"cpu": D(600)}, asks=asks, parameters=parameters)
    assert _proposed(result) == {(1, "cpu"): D(506), (2, "cpu"): D(74), (3, "cpu"): D(20)}
    assert result.pools[0].factor == D("0.48")


def test_floors_that_alone_exceed_capacity_are_scaled_pro_rata() -> None:
    asks = [Ask(1, "cpu", D(1000)), Ask(2, "cpu", D(30))]
    parameters = parameters_check(method=SCORE_WEIGHTED, floor_su=D(100))
    result = what_if(capacity={"cpu": D(65)}, asks=asks, parameters=parameters)
    assert _proposed(result) == {(1, "cpu"): D(50), (2, "cpu"): D(15)}
    assert "floors alone" in result.pools[0].notes[0]


def test_each_pool_is_fitted_on_its_own_and_a_pool_not_offered_has_nothing() -> None:
    asks = [Ask(1, "cpu", D(100)), Ask(1, "gpu", D(10)), Ask(2, "gpu", D(30)), Ask(2, "tape", D(5))]
    result = what_if(
        capacity={"cpu": D(1000), "gpu": D(20)}, asks=asks, parameters=Parameters(PRO_RATA)
    )
    assert _proposed(result) == {
        (1, "cpu"): D(100), (1, "gpu"): D(5), (2, "gpu"): D(15), (2, "tape"): D(0),
    }  # fmt: skip
    assert {fit.pool: fit.capacity_su for fit in result.pools} == {
        "cpu": D(1000), "gpu": D(20), "tape": D(0),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"method": "lottery"}, "method"),
        ({"method": PROTECT_SMALL, "threshold_su": D(-1)}, "threshold_su"),
        ({"method": PRO_RATA, "floor_su": D("-0.5")}, "floor_su"),
        ({"method": SCORE_WEIGHTED, "exponent": D(-2)}, "exponent"),
        ({"method": SCORE_WEIGHTED, "exponent": D(11)}, "exponent"),
        ({"method": PRO_RATA, "floor_su": "ten"}, "floor_su"),
        ({"method": PRO_RATA, "floor_su": D("NaN")}, "floor_su"),
    ],
)
def test_bad_parameters_are_refused_with_the_field_named(
    arguments: dict[str, object], field: str
) -> None:
    with pytest.raises(WhatIfError) as refused:
        parameters_check(**arguments)  # type: ignore[arg-type]
    assert refused.value.field == field
    assert str(refused.value)


# --- Properties over random rounds ---------------------------------------------------------

POOLS = ("cpu", "gpu", "mem")
su = st.decimals(min_value=0, max_value=10**9, places=6, allow_nan=False, allow_infinity=False)
small_su = st.decimals(min_value=0, max_value=1000, places=6)
capacity_su = st.one_of(st.just(D(0)), su, small_su)
score = st.one_of(st.none(), st.decimals(min_value=1, max_value=5, places=2))


@st.composite
def rounds(draw: st.DrawFn) -> tuple[dict[str, Decimal], list[Ask[str]], Parameters]:
    capacity = {pool: draw(capacity_su) for pool in POOLS}
    count = draw(st.integers(min_value=0, max_value=25))
    asks: list[Ask[str]] = []
    for request_id in range(count):
        request_score = draw(score)
        for pool in draw(st.sets(st.sampled_from(POOLS), min_size=1)):
            amount = draw(st.one_of(st.just(D(0)), su, small_su))
            asks.append(Ask(request_id, pool, amount, request_score))
    parameters = parameters_check(
        method=draw(st.sampled_from(METHODS)),
        threshold_su=draw(st.one_of(st.just(D(0)), small_su, su)),
        exponent=draw(st.decimals(min_value=0, max_value=4, places=2)),
        floor_su=draw(st.one_of(st.just(D(0)), small_su)),
    )
    return capacity, asks, parameters


@settings(max_examples=300, deadline=None)
@given(rounds())
def test_proposals_stay_within_requests_and_pools_within_capacity(
    round_: tuple[dict[str, Decimal], list[Ask[str]], Parameters],
) -> None:
    capacity, asks, parameters = round_
    result = what_if(capacity=capacity, asks=asks, parameters=parameters)
    assert len(result.proposals) == len(asks)
    for proposal in result.proposals:
        assert 0 <= proposal.proposed_su <= proposal.requested_su
        assert proposal.proposed_su == proposal.proposed_su.quantize(D("0.000001"))
    for fit in result.pools:
        total = sum((p.proposed_su for p in result.proposals if p.pool == fit.pool), D(0))
        assert total == fit.proposed_su <= fit.capacity_su
        assert fit.unallocated_su >= 0


@settings(max_examples=200, deadline=None)
@given(rounds())
def test_every_request_is_granted_in_full_when_the_pool_has_enough(
    round_: tuple[dict[str, Decimal], list[Ask[str]], Parameters],
) -> None:
    capacity, asks, parameters = round_
    result = what_if(capacity=capacity, asks=asks, parameters=parameters)
    for fit in result.pools:
        if fit.requested_su <= fit.capacity_su:
            for proposal in result.proposals:
                if proposal.pool == fit.pool:
                    assert proposal.proposed_su == proposal.requested_su


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.decimals(min_value=0, max_value=10**6, places=6), min_size=1, max_size=20),
    st.decimals(min_value=0, max_value=10**7, places=6),
)
def test_pro_rata_keeps_the_proportions_within_rounding(
    amounts: list[Decimal], capacity: Decimal
) -> None:
    asks = [Ask(n, "cpu", amount) for n, amount in enumerate(amounts)]
    result = what_if(capacity={"cpu": capacity}, asks=asks, parameters=Parameters(PRO_RATA))
    total = sum(amounts, D(0))
    factor = min(D(1), capacity / total) if total else D(1)
    for proposal in result.proposals:
        exact = proposal.requested_su * factor
        assert exact - D("0.000002") <= proposal.proposed_su <= exact + D("0.000001")


@settings(max_examples=200, deadline=None)
@given(rounds())
def test_protect_small_grants_the_small_requests_in_full_when_they_fit(
    round_: tuple[dict[str, Decimal], list[Ask[str]], Parameters],
) -> None:
    capacity, asks, parameters = round_
    parameters = Parameters(
        PROTECT_SMALL, threshold_su=parameters.threshold_su, floor_su=parameters.floor_su
    )
    result = what_if(capacity=capacity, asks=asks, parameters=parameters)
    for fit in result.pools:
        pool_asks = [ask for ask in asks if ask.pool == fit.pool]
        small = [ask for ask in pool_asks if ask.requested_su < parameters.threshold_su]
        needed = sum((ask.requested_su for ask in small), D(0)) + sum(
            (min(parameters.floor_su, a.requested_su) for a in pool_asks if a not in small), D(0)
        )
        if needed <= fit.capacity_su:
            for proposal in result.proposals:
                if proposal.pool == fit.pool and proposal.requested_su < parameters.threshold_su:
                    assert proposal.proposed_su == proposal.requested_su


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.decimals(min_value=0, max_value=10**6, places=6),
            st.decimals(min_value=1, max_value=5, places=2),
        ),
        min_size=2,
        max_size=15,
    ),
    st.decimals(min_value=0, max_value=10**6, places=6),
    st.decimals(min_value=0, max_value=4, places=2),
    st.decimals(min_value=0, max_value=1000, places=6),
)
def test_score_weighted_is_monotone_in_score_for_equal_requests(
    others: list[tuple[Decimal, Decimal]],
    capacity: Decimal,
    exponent: Decimal,
    floor: Decimal,
) -> None:
    # Two equal requests among others, scored differently: the better one never gets less.
    (amount, low), (_, high) = others[0], others[1]
    low, high = min(low, high), max(low, high)
    asks = [Ask(0, "cpu", amount, low), Ask(1, "cpu", amount, high)] + [
        Ask(n + 2, "cpu", other_amount, other_score)
        for n, (other_amount, other_score) in enumerate(others[2:])
    ]
    parameters = parameters_check(method=SCORE_WEIGHTED, exponent=exponent, floor_su=floor)
    proposed = _proposed(what_if(capacity={"cpu": capacity}, asks=asks, parameters=parameters))
    assert proposed[(0, "cpu")] <= proposed[(1, "cpu")]
