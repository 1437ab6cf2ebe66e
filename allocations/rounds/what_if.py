"""Fitting a round's open requests to what it has left: the chair's what-if
(docs/allocations.md, "Fitting a round to capacity").

Pure: plain Decimals in, plain Decimals out; no Django. Each pool is fitted on its own. On a
pool with capacity C and requests r_i:

1. **Floors.** Each request is first given f_i = min(floor, r_i). When the floors alone exceed
   C, they are scaled by C / sum(f_i) and nothing else is given (a note says so).
2. **The method** shares what is left, C' = C - sum(f_i), over the rest of each request,
   r'_i = r_i - f_i:

   - ``pro_rata``: every r'_i times one factor, min(1, C' / sum(r'_i));
   - ``protect_small``: requests below the threshold T (r_i < T, the amount asked on the pool)
     get r'_i in full, the others share what remains pro rata; when the small ones alone
     exceed C', they too are cut pro rata and the others get their floor only (a note says so);
   - ``score_weighted``: r'_i times min(1, lambda * g(s_i)), g(s) = (s / 5) ** k, s the mean
     review score (1-5; a request nobody scored counts as 3, a neutral score) and k >= 0 the
     exponent (k = 0 is pro rata). lambda is raised until C' is spent or every request is
     whole (water-filling: what a capped request does not take goes to the others), so lambda
     is the share of its request a request scored 5 keeps.

When every request fits (sum(r_i) <= C), every method grants every request in full. SU have six
decimal places; every figure is rounded down, so that no pool's total exceeds its capacity, and
what rounding leaves stays unallocated (``PoolFit.unallocated_su``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, Context, Decimal, InvalidOperation, localcontext
from functools import lru_cache
from typing import Generic, TypeVar

from kit.errors import ApplicationError

PRO_RATA = "pro_rata"
PROTECT_SMALL = "protect_small"
SCORE_WEIGHTED = "score_weighted"
METHODS = (PRO_RATA, PROTECT_SMALL, SCORE_WEIGHTED)
METHOD_LABELS = {
    PRO_RATA: "pro rata",
    PROTECT_SMALL: "small requests protected",
    SCORE_WEIGHTED: "weighted by score",
}

SU_PLACES = Decimal("0.000001")
WEIGHT_PLACES = Decimal("0.000000000001")  # g(s) to 12 places: every later product is exact
NEUTRAL_SCORE = Decimal(3)  # a request nobody scored, under score_weighted
TOP_SCORE = Decimal(5)
ZERO = Decimal(0)
ONE = Decimal(1)
# Wide enough that sums and products of 24-digit SU and 12-place weights are exact; a division
# rounds down, so no share is ever more than its exact value.
_EXACT = Context(prec=120, rounding=ROUND_DOWN)

Pool = TypeVar("Pool", bound=Hashable)


class WhatIfError(ApplicationError):
    """A what-if's parameters refused; ``field`` names the parameter."""


@dataclass(frozen=True)
class Parameters:
    method: str
    threshold_su: Decimal = ZERO  # protect_small: requests below it are granted in full
    exponent: Decimal = ONE  # score_weighted: k in g(s) = (s / 5) ** k
    floor_su: Decimal = ZERO  # every request gets at least min(floor, request)


@dataclass(frozen=True)
class Ask(Generic[Pool]):
    """One request's amount on one pool, with the request's mean review score."""

    request_id: int
    pool: Pool
    requested_su: Decimal
    score: Decimal | None = None


@dataclass(frozen=True)
class Proposal(Generic[Pool]):
    request_id: int
    pool: Pool
    requested_su: Decimal
    score: Decimal | None
    proposed_su: Decimal


@dataclass(frozen=True)
class PoolFit(Generic[Pool]):
    pool: Pool
    capacity_su: Decimal
    requested_su: Decimal
    proposed_su: Decimal
    factor: Decimal  # pro rata: the cut; protect_small: the others' cut; score: lambda
    notes: tuple[str, ...]

    @property
    def unallocated_su(self) -> Decimal:
        """What the fit leaves: spare capacity, or what rounding down left over."""
        return self.capacity_su - self.proposed_su


@dataclass(frozen=True)
class WhatIf(Generic[Pool]):
    parameters: Parameters
    proposals: tuple[Proposal[Pool], ...]
    pools: tuple[PoolFit[Pool], ...]


def _number(value: object, name: str, field: str) -> Decimal:
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise WhatIfError(f"{name} must be a number", field=field) from None
    if not number.is_finite():
        raise WhatIfError(f"{name} must be a number", field=field)
    if number < 0:
        raise WhatIfError(f"{name} cannot be below zero", field=field)
    return number


def parameters_check(
    *,
    method: str,
    threshold_su: object = ZERO,
    exponent: object = ONE,
    floor_su: object = ZERO,
) -> Parameters:
    """The parameters of a what-if, checked: a known method, and a threshold, an exponent and
    a floor that are numbers not below zero."""
    if method not in METHODS:
        raise WhatIfError(
            f"unknown method {method!r}: use one of {', '.join(METHODS)}", field="method"
        )
    threshold = _number(threshold_su, "the threshold", "threshold_su")
    power = _number(exponent, "the exponent", "exponent")
    if power > 10:
        raise WhatIfError("the exponent is at most 10", field="exponent")
    floor = _number(floor_su, "the floor", "floor_su")
    return Parameters(
        method=method,
        threshold_su=threshold.quantize(SU_PLACES, rounding=ROUND_DOWN),
        exponent=power,
        floor_su=floor.quantize(SU_PLACES, rounding=ROUND_DOWN),
    )


def score_weight(score: Decimal | None, exponent: Decimal) -> Decimal:
    """g(s) = (s / 5) ** k, to 12 places rounded down; a request nobody scored counts as 3."""
    value = NEUTRAL_SCORE if score is None else score
    if not ONE <= value <= TOP_SCORE:
        raise WhatIfError(f"a review score is from 1 to 5, not {value}", field="score")
    return _weight(value, exponent)


@lru_cache(maxsize=4096)
def _weight(score: Decimal, exponent: Decimal) -> Decimal:
    # A weight, not SU: a Decimal power with a fractional exponent costs a quarter of a
    # millisecond, a float one nothing, and its error (1e-16) is far below the 12 places kept.
    # Rounded down to 12 places it is a Decimal again, so every SU figure stays exact; mean
    # scores repeat (two places from 1 to 5), hence the cache.
    if exponent == 0:
        return ONE
    weight = Decimal(repr(math.pow(float(score / TOP_SCORE), float(exponent))))
    return min(weight, ONE).quantize(WEIGHT_PLACES, rounding=ROUND_DOWN)


def _down(value: Decimal) -> Decimal:
    return value.quantize(SU_PLACES, rounding=ROUND_DOWN)


def _share(amount: Decimal, numerator: Decimal, denominator: Decimal) -> Decimal:
    """amount * numerator / denominator, never above its exact value (in ``_EXACT``, which
    ``what_if`` sets for all of its arithmetic)."""
    return amount * numerator / denominator


def _pro_rata(rests: Sequence[Decimal], capacity: Decimal) -> tuple[list[Decimal], Decimal]:
    """Every amount cut by one factor, min(1, capacity / total); the exact shares and the factor."""
    total = sum(rests, ZERO)
    if total <= capacity:
        return list(rests), ONE
    return [_share(rest, capacity, total) for rest in rests], _share(ONE, capacity, total)


def _water_fill(
    rests: Sequence[Decimal], weights: Sequence[Decimal], capacity: Decimal
) -> tuple[list[Decimal], Decimal]:
    """min(rest, lambda * weight * rest), lambda raised until capacity is spent or every rest
    is whole; the exact shares and lambda."""
    if sum(rests, ZERO) <= capacity:
        return list(rests), ONE
    shares = [ZERO] * len(rests)
    open_ = {index for index, rest in enumerate(rests) if rest > 0}
    left = capacity
    while True:
        demand = sum((rests[index] * weights[index] for index in open_), ZERO)
        # lambda = left / demand; a request is whole once lambda * weight >= 1.
        capped = {index for index in open_ if weights[index] * left >= demand}
        if not capped:
            break
        for index in capped:
            shares[index] = rests[index]
            left -= rests[index]
        open_ -= capped
        if not open_:
            return shares, ONE
    for index in open_:
        shares[index] = _share(rests[index] * weights[index], left, demand)
    return shares, _share(ONE, left, demand)


def _fit_pool(
    asks: Sequence[Ask[Pool]], capacity: Decimal, parameters: Parameters
) -> tuple[list[Decimal], Decimal, list[str]]:
    notes: list[str] = []
    requested = [ask.requested_su for ask in asks]
    floors = [min(parameters.floor_su, amount) for amount in requested]
    floor_total = sum(floors, ZERO)
    if floor_total > capacity:
        notes.append(
            f"the floors alone ({floor_total.normalize():f} SU) exceed the capacity: "
            "they are scaled pro rata and nothing else is given"
        )
        shares, factor = _pro_rata(floors, capacity)
        return [_down(share) for share in shares], _down(factor), notes
    left = capacity - floor_total
    rests = [amount - floor for amount, floor in zip(requested, floors, strict=True)]
    if parameters.method == PRO_RATA:
        shares, factor = _pro_rata(rests, left)
    elif parameters.method == PROTECT_SMALL:
        small = [amount < parameters.threshold_su for amount in requested]
        pairs = list(zip(rests, small, strict=True))
        small_rests = [rest if is_small else ZERO for rest, is_small in pairs]
        small_total = sum(small_rests, ZERO)
        if small_total > left:
            notes.append(
                "the small requests alone exceed what is left: they too are cut pro rata, "
                "and the others get their floor only"
            )
            shares, factor = _pro_rata(small_rests, left)
        else:
            large_rests = [ZERO if is_small else rest for rest, is_small in pairs]
            large_shares, factor = _pro_rata(large_rests, left - small_total)
            shares = [
                rest if is_small else share
                for rest, share, is_small in zip(rests, large_shares, small, strict=True)
            ]
    else:
        weights = [score_weight(ask.score, parameters.exponent) for ask in asks]
        shares, factor = _water_fill(rests, weights, left)
    proposed = [_down(floor + share) for floor, share in zip(floors, shares, strict=True)]
    return proposed, _down(factor), notes


def what_if(
    *,
    capacity: Mapping[Pool, Decimal],
    asks: Sequence[Ask[Pool]],
    parameters: Parameters,
) -> WhatIf[Pool]:
    """Proposed grants for ``asks`` that fit ``capacity`` per pool by ``parameters.method``
    (the module's docstring has the rules). A pool with no capacity given has none (0 SU); a
    capacity below zero counts as zero."""
    by_pool: dict[Pool, list[Ask[Pool]]] = {pool: [] for pool in capacity}
    for ask in asks:
        if ask.requested_su < 0:
            raise WhatIfError("a request cannot ask for less than zero SU", field="requested_su")
        by_pool.setdefault(ask.pool, []).append(ask)
    proposals: list[Proposal[Pool]] = []
    fits: list[PoolFit[Pool]] = []
    for pool, pool_asks in by_pool.items():
        room = _down(max(capacity.get(pool, ZERO), ZERO))
        with localcontext(_EXACT):
            proposed, factor, notes = _fit_pool(pool_asks, room, parameters)
        for ask, value in zip(pool_asks, proposed, strict=True):
            proposals.append(
                Proposal(ask.request_id, pool, ask.requested_su, ask.score, proposed_su=value)
            )
        requested = sum((ask.requested_su for ask in pool_asks), ZERO)
        fits.append(PoolFit(pool, room, requested, sum(proposed, ZERO), factor, notes=tuple(notes)))
    return WhatIf(parameters=parameters, proposals=tuple(proposals), pools=tuple(fits))
