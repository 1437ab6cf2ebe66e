"""Dynamic priority from the profiling coefficient, Q(T) paper eq 14 as corrected by DESIGN §4.

Pure maths over a small frozen dataclass: no Django, no settings, no ORM.

The paper prints eq 14 with thresholds K0 and K1 in the conditions but K1 and K2 in the
formulas, so as printed it is neither continuous nor consistent. DESIGN's correction, with
thresholds ``K1 < K2`` and slopes ``C0, C1, C2``::

    K < K1:        Pr = Pr_base * (C0 * (K - K1) + 1)
    K1 <= K < K2:  Pr = Pr_base * (C1 * (K - K1) + 1)
    K >= K2:       Pr = Pr_base * (C2 * (K - K2) + C1 * (K2 - K1) + 1)

It equals ``Pr_base`` at K1, is continuous at both thresholds, and rises with K when the slopes
are positive (Figure 2: lower priority for "low" quality, more for "high"). The formula is
applied as it stands: with steep slopes far below K1 it goes below zero, and a scheduler that
needs a non-negative priority must clamp it.

Exactness: ``Decimal`` in and out; floats are refused like everywhere in the ledger code.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from kit.errors import ApplicationError

_ONE: Final = Decimal(1)


class PriorityCurveError(ApplicationError):
    """A priority policy or input that eq 14 cannot use; the message says which and why."""


def _decimal(name: str, value: Decimal | int) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise PriorityCurveError(f"{name} must be a Decimal or an int, got {value!r}")
    number = Decimal(value)
    if not number.is_finite():
        raise PriorityCurveError(f"{name} must be finite, got {value!r}")
    return number


@dataclass(frozen=True, slots=True)
class PriorityPolicy:
    """Expert thresholds ``k1 < k2`` of the profiling coefficient and slopes ``c0, c1, c2``."""

    k1: Decimal
    k2: Decimal
    c0: Decimal
    c1: Decimal
    c2: Decimal

    def __post_init__(self) -> None:
        for name in ("k1", "k2", "c0", "c1", "c2"):
            object.__setattr__(self, name, _decimal(name, getattr(self, name)))
        if not self.k1 < self.k2:
            raise PriorityCurveError(
                f"thresholds must satisfy K1 < K2, got K1={self.k1}, K2={self.k2}"
            )


def dynamic_priority(
    *, base: Decimal | int, k_prof: Decimal | int, policy: PriorityPolicy
) -> Decimal:
    """Pr_dyn for a job or project with profiling coefficient ``k_prof`` (eq 14, corrected)."""
    base = _decimal("base", base)
    k = _decimal("k_prof", k_prof)
    if k < policy.k1:
        return base * (policy.c0 * (k - policy.k1) + _ONE)  # eq 14, "low"
    if k < policy.k2:
        return base * (policy.c1 * (k - policy.k1) + _ONE)  # eq 14, "medium"
    # eq 14, "high": the C1 term carries the priority reached at K2, so the curve is continuous
    return base * (policy.c2 * (k - policy.k2) + policy.c1 * (policy.k2 - policy.k1) + _ONE)


def priority_curve(
    *,
    policy: PriorityPolicy,
    k_min: Decimal | int,
    k_max: Decimal | int,
    base: Decimal | int = 1,
    samples: int = 0,
) -> tuple[tuple[Decimal, Decimal], ...]:
    """Points ``(K, Pr_dyn)`` of the curve on ``[k_min, k_max]`` for a chart (paper Figure 2).

    The curve is piecewise linear, so the ends and the thresholds inside the range draw it
    exactly; ``samples`` adds that many evenly spaced points between the ends as well.
    """
    low, high = _decimal("k_min", k_min), _decimal("k_max", k_max)
    if not low < high:
        raise PriorityCurveError(f"k_min must be below k_max, got {low} and {high}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise PriorityCurveError(f"samples must be a non-negative integer, got {samples!r}")
    points = {low, high}
    points.update(k for k in (policy.k1, policy.k2) if low < k < high)
    step = (high - low) / (samples + 1)
    points.update(low + step * index for index in range(1, samples + 1))
    return tuple((k, dynamic_priority(base=base, k_prof=k, policy=policy)) for k in sorted(points))
