"""When a grant ends: which notice is due, and what a project's status becomes. Pure: dates and
numbers in, answers out (the services in ``allocations/grants/expiry.py`` read and write).

- A grant ending in ``days_left`` days (its last day minus today: 0 on its last day) is due
  the most urgent notice of ``notice_days`` it has reached: 30, 14, 7 by default. A notice
  missed (the task did not run, the grant came late) is not sent late: only the most urgent
  one counts, so a grant made ten days before its end gets the 14-day notice, then 7.
- A project's status follows its grants: ``active`` while a grant is current or future;
  ``expired`` from the day its last grant ended; ``archived`` (read-only) ``archive_after_days``
  after it expired. A new grant makes an expired project active again; an archived one stays
  archived until staff un-archive it, and a suspended one stays as staff left it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

ACTIVE, EXPIRED, ARCHIVED = "active", "expired", "archived"


def notice_due(*, days_left: int, notice_days: Iterable[int]) -> int | None:
    """The notice (days before the end) a grant with ``days_left`` days to run is due, or None
    when it is not within any (or has ended)."""
    if days_left <= 0:
        return None
    reached = [days for days in notice_days if days >= days_left]
    return min(reached) if reached else None


@dataclass(frozen=True)
class StatusChange:
    status: str
    since: date


def status_next(
    *,
    status: str,
    since: date | None,
    last_grant_end: date | None,
    has_current_or_future_grant: bool,
    today: date,
    archive_after_days: int,
) -> StatusChange | None:
    """The project's next status (and the day it took effect), or None when it stays.
    ``last_grant_end`` is the latest ``period_end`` of its grants (None without any)."""
    if status == ACTIVE:
        if last_grant_end is None or has_current_or_future_grant:
            return None
        return StatusChange(EXPIRED, last_grant_end)
    if status == EXPIRED:
        if has_current_or_future_grant:
            return StatusChange(ACTIVE, today)
        start = since or last_grant_end
        if start is not None and start + timedelta(days=archive_after_days) <= today:
            return StatusChange(ARCHIVED, today)
    return None
