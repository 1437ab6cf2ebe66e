"""What a job's sacct line books: the charging policy of the ledger (DESIGN section 7). Pure.

Only finished jobs are charged; a job still pending or running shows its charge so far as
pending; a job that never ran (cancelled while pending, a pending array range) books nothing;
a node failure is refunded when the cluster's policy says so. The engine prices the job
(``accounting.clusters.charging``); this module decides what of that price the ledger books.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import NamedTuple

_ZERO = Decimal(0)


class Outcome(StrEnum):
    """A ledger row's charge state; the values are those of ``Job.ChargeState``."""

    PENDING = "pending"
    CHARGED = "charged"
    REFUNDED = "refunded"


class Booking(NamedTuple):
    """Made once per imported line: a tuple is the cheapest record to build."""

    outcome: Outcome
    service_units: Decimal
    pending_service_units: Decimal


def booking_never_ran(*, finished: bool) -> Booking:
    """A job that never started: recorded, nothing to charge (pending until sacct ends it)."""
    return Booking(Outcome.CHARGED if finished else Outcome.PENDING, _ZERO, _ZERO)


def booking_for(
    *, finished: bool, state: str, service_units: Decimal, refund_node_failures: bool
) -> Booking:
    """What the ledger books for a job that ran and that the engine priced at ``service_units``."""
    if not finished:
        return Booking(Outcome.PENDING, _ZERO, service_units)
    if state == "NODE_FAIL" and refund_node_failures:
        return Booking(Outcome.REFUNDED, _ZERO, _ZERO)
    return Booking(Outcome.CHARGED, service_units, _ZERO)


def reserved_for(
    *, finished: bool, pending_service_units: Decimal, at_time_limit: Decimal | None
) -> Decimal | None:
    """What a job holds of its project's SU until it ends (NCI's "reserved"): a queued or
    running job its price at its requested size and time limit (``at_time_limit``), never less
    than it has used so far; without a time limit, what it has used so far. A finished job
    holds nothing (None)."""
    if finished:
        return None
    if at_time_limit is None:
        return pending_service_units
    return max(at_time_limit, pending_service_units)
