"""Budget arithmetic of allocations. Pure: dates and Decimals in, dataclasses out.

- A grant is split into budget periods of ``months`` calendar months (quarterly by default);
  an even split is exact to the last micro-SU and adds up to the grant.
- A balance is ``available = budget + carried in + adjustments``, ``remaining = available - used``
  (the identity the tests assert), with burn rates and a projected exhaustion date;
  ``free = remaining - reserved``, what is left once queued and running jobs end.
- A grant is ``future``, ``current`` or ``ended`` relative to a day (``grant_status``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_FLOOR, Decimal
from enum import StrEnum

from kit.calendar import add_months, last_day

SU_QUANTUM = Decimal("0.000001")


def periods(start: date, end: date, *, months: int = 3) -> list[tuple[date, date]]:
    """Consecutive periods of ``months`` from ``start``; the last one ends at ``end``."""
    if not start < end:
        raise ValueError(f"a grant period must not be empty ({start} .. {end})")
    if months < 1:
        raise ValueError("a budget period lasts at least one month")
    result = []
    current, step = start, 1
    while current < end:
        following = min(add_months(start, months * step), end)
        result.append((current, following))
        current, step = following, step + 1
    return result


def split_even(total: Decimal, parts: int) -> list[Decimal]:
    """``total`` in ``parts`` amounts that differ by at most one micro-SU and add up exactly."""
    if total < 0:
        raise ValueError("a grant cannot be negative")
    units = int((total / SU_QUANTUM).to_integral_value(ROUND_FLOOR))
    if Decimal(units) * SU_QUANTUM != total:
        raise ValueError(f"{total} has more than 6 decimal places")
    share, extra = divmod(units, parts)
    return [Decimal(share + (1 if index < extra else 0)) * SU_QUANTUM for index in range(parts)]


# An extension moves a grant's end by at most this much: further is a new grant (a renewal).
MAX_EXTENSION_MONTHS = 24


def extension_budgets(
    old_end: date, new_end: date, amount: Decimal, *, months: int = 3
) -> list[tuple[date, date, Decimal]]:
    """An extension of a grant from ``old_end`` to ``new_end`` with ``amount`` SU: budget
    periods of ``months`` over the added span only (the grant's own periods stay as they are),
    ``amount`` split evenly over them."""
    if not old_end < new_end:
        raise ValueError(f"an extension must end after the grant ({new_end} <= {old_end})")
    if new_end > add_months(old_end, MAX_EXTENSION_MONTHS):
        raise ValueError(f"an extension adds at most {MAX_EXTENSION_MONTHS} months")
    spans = periods(old_end, new_end, months=months)
    return [
        (start, end, share)
        for (start, end), share in zip(spans, split_even(amount, len(spans)), strict=True)
    ]


def raise_budgets(spans: list[tuple[date, date]], amount: Decimal, *, on: date) -> list[Decimal]:
    """What a raise of a grant by ``amount`` adds to each of its budget periods ``spans``:
    split evenly over the periods not over on ``on`` (the current one and those to come),
    or all of it to the last period when every period is over. Adds up to ``amount``."""
    if not spans:
        raise ValueError("a grant has at least one budget period")
    open_ = [index for index, (_, end) in enumerate(spans) if end > on] or [len(spans) - 1]
    shares = iter(split_even(amount, len(open_)))
    return [next(shares) if index in open_ else Decimal(0) for index in range(len(spans))]


@dataclass(frozen=True)
class Balance:
    """A project's standing on one pool in one budget period."""

    start: date
    end: date
    budget_su: Decimal
    carried_in_su: Decimal
    adjustments_su: Decimal
    used_su: Decimal
    pending_su: Decimal
    used_last_7_days_su: Decimal
    used_last_30_days_su: Decimal
    on: date
    used_cost: Decimal = Decimal(0)
    """Money cost of the period's charged jobs (the cluster's cost model), from the roll-ups."""
    reserved_su: Decimal = Decimal(0)
    """What queued and running jobs hold (NCI's "reserved"): each at its requested size and
    time limit, or what it used so far without a limit. Counted in the current period only,
    as pending is; never deducted from ``remaining``."""
    used_per_day: tuple[tuple[date, Decimal], ...] = ()
    """The SU charged on each day of the period up to ``on`` that has usage, from the same
    read of the roll-ups as ``used_su``: the burn-down's points."""

    @property
    def last_day(self) -> date:
        return last_day(self.end)

    @property
    def available_su(self) -> Decimal:
        return self.budget_su + self.carried_in_su + self.adjustments_su

    @property
    def remaining_su(self) -> Decimal:
        """available - used: the balance identity (pending charges are shown, not deducted)."""
        return self.available_su - self.used_su

    @property
    def free_su(self) -> Decimal:
        """remaining - reserved: what is left once the queued and running jobs end."""
        return self.remaining_su - self.reserved_su

    @property
    def percent_used(self) -> Decimal | None:
        if self.available_su <= 0:
            return None
        return (self.used_su * 100 / self.available_su).quantize(Decimal("0.01"))

    @property
    def burn_rate_7_days(self) -> Decimal:
        """SU per day over the last 7 days."""
        return (self.used_last_7_days_su / 7).quantize(SU_QUANTUM)

    @property
    def burn_rate_30_days(self) -> Decimal:
        return (self.used_last_30_days_su / 30).quantize(SU_QUANTUM)

    @property
    def burn_rate(self) -> Decimal:
        """SU per day the projection uses: the 30-day burn rate, the 7-day one when higher."""
        return max(self.burn_rate_7_days, self.burn_rate_30_days)

    @property
    def projected_exhaustion(self) -> date | None:
        """When the remaining SU run out at :attr:`burn_rate`; ``None`` when nothing is being
        used or it would not happen before the period ends."""
        day = exhaustion_day(on=self.on, remaining_su=self.remaining_su, su_per_day=self.burn_rate)
        if day is None or self.remaining_su <= 0:
            return day
        return day if day < self.end else None


def exhaustion_day(*, on: date, remaining_su: Decimal, su_per_day: Decimal) -> date | None:
    """The day ``remaining_su`` run out at ``su_per_day`` from ``on`` (``on`` itself when none
    remain), whatever the period's end; ``None`` when nothing is being used."""
    if remaining_su <= 0:
        return on
    if su_per_day <= 0:
        return None
    return on + timedelta(days=int(remaining_su / su_per_day))


@dataclass(frozen=True)
class ExhaustionShift:
    """A budget period's projected exhaustion at its burn rate, and at that rate times the
    ratio of a rate change (SU under the new rates per SU charged)."""

    on: date
    end: date
    remaining_su: Decimal
    burn_rate: Decimal
    draft_burn_rate: Decimal
    current: date | None  # as Balance.projected_exhaustion: None when not before ``end``
    draft: date | None

    @property
    def days_earlier(self) -> int:
        """How many days earlier the period runs out under the new rates (0: not earlier, or
        not before its end)."""
        if self.draft is None:
            return 0
        current = exhaustion_day(
            on=self.on, remaining_su=self.remaining_su, su_per_day=self.burn_rate
        )
        if current is None:  # nothing used now: it never ran out
            return 0
        return max((current - self.draft).days, 0)


def exhaustion_shift(balance: Balance, *, ratio: Decimal) -> ExhaustionShift:
    """Where ``balance`` would run out if its jobs cost ``ratio`` times what they cost now:
    what was used stays used (the change is not retroactive), the burn rate scales."""
    draft_rate = (balance.burn_rate * ratio).quantize(SU_QUANTUM)
    draft = exhaustion_day(on=balance.on, remaining_su=balance.remaining_su, su_per_day=draft_rate)
    return ExhaustionShift(
        on=balance.on,
        end=balance.end,
        remaining_su=balance.remaining_su,
        burn_rate=balance.burn_rate,
        draft_burn_rate=draft_rate,
        current=balance.projected_exhaustion,
        draft=draft
        if draft is not None and (draft < balance.end or balance.remaining_su <= 0)
        else None,
    )


class GrantStatus(StrEnum):
    FUTURE = "future"
    CURRENT = "current"
    ENDED = "ended"


# As (value, label) pairs: the API schema's one name for them (ENUM_NAME_OVERRIDES).
GRANT_STATUS_CHOICES = [(status.value, status.value) for status in GrantStatus]


def grant_status(*, start: date, end: date, today: date) -> GrantStatus:
    """Where a grant of [start, end) stands on ``today`` (the pool's cluster's day): future
    before its first day, current up to and including its last day (``end`` - 1), ended from
    ``end`` on."""
    if today < start:
        return GrantStatus.FUTURE
    if today < end:
        return GrantStatus.CURRENT
    return GrantStatus.ENDED


@dataclass(frozen=True)
class GrantBalance:
    """One grant (an allocation on one pool) as a whole: what was granted (the sum of its
    budget periods' budgets), adjusted and used over all its budget periods. Carry-over only
    moves SU between the grant's own periods, so ``remaining = granted + adjustments - used``
    holds for the grant as it does per period."""

    allocation_id: int
    start: date
    end: date
    granted_su: Decimal
    adjustments_su: Decimal
    used_su: Decimal
    on: date

    @property
    def last_day(self) -> date:
        return last_day(self.end)

    @property
    def available_su(self) -> Decimal:
        return self.granted_su + self.adjustments_su

    @property
    def remaining_su(self) -> Decimal:
        return self.available_su - self.used_su

    @property
    def status(self) -> GrantStatus:
        return grant_status(start=self.start, end=self.end, today=self.on)


# A request this far from its own estimate (either way) is worth a second look: the committee
# reads the estimate beside the amount.
ESTIMATE_TOLERANCE = Decimal(2)


def estimate_mismatch(*, requested_su: Decimal, estimated_su: Decimal) -> Decimal | None:
    """How many times the estimate (or how small a share of it) a request asks for, when that
    is more than ESTIMATE_TOLERANCE either way; None when the two agree well enough or there
    is nothing to compare."""
    if requested_su <= 0 or estimated_su <= 0:
        return None
    ratio = requested_su / estimated_su
    if ratio > ESTIMATE_TOLERANCE or ratio < 1 / ESTIMATE_TOLERANCE:
        return ratio
    return None
